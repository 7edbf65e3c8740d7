package proxy

import (
	"cmp"
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/rewrite/syntax"
	"github.com/pgsketch/pgsketch/wire"
)

// serveMulti answers a simple Query holding several statements, some of
// which a rollup answers: the statements run one by one, each answered
// from its rollup or sent upstream alone, with the replies PostgreSQL
// would send for the whole text.
//
// PostgreSQL runs such a text as one implicit transaction: its statements
// commit together, and an error ends the text and rolls back what came
// before it. Outside a transaction block the proxy opens one (BEGIN) and
// ends it (COMMIT, or ROLLBACK after an error) itself; inside one the
// statements run in it, and an error leaves it aborted, as PostgreSQL
// does. A text with a statement that steers transactions (BEGIN, COMMIT,
// SAVEPOINT, ...) or a COPY goes upstream whole, as does one in an aborted
// transaction. It returns done false when it left the text untouched, for
// the caller to pass through with reason why.
func (h *Handler) serveMulti(ctx context.Context, q *pgproto3.Query, c *sessionConn, v view, s *wire.Session,
	start time.Time) (done bool, why string, err error) {
	stmts, err := syntax.Split(q.String)
	if err != nil {
		return false, "the statements could not be split: " + err.Error(), nil
	}
	if c.txStatus == 'E' {
		return false, "the transaction is aborted", nil
	}
	planned := make([]verdict, len(stmts))
	answerable := 0
	for i, sq := range stmts {
		if sq.Control {
			return false, "the text holds a transaction control statement or COPY among several statements", nil
		}
		if planned[i] = h.decide(v, statement{sql: sq.SQL, inText: true}); planned[i].plan != nil || planned[i].unsupported != "" {
			answerable++
		}
	}
	if answerable == 0 {
		return false, "no statement of the text is answered from a rollup", nil
	}

	implicit := c.txStatus == 'I'
	if implicit {
		if err := c.Exec(ctx, "BEGIN"); err != nil {
			return true, "", err // cannot fail but for a lost session
		}
	}
	t := &textRun{h: h, c: c, s: s, v: v, start: start}
	failed := false
	for i, sq := range stmts {
		var err error
		if failed, err = t.statement(ctx, sq.SQL, planned[i]); err != nil {
			return true, "", err
		}
		if failed {
			break
		}
	}
	if implicit {
		end := "COMMIT"
		if failed {
			end = "ROLLBACK"
		}
		if err := c.Exec(ctx, end); err != nil {
			if !isPgError(err) {
				return true, "", err
			}
			s.Send(errorResponse(err)) // a deferred constraint, say
		}
	}
	s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
	return true, "", s.Flush()
}

// textRun is a multi-statement text under way, statement by statement.
type textRun struct {
	h     *Handler
	c     *sessionConn
	s     *wire.Session
	v     view
	start time.Time
	// stale is set once a statement of the text ran upstream: it may have
	// changed what the plans above were made with (SET, RESET, SET ROLE,
	// set_config() in any function it called, DISCARD, a rollup created or
	// dropped), so the statements after it are planned again with what
	// the session holds then, as PostgreSQL runs each with the settings in
	// effect when it starts. Reading the session's state back is the only
	// sure way: no scan of the text can tell what a function call sets.
	// It is read back only before a statement the prefilter lets through;
	// relayed stays set, so every later statement is planned with what was
	// read last.
	stale, relayed bool
}

