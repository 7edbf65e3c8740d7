package handler

import (
	"context"
	"errors"
	"time"

	"github.com/pgsketch/pgsketch/aggregates/exec"
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
	// and PostgreSQL answers instead; without, the upstream discards up to
	// Sync, so the error is the client's.
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
		h.Log.Info("rollup answer failed: statement executed upstream", "err", err)
		if n := refusedNotice(err); n != nil {
			x.s.Send(n)
		}
		return "", nil
	}
	v, why, err := h.readView(ctx, c)
	if !c.noSync {
		es.txStatus = c.txStatus
	}
	if err != nil {
		return fail(err)
	}
	if why != "" || es.txStatus == 'E' {
		return "", nil
	}
	vd, err := h.answer(ctx, c, v, statement{sql: p.stmt.sql, extended: true, described: p.stmt.fields,
		params: exec.Params{OIDs: p.stmt.paramOIDs, Values: p.params, Formats: p.paramFormats}, formats: p.resultFormats})
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
		return vd.plan.Notice, nil
	}
	p.answered = true
	p.rows = vd.ans.Rows
	h.recordAnswered(p.stmt.sql, vd.plan, vd.ans, start)
	return vd.ans.Notice(vd.plan), nil
}
