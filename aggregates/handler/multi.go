package handler

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/aggregates/exec"
	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite"
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
func (h *Handler) serveMulti(ctx context.Context, q *pgproto3.Query, c *sessionConn, st sessionSettings, snap *catalog.Snapshot,
	s *wire.Session, start time.Time) (done bool, why string, err error) {
	stmts, err := rewrite.Split(q.String)
	if err != nil {
		return false, "the statements could not be split: " + err.Error(), nil
	}
	if c.txStatus == 'E' {
		return false, "the transaction is aborted", nil
	}
	plans := make([]*rewrite.Plan, len(stmts))
	answerable := 0
	for i, sq := range stmts {
		if sq.Control {
			return false, "the text holds a transaction control statement or COPY among several statements", nil
		}
		if plans[i] = h.multiPlan(sq.SQL, snap, st); plans[i] != nil {
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
	failed := false
	// stale is set once a statement of the text ran upstream: it may have
	// changed what the plans above were made with (SET, RESET, SET ROLE,
	// set_config() in any function it called, DISCARD, a rollup created or
	// dropped), so the statements after it are planned again with what
	// the session holds then, as PostgreSQL runs each with the settings in
	// effect when it starts. Reading the session's state back is the only
	// sure way: no scan of the text can tell what a function call sets.
	// It is read back only before a statement the prefilter lets through;
	// relayed stays set, so every later plan is made anew, with what was
	// read last.
	stale, relayed := false, false
	for i, sq := range stmts {
		p := plans[i]
		if relayed {
			p = nil
			if rewrite.Prefilter(sq.SQL) {
				if stale {
					var err error
					if st, snap, err = h.reread(ctx, c); err != nil {
						if !isPgError(err) {
							return true, "", err
						}
						s.Send(errorResponse(err)) // a cancel, say
						failed = true
						break
					}
					stale = false
				}
				if snap != nil {
					p = h.multiPlan(sq.SQL, snap, st)
				}
			}
		}
		if p != nil {
			holds, err := c.guardHolds(ctx, p.Guard)
			if err != nil {
				if !isPgError(err) {
					return true, "", err
				}
				s.Send(errorResponse(err)) // a cancel, say
				failed = true
				break
			}
			if !holds {
				p = nil // another table by that name on this search_path
			}
		}
		if p == nil {
			stale, relayed = true, true
			errored, err := relayStatement(c, s, sq.SQL)
			if err != nil {
				return true, "", err
			}
			if errored {
				failed = true
				break
			}
			continue
		}
		ans, err := h.run(ctx, c, st, p, exec.Params{}, nil)
		if err != nil {
			switch {
			case !isPgError(err) && !errors.Is(err, exec.ErrData):
				return true, "", err
			case clientVisible(err):
				s.Send(errorResponse(err))
				failed = true
			default:
				// As for a single statement: back to the savepoint, and
				// PostgreSQL answers the statement itself.
				h.Log.Info("rollup answer failed: statement passed through", "rollup", p.Rollup, "err", err)
				if err := c.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint); err != nil {
					return true, "", err
				}
				stale, relayed = true, true
				errored, err := relayStatement(c, s, sq.SQL)
				if err != nil {
					return true, "", err
				}
				failed = errored
			}
			if failed {
				break
			}
			continue
		}
		s.Send(notice(ans.Notice(p)))
		s.Send(&pgproto3.RowDescription{Fields: ans.Fields})
		for _, r := range ans.Rows {
			s.Send(&pgproto3.DataRow{Values: r})
		}
		s.Send(&pgproto3.CommandComplete{CommandTag: []byte(ans.Tag)})
		h.recordAnswered(sq.SQL, p, ans, start)
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

// multiPlan is the plan answering one statement of a text of several from
// a rollup, or nil if it goes upstream.
func (h *Handler) multiPlan(sql string, snap *catalog.Snapshot, st sessionSettings) *rewrite.Plan {
	p := h.planStatement(sql, snap, st).plan
	if p == nil || p.Kind != rewrite.FromRollup || p.Explain || p.Params > 0 {
		return nil
	}
	return p
}

// reread reads the session's settings and the catalog again, inside the
// transaction the text runs in; snap is nil when the catalog cannot be
// read, and the statements then go upstream. The reads run under a
// savepoint: one that fails (the statements before may have taken the
// role's privilege on the catalog) must not abort the transaction. err is
// a lost session, or a cancel or timeout, which ends the text.
func (h *Handler) reread(ctx context.Context, c *sessionConn) (st sessionSettings, snap *catalog.Snapshot, err error) {
	if err := c.Exec(ctx, "SAVEPOINT "+savepoint); err != nil {
		return st, nil, err
	}
	st, err = h.settings(ctx, c)
	if err == nil && st.catalogOK {
		snap, err = h.catalogFor(ctx, c, st.fingerprint)
	}
	if err != nil && (!isPgError(err) && !errors.Is(err, errCatalog) || clientCancelled(err)) {
		return st, nil, err
	}
	end := "RELEASE SAVEPOINT " + savepoint
	// settings ignores a failed fingerprint read, which left the
	// transaction aborted all the same.
	if err != nil || c.txStatus == 'E' {
		end = "ROLLBACK TO SAVEPOINT " + savepoint + "; " + end
		snap = nil
	}
	if err := c.Exec(ctx, end); err != nil {
		return st, nil, err
	}
	if !st.catalogOK {
		snap = nil
	}
	return st, snap, nil
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