// statement answers one statement of the text from its rollup, or sends it
// upstream alone; planned is decide's verdict on it before the text ran,
// which holds until a statement of the text runs upstream. failed reports
// an error sent to the client, which ends the text.
func (t *textRun) statement(ctx context.Context, sql string, planned verdict) (failed bool, err error) {
	h, c, s := t.h, t.c, t.s
	st := statement{sql: sql, inText: true}
	var vd verdict
	switch {
	case !t.relayed:
		vd = planned
		if planned.plan != nil {
			vd, err = h.carryOut(ctx, c, t.v, st, planned)
		}
	case syntax.Prefilter(sql):
		if t.stale {
			if t.v, err = h.reread(ctx, c); err != nil {
				if !isPgError(err) {
					return false, err
				}
				s.Send(errorResponse(err)) // a cancel, say
				return true, nil
			}
			t.stale = false
		}
		if t.v.snap != nil {
			vd, err = h.answer(ctx, c, t.v, st)
		}
	}
	if err != nil {
		if !sessionGoesOn(err) {
			return false, err
		}
		if clientVisible(err) || c.txStatus == 'E' {
			// A cancel, say, or an error that aborted the transaction.
			s.Send(errorResponse(err))
			return true, nil
		}
		// As for a single statement: run rolled back to its savepoint,
		// and PostgreSQL answers the statement exactly, after a NOTICE.
		if n := h.recordFallback(sql, fallbackOf(vd.plan, err), t.start); n != "" {
			s.Send(notice(n))
		}
		vd = verdict{pass: "the rollup answer failed"}
	}
	switch {
	case vd.ans != nil:
		sendAnswer(s, vd)
		h.recordAnswered(sql, vd.plan, vd.ans, t.start)
		return false, nil
	case vd.substitute() != nil:
		if n := vd.plan.Header().Notice; n != "" {
			s.Send(notice(n))
		}
		t.stale, t.relayed = true, true
		return relayStatement(c, s, vd.substitute().SQL)
	}
	run, unsupported := exactly(sql)
	if unsupported != "" {
		err := refuseUnsupported(ctx, c, unsupported)
		if !isPgError(err) {
			return false, err
		}
		s.Send(errorResponse(err))
		return true, nil
	}
	if run != sql && vd.pass != "the rollup answer failed" {
		s.Send(notice(countedExactly(cmp.Or(vd.pass, "the rollup catalog could not be read"))))
	}
	t.stale, t.relayed = true, true
	return relayStatement(c, s, run)
}

// reread reads the session's settings and the catalog again, inside the
// transaction the text runs in; snap is nil when the catalog cannot be
// read, and the statements then go upstream. The reads run under a
// savepoint: one that fails (the statements before may have taken the
// role's privilege on the catalog) must not abort the transaction. err is
// a lost session, or a cancel or timeout, which ends the text.
func (h *Handler) reread(ctx context.Context, c *sessionConn) (view, error) {
	if err := c.Exec(ctx, "SAVEPOINT "+savepoint); err != nil {
		return view{}, err
	}
	v, why, err := h.readView(ctx, c)
	if err != nil && (!isPgError(err) || clientCancelled(err)) {
		return view{}, err
	}
	end := "RELEASE SAVEPOINT " + savepoint
	// settings ignores a failed fingerprint read, which left the
	// transaction aborted all the same.
	if err != nil || c.txStatus == 'E' {
		end = "ROLLBACK TO SAVEPOINT " + savepoint + "; " + end
		v.snap = nil
	}
	if err := c.Exec(ctx, end); err != nil {
		return view{}, err
	}
	if why != "" {
		v.snap = nil
	}
	return v, nil
}

// relayStatement sends sql upstream as a simple Query and relays its
// replies but the ReadyForQuery, whose status it records; errored reports
// an ErrorResponse among them.
func relayStatement(c *sessionConn, s *wire.Session, sql string) (errored bool, err error) {
	if err := c.send(&pgproto3.Query{String: sql}); err != nil {
		return false, err
	}
	for {
		msg, err := c.receive()
		if err != nil {
			return errored, err
		}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			c.txStatus = m.TxStatus
			return errored, nil
		case *pgproto3.ErrorResponse:
			errored = true
		case *pgproto3.CopyInResponse, *pgproto3.CopyOutResponse, *pgproto3.CopyBothResponse:
			return errored, errProtocol // COPY is never relayed this way (Statement.Control)
		}
		if err := s.Send(msg); err != nil {
			return errored, err
		}
	}
}
