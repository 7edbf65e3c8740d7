package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/rewrite"
)

// answerPortal decides how p executes: from a rollup (p.answered, p.rows)
// or upstream. It returns the notice to send before the rows.
func (h *Handler) answerPortal(ctx context.Context, x *extRequest, p *ownedPortal) (string, error) {
	start := time.Now()
	es := x.es
	if es.txStatus == 'E' {
		return "", nil // PostgreSQL says the transaction is aborted
	}
	c := &sessionConn{s: x.s, ext: true, noSync: es.dirty, txStatus: es.txStatus}
	// Failures of the proxy's statements: with Sync they are contained,
	// and PostgreSQL answers instead (the statement prepared upstream is
	// the exact one, describeSQL), after a NOTICE saying why; without, the
	// upstream discards up to Sync, so the error is the client's.
	var plan rewrite.Plan
	fail := func(err error) (string, error) {
		if !isPgError(err) && !errors.Is(err, errDiscarding) && !errors.Is(err, exec.ErrData) {
			return "", err
		}
		if c.failed {
			x.upErr = true
			es.discarding = true
			x.s.Send(errorResponse(err))
			return "", nil
		}
		if clientVisible(err) {
			es.discarding = true
			x.s.Send(errorResponse(err))
			return "", nil
		}
		if plan == nil {
			// The session's settings or the catalog could not be read:
			// no rollup was tried.
			h.Log.Info("statement executed upstream: the session could not be read", "err", err)
			return "", nil
		}
		return h.recordFallback(p.stmt.sql, fallbackOf(plan, err), start), nil
	}
	_, why, vd, rerr, err := h.viewAnswer(ctx, c, statement{sql: p.stmt.sql, extended: true, described: p.stmt.fields,
		params: exec.Params{OIDs: p.stmt.paramOIDs, Values: p.params, Formats: p.paramFormats}, formats: p.resultFormats})
	if !c.noSync {
		es.txStatus = c.txStatus
	}
	if rerr != nil {
		return fail(rerr)
	}
	if why != "" {
		return "", nil
	}
	plan = vd.plan
	if !c.noSync {
		es.txStatus = c.txStatus
	}
	switch {
	case err != nil:
		return fail(err)
	case vd.pass != "" || vd.multi:
		h.Log.Debug("statement executed upstream", "reason", vd.pass)
		_ = h.recordPassed(p.stmt.sql, vd.pass, start, nil) // latency: planning only
		return "", nil
	case vd.explain != nil:
		for _, l := range vd.explain {
			p.rows = append(p.rows, [][]byte{[]byte(l)})
		}
		p.answered = true
		return "", nil
	case vd.ans == nil:
		// A substitute: the statement prepared upstream is it already.
		return vd.plan.Header().Notice, nil
	}
	p.answered = true
	p.rows = vd.ans.Rows
	h.recordAnswered(p.stmt.sql, vd.plan, vd.ans, start)
	return vd.ans.Notice(vd.plan.Header()), nil
}
