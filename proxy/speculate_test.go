package proxy

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/wire/wiretest"
)

// settingsRow is a reply to settingsSQL.
var settingsRow = [][]byte{[]byte("public"), []byte("UTC"), []byte("app"), nil, []byte("ISO, MDY"), []byte("postgres"),
	[]byte("1"), []byte("hex"), []byte("UTF8"), []byte("t"), nil, nil, nil, []byte("on"), []byte("Default"), []byte("f")}

// upstreamRead is the upstream's part of one statement the proxy runs
// outside a transaction block, prepared now as stmt: the JIT setting, the
// statement, Sync.
func upstreamRead(stmt, sql string) []wiretest.Step {
	out := []wiretest.Step{
		wiretest.Expect(&pgproto3.Parse{Query: noJIT}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Parse{Name: stmt, Query: sql}),
		wiretest.Expect(&pgproto3.Bind{PreparedStatement: stmt}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P'}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Sync{}),
	}
	return out
}

// upstreamReply is the upstream's reply to upstreamRead.
func upstreamReply(rows ...[][]byte) []pgproto3.BackendMessage {
	out := []pgproto3.BackendMessage{&pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("off")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{}}
	for _, r := range rows {
		out = append(out, &pgproto3.DataRow{Values: r})
	}
	return append(out, &pgproto3.CommandComplete{CommandTag: []byte("SELECT")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
}

// TestSpeculationOneRoundTrip: a statement planned in the session's last
// view goes upstream in one round trip with the reading of the view: the
// upstream gets the settings and the fingerprint, in one statement, and
// the statement before it replies to any. With the same view read, the statement's rows are
// returned; with another (a setting changed), errViewChanged.
func TestSpeculationOneRoundTrip(t *testing.T) {
	const fetch = "SELECT 42"
	for _, tc := range []struct {
		name string
		tz   string
		want error
	}{{"same view", "UTC", nil}, {"TimeZone changed", "Europe/Berlin", errViewChanged}} {
		t.Run(tc.name, func(t *testing.T) {
			row := append([][]byte(nil), settingsRow...)
			row[1] = []byte(tc.tz)
			var script []wiretest.Step
			script = append(script, upstreamRead("pgsketch_q_1", viewSQL)...)
			script = append(script, upstreamRead("pgsketch_q_2", fetch)...)
			var replies []pgproto3.BackendMessage
			replies = append(replies, upstreamReply(append(row, []byte("fp")))...)
			replies = append(replies, upstreamReply([][]byte{[]byte("42")})...)
			script = append(script, wiretest.Reply(replies...))
			w := wiretest.New(t, script...)
			c := &sessionConn{s: w.Session, txStatus: 'I', spec: &speculation{read: viewKey(settingsRow, "fp"), pending: true}}
			res, err := c.Query(context.Background(), upstream.Statement{SQL: fetch})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Query: %v, want %v", err, tc.want)
			}
			// Prepared in settings other than the view's, the statement
			// is not kept under the view's.
			ps := &sessionState(w.Session).prepared
			if _, fresh, _ := ps.name(upstream.Statement{SQL: fetch}); fresh != (tc.want != nil) {
				t.Errorf("the statement kept prepared: %v, want %v", !fresh, tc.want == nil)
			}
			if c.spec.pending || c.spec.changed != (tc.want != nil) {
				t.Errorf("speculation %+v after the round trip", *c.spec)
			}
			if tc.want == nil && (len(res.Rows) != 1 || string(res.Rows[0][0]) != "42") {
				t.Errorf("rows %q, want 42", res.Rows)
			}
		})
	}
}

// TestSpeculationConfirmAlone: a verdict that sends nothing upstream
// confirms the view with a round trip of its own before it is acted upon.
func TestSpeculationConfirmAlone(t *testing.T) {
	var script []wiretest.Step
	script = append(script, upstreamRead("pgsketch_q_1", viewSQL)...)
	script = append(script, wiretest.Reply(upstreamReply(append(append([][]byte(nil), settingsRow...), []byte("fp2")))...))
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I', spec: &speculation{read: viewKey(settingsRow, "fp"), pending: true}}
	if err := c.confirm(context.Background()); !errors.Is(err, errViewChanged) {
		t.Fatalf("confirm with another catalog fingerprint: %v, want errViewChanged", err)
	}
	if err := c.confirm(context.Background()); err != nil {
		t.Fatalf("confirm once more: %v (nothing is pending)", err)
	}
}

// TestSpeculationConfirmCancelled: confirming a view when the statement's
// context is already done sends nothing and reports the view unconfirmed
// (it used to index the reply of an empty batch).
func TestSpeculationConfirmCancelled(t *testing.T) {
	w := wiretest.New(t)
	c := &sessionConn{s: w.Session, txStatus: 'I', spec: &speculation{read: viewKey(settingsRow, "fp"), pending: true}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.confirm(ctx); !errors.Is(err, errViewChanged) {
		t.Fatalf("confirm with a cancelled context: %v, want errViewChanged", err)
	}
}

// TestSpeculationViewUnreadable: where the one statement that reads the
// view fails (the role lost the right to read the catalog), the view
// counts as changed, so that it is read anew, apart.
func TestSpeculationViewUnreadable(t *testing.T) {
	var script []wiretest.Step
	script = append(script, upstreamRead("pgsketch_q_1", viewSQL)...)
	script = append(script, wiretest.Reply(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("off")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
		&pgproto3.ErrorResponse{Severity: "ERROR", Code: "42501", Message: "permission denied for table rollup_defs"},
		&pgproto3.ReadyForQuery{TxStatus: 'I'}))
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I', spec: &speculation{read: viewKey(settingsRow, "fp"), pending: true}}
	if err := c.confirm(context.Background()); !errors.Is(err, errViewChanged) {
		t.Fatalf("confirm with the view unreadable: %v, want errViewChanged", err)
	}
	if !c.spec.changed {
		t.Errorf("speculation %+v after the round trip, want changed", *c.spec)
	}
}
