package proxy

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/rewrite"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
	"github.com/pgsketch/pgsketch/wire"
)

// serveQuery answers a simple Query the rewriter may answer from a rollup
// (or SHOW of a pgsketch setting: cmd, as syntax.ParseCommand read it).
// Whatever it cannot answer goes upstream unchanged.
func (h *Handler) serveQuery(ctx context.Context, q *pgproto3.Query, cmd syntax.Command, s *wire.Session) error {
	start := time.Now()
	// The upstream has answered every earlier request (the relay hands a
	// Query over only then), so its last ReadyForQuery is the session's
	// state; unless an extended-protocol request served here ended without
	// Sync: the upstream is then inside that request's implicit
	// transaction, perhaps in a block it began, and the state is unknown
	// (0: the first statements run without the JIT setting, which would
	// outlive them in a block, and unprepared).
	var status byte
	if es := extState(s); !es.dirty && !es.discarding {
		_, status = s.ReadyForQuery()
	}
	c := &sessionConn{s: s, txStatus: status}
	// pass sends the query to PostgreSQL, its APPROX_COUNT_DISTINCT
	// counted exactly (or refused).
	pass := func(reason string) error {
		run, unsupported := exactly(q.String)
		if unsupported != "" {
			return h.failed(ctx, c, s, nil, refuseUnsupported(ctx, c, unsupported), q.String, start)
		}
		if run != q.String {
			s.Send(notice(countedExactly(reason)))
		}
		return h.recordPassed(q.String, reason, start, forwardQuery(run, s))
	}
	if cmd.Show != "" {
		st, err := h.settings(ctx, c)
		if err != nil {
			if isPgError(err) { // an aborted transaction: PostgreSQL answers
				return pass("the transaction is aborted")
			}
			return err
		}
		return show(cmd.Show, st, c, s)
	}
	v, why, vd, rerr, err := h.viewAnswer(ctx, c, statement{sql: q.String})
	if rerr != nil {
		if isPgError(rerr) { // an aborted transaction, say: PostgreSQL answers
			return pass("the session's settings or catalog could not be read: " + rerr.Error())
		}
		return rerr
	}
	if why != "" {
		return pass(why)
	}
	switch {
	case err != nil:
		return h.failed(ctx, c, s, vd.plan, err, q.String, start)
	case vd.multi:
		done, why, err := h.serveMulti(ctx, q, c, v, s, start)
		if !done && err == nil {
			return pass(why)
		}
		return err
	case vd.pass != "":
		h.Log.Debug("query passed through", "reason", vd.pass)
		return pass(vd.pass)
	case vd.explain != nil:
		return sendExplain(vd.explain, c, s)
	case vd.ans == nil: // a substitute: the exact query in place of APPROX_COUNT_DISTINCT
		n := vd.plan.Header().Notice
		if n != "" {
			s.Send(notice(n))
		}
		return h.recordPassed(q.String, n, start, forwardQuery(vd.substitute().SQL, s))
	}
	sendAnswer(s, vd)
	s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
	h.recordAnswered(q.String, vd.plan, vd.ans, start)
	return s.Flush()
}

// sendAnswer sends a rollup's answer as a Query's result: its NOTICE, the
// columns, the rows and the command tag.
func sendAnswer(s *wire.Session, vd verdict) {
	s.Send(notice(vd.ans.Notice(vd.plan.Header())))
	s.Send(&pgproto3.RowDescription{Fields: vd.ans.Fields})
	for _, r := range vd.ans.Rows {
		s.Send(&pgproto3.DataRow{Values: r})
	}
	s.Send(&pgproto3.CommandComplete{CommandTag: []byte(vd.ans.Tag)})
}

// failed handles an error of answering a Query: the session ends if the
// upstream is lost; a cancel or timeout, or a refusal, goes to the client
// as PostgreSQL's error (the transaction block, if any, is then aborted as
// the original query's would be); anything else (no privilege on the
// rollup or the base table, bad rollup data, a check of the catalog's
// refusing the rollup; run rolled back to its savepoint) is a fallback:
// PostgreSQL answers the query exactly (its APPROX_COUNT_DISTINCT counted
// as COUNT(DISTINCT ...)), after a NOTICE saying why the rollup was not
// used, and the status page counts it.
func (h *Handler) failed(ctx context.Context, c *sessionConn, s *wire.Session, p rewrite.Plan, err error, original string, start time.Time) error {
	if !sessionGoesOn(err) {
		return err
	}
	if clientVisible(err) {
		s.Send(errorResponse(err))
		s.Send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus})
		return s.Flush()
	}
	run, unsupported := exactly(original)
	if unsupported != "" {
		// No plan answers such a statement: not reached, but never
		// PostgreSQL's "function does not exist".
		return h.failed(ctx, c, s, p, refuseUnsupported(ctx, c, unsupported), original, start)
	}
	if n := h.recordFallback(original, fallbackOf(p, err), start); n != "" {
		s.Send(notice(n))
	}
	return forwardQuery(run, s)
}

func notice(msg string) *pgproto3.NoticeResponse {
	return &pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: msg}
}

// forwardQuery sends a simple Query upstream and relays its replies.
func forwardQuery(sql string, s *wire.Session) error {
	return forward(&wire.Request{Messages: []pgproto3.FrontendMessage{&pgproto3.Query{String: sql}}}, s)
}
