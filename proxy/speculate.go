package proxy

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/upstream"
)

// A statement is planned against the session's view: its settings and
// the rollup catalog as its role sees them (readView), which the proxy
// reads from the session before each statement, since the client may have
// changed them meanwhile. Read first, they cost a round trip of their own.
//
// When the session is idle and its view was read before, the statement is
// instead planned against that view, and the reading is sent in the same
// round trip as the first statement the answer runs upstream, ahead of
// it (speculation). If the settings and the catalog's fingerprint read
// there are those of the view, the answer stands: it was planned and run
// as it would have been after a reading of its own. If they differ, every
// reply of that round trip is set aside (errViewChanged), and the view is
// read and the statement answered anew. A verdict that sends nothing
// upstream (a pass-through, say) is confirmed before it is acted upon.
// The statements the answer runs only read, so one run in a view that
// turns out stale changes nothing.

// errViewChanged is the error of statements sent after a reading of the
// view that differed from the view they were planned in.
var errViewChanged = errors.New("the session's settings or catalog changed since the statement was planned")

// speculation is a view in use before its confirmation.
type speculation struct {
	// read is the view's settings row and catalog fingerprint (viewKey).
	read string
	// pending: not confirmed yet; changed: the reading differed.
	pending, changed bool
}

// lastView is a session's view as last read, with its viewKey.
type lastView struct {
	v    view
	read string
}

// viewKey is the settings row r and catalog fingerprint fp as one string.
func viewKey(r [][]byte, fp string) string {
	var b strings.Builder
	for _, v := range r {
		if v == nil {
			b.WriteString("\x01")
		} else {
			b.Write(v)
		}
		b.WriteByte(0)
	}
	b.WriteString(fp)
	return b.String()
}

// viewAnswer reads the session's view and answers s in it, speculating
// when it can. why says why no statement can be answered in the view
// (readView's pass); readErr is an error of reading the view, err one of
// answering.
func (h *Handler) viewAnswer(ctx context.Context, c *sessionConn, s statement) (v view, why string, vd verdict, readErr, err error) {
	es := sessionState(c.s)
	if last := es.last; last != nil && c.txStatus == 'I' && !c.noSync && !c.failed {
		c.spec = &speculation{read: last.read, pending: true}
		vd, err = h.answer(ctx, c, last.v, s)
		if c.spec.pending && !errors.Is(err, errViewChanged) {
			// Nothing went upstream: confirm the view before acting.
			if cerr := c.confirm(ctx); cerr != nil && !errors.Is(cerr, errViewChanged) {
				c.spec = nil
				return last.v, "", verdict{}, cerr, nil
			}
		}
		sp := c.spec
		c.spec = nil
		if !sp.changed && !errors.Is(err, errViewChanged) {
			return last.v, "", vd, nil, err
		}
		es.last = nil
	}
	v, why, readErr = h.readView(ctx, c)
	if readErr == nil && why == "" && c.txStatus == 'E' {
		why = "the transaction is aborted"
	}
	if readErr != nil || why != "" {
		return v, why, verdict{}, readErr, nil
	}
	if v.st.fingerprint != "" && v.snap != nil {
		es.last = &lastView{v: v, read: v.st.read}
	}
	vd, err = h.answer(ctx, c, v, s)
	return v, "", vd, nil, err
}

// confirm reads the view, on its own, for a speculation still pending,
// and returns errViewChanged if it differs from the speculation's.
func (c *sessionConn) confirm(ctx context.Context) error {
	if c.spec == nil || !c.spec.pending {
		return nil
	}
	return c.speculate(ctx, nil, nil)[0]
}

// viewSQL reads the view in one statement, for a speculation: the
// settings row with the catalog fingerprint after it. Unlike settingsSQL it
// can fail (a role that lost the right to read the catalog); the
// speculation's view then counts as changed, and readView reads it anew
// with the two statements apart.
const viewSQL = settingsSQL + ",\n (" + fingerprintSQL + ")"

// speculate runs sts as runMany does, after the statements that read the
// view, in the same round trip; when that reading differs from the
// speculation's view (or fails), every statement's error is
// errViewChanged. With no statements, it only confirms the view.
func (c *sessionConn) speculate(ctx context.Context, sts []upstream.Statement, each []func(pgproto3.BackendMessage) error) []error {
	sp := c.spec
	sp.pending = false
	var row [][]byte
	all := append([]upstream.Statement{{SQL: viewSQL}}, sts...)
	fs := make([]func(pgproto3.BackendMessage) error, len(all))
	fs[0] = func(msg pgproto3.BackendMessage) error {
		if dr, ok := msg.(*pgproto3.DataRow); ok && row == nil {
			row = cloneRow(dr.Values)
		}
		return nil
	}
	copy(fs[1:], each)
	errs := c.runMany(ctx, all, fs)
	if errs[0] != nil || len(row) != settingsColumns+1 || row[settingsColumns] == nil ||
		viewKey(row[:settingsColumns], string(row[settingsColumns])) != sp.read {
		sp.changed = true
		// Statements prepared in this round trip were parsed in settings
		// other than those they are kept under.
		for _, st := range sts {
			sessionState(c.s).prepared.forget(st)
		}
		out := make([]error, max(len(sts), 1))
		for i := range out {
			out[i] = errViewChanged
		}
		return out
	}
	if len(sts) == 0 {
		return []error{nil}
	}
	return errs[1:]
}
