package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/wire/wiretest"
)

const (
	describedFetch = "SELECT 42"
	describedSQL   = "SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country"
)

// countryField is PostgreSQL's description of a plain column of a table.
var countryField = []pgproto3.FieldDescription{{Name: []byte("country"), TableOID: 16741, TableAttributeNumber: 4,
	DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}}

// keptRead is the upstream's part of describedFetch outside a transaction
// block once it is prepared as stmt.
func keptRead(stmt string) []wiretest.Step {
	return []wiretest.Step{
		wiretest.Expect(&pgproto3.Parse{Query: noJIT}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Bind{PreparedStatement: stmt}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P'}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Sync{}),
	}
}

// describeSteps are the upstream's part of describing describedSQL as
// stmt, prepared now when parse.
func describeSteps(stmt string, parse bool) []wiretest.Step {
	var out []wiretest.Step
	if parse {
		out = append(out, wiretest.Expect(&pgproto3.Parse{Name: stmt, Query: describedSQL}))
	}
	return append(out, wiretest.Expect(&pgproto3.Describe{ObjectType: 'S', Name: stmt}), wiretest.Expect(&pgproto3.Sync{}))
}

// describeReply is its reply: fields, or err.
func describeReply(parse bool, fields []pgproto3.FieldDescription, err *pgproto3.ErrorResponse, status byte) []pgproto3.BackendMessage {
	var out []pgproto3.BackendMessage
	if err != nil {
		return append(out, err, &pgproto3.ReadyForQuery{TxStatus: status})
	}
	if parse {
		out = append(out, &pgproto3.ParseComplete{})
	}
	return append(out, &pgproto3.ParameterDescription{}, &pgproto3.RowDescription{Fields: fields}, &pgproto3.ReadyForQuery{TxStatus: status})
}

// TestDescriptionRidesWithTheRun: PostgreSQL's description of the exact
// statement is asked for in the round trip of the answer's first
// statement, before it, and read from the replies: outside a transaction
// block the statement is prepared once and only described the next time;
// one PostgreSQL can no longer describe ("cached plan must not change
// result type") is closed and prepared anew, once; a statement PostgreSQL
// cannot describe at all comes back as an undescribedError and is not
// kept.
func TestDescriptionRidesWithTheRun(t *testing.T) {
	ctx := context.Background()
	changed := append([]pgproto3.FieldDescription(nil), countryField...)
	changed[0].DataTypeOID, changed[0].TypeModifier = 1043, 44
	stale := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "0A000", Message: "cached plan must not change result type"}
	missing := &pgproto3.ErrorResponse{Severity: "ERROR", Code: "42P01", Message: `relation "events" does not exist`}

	var script []wiretest.Step
	fetchReply := upstreamReply([][]byte{[]byte("42")})
	// 1: the description and the fetch, both prepared now, one round trip.
	script = append(script, describeSteps("pgsketch_q_d1", true)...)
	script = append(script, upstreamRead("pgsketch_q_1", describedFetch)...)
	script = append(script, wiretest.Reply(append(describeReply(true, countryField, nil, 'I'), fetchReply...)...))
	// 2: both kept: described and bound by name.
	script = append(script, describeSteps("pgsketch_q_d1", false)...)
	script = append(script, keptRead("pgsketch_q_1")...)
	script = append(script, wiretest.Reply(append(describeReply(false, countryField, nil, 'I'), keptReplyMessages()...)...))
	// 3: the kept description fails: closed, prepared anew after the
	// round trip.
	script = append(script, describeSteps("pgsketch_q_d1", false)...)
	script = append(script, keptRead("pgsketch_q_1")...)
	script = append(script, wiretest.Reply(append(describeReply(false, nil, stale, 'I'), keptReplyMessages()...)...))
	script = append(script, wiretest.Expect(&pgproto3.Close{ObjectType: 'S', Name: "pgsketch_q_d1"}))
	script = append(script, describeSteps("pgsketch_q_d2", true)...)
	script = append(script, wiretest.Reply(append([]pgproto3.BackendMessage{&pgproto3.CloseComplete{}}, describeReply(true, changed, nil, 'I')...)...))
	// 4: the statement cannot be described: no retry of a fresh one.
	script = append(script, describeSteps("pgsketch_q_d2", false)...)
	script = append(script, keptRead("pgsketch_q_1")...)
	script = append(script, wiretest.Reply(append(describeReply(false, nil, stale, 'I'), keptReplyMessages()...)...))
	script = append(script, wiretest.Expect(&pgproto3.Close{ObjectType: 'S', Name: "pgsketch_q_d2"}))
	script = append(script, describeSteps("pgsketch_q_d3", true)...)
	script = append(script, wiretest.Reply(&pgproto3.CloseComplete{}, missing, &pgproto3.ReadyForQuery{TxStatus: 'I'}))
	// 5: described again: prepared anew (the failed one was forgotten).
	script = append(script, describeSteps("pgsketch_q_d4", true)...)
	script = append(script, keptRead("pgsketch_q_1")...)
	script = append(script, wiretest.Reply(append(describeReply(true, countryField, nil, 'I'), keptReplyMessages()...)...))

	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	for i, want := range []struct {
		fields []pgproto3.FieldDescription
		code   string
	}{{countryField, ""}, {countryField, ""}, {changed, ""}, {nil, "42P01"}, {countryField, ""}} {
		c.toDescribe(describedSQL)
		c.describeWithNext()
		res, err := c.Query(ctx, upstream.Statement{SQL: describedFetch})
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("%d: fetch: %v %v", i+1, res, err)
		}
		fields, err := c.described(ctx)
		var ud *undescribedError
		var pe *pgconn.PgError
		switch {
		case want.code == "" && err != nil:
			t.Fatalf("%d: described: %v", i+1, err)
		case want.code != "" && (!errors.As(err, &ud) || !errors.As(err, &pe) || pe.Code != want.code):
			t.Fatalf("%d: described: %v, want an undescribedError of %s", i+1, err, want.code)
		case fmt.Sprint(fields) != fmt.Sprint(want.fields):
			t.Errorf("%d: described %v, want %v", i+1, fields, want.fields)
		}
		c.desc = nil
	}
}

// keptReplyMessages is the upstream's reply to keptRead.
func keptReplyMessages() []pgproto3.BackendMessage {
	return []pgproto3.BackendMessage{&pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("off")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.BindComplete{}, &pgproto3.RowDescription{}, &pgproto3.DataRow{Values: [][]byte{[]byte("42")}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}}
}

// TestDescriptionInBlock: inside a transaction block the statement is
// described through the unnamed statement, parsed each time, and a
// description no statement carried is read by itself.
func TestDescriptionInBlock(t *testing.T) {
	ctx := context.Background()
	var script []wiretest.Step
	for range 2 {
		script = append(script, describeSteps("", true)...)
		script = append(script, wiretest.Reply(describeReply(true, countryField, nil, 'T')...))
	}
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'T'}
	for i := range 2 {
		c.toDescribe(describedSQL)
		c.describeWithNext()
		fields, err := c.described(ctx)
		if err != nil || fmt.Sprint(fields) != fmt.Sprint(countryField) {
			t.Errorf("%d: described %v, %v", i+1, fields, err)
		}
	}
}

// TestWithDescription: the error of a run given its description's: a
// statement PostgreSQL did not describe is not answered (undescribedError)
// whether the run succeeded or failed as a fallback would; a run's error
// the client must see, one the description did not share a round trip
// with, or one that aborted the transaction the description came after,
// stands.
func TestWithDescription(t *testing.T) {
	ctx := context.Background()
	pg := func(code string) error { return &pgconn.PgError{Severity: "ERROR", Code: code, Message: code} }
	for _, tc := range []struct {
		name       string
		sent       bool
		desc, run  error
		undescribe bool
		want       string
	}{
		{"described, run", true, nil, nil, false, ""},
		{"not described, run", true, pg("42703"), nil, true, "42703"},
		{"not described, the run failed after", true, pg("42703"), pg("25P02"), true, "42703"},
		{"not described, run failed", true, pg("42703"), pg("42501"), true, "42703"},
		{"described in the transaction the run aborted", true, pg("25P02"), pg("42501"), false, "42501"},
		{"described, run failed", true, nil, pg("42501"), false, "42501"},
		{"not sent, run failed", false, nil, pg("42501"), false, "42501"},
		{"run cancelled", true, pg("42703"), pg("57014"), false, "57014"},
		{"description cancelled", true, pg("57014"), nil, false, "57014"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := wiretest.New(t) // nothing goes upstream
			c := &sessionConn{s: w.Session, txStatus: 'I', desc: &description{sql: describedSQL, sent: tc.sent, err: tc.desc}}
			err := c.withDescription(ctx, tc.run)
			var ud *undescribedError
			var pe *pgconn.PgError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%v, want none", err)
			case tc.want != "" && (!errors.As(err, &pe) || pe.Code != tc.want):
				t.Errorf("%v, want %s", err, tc.want)
			case errors.As(err, &ud) != tc.undescribe:
				t.Errorf("%v: an undescribedError: %v, want %v", err, !tc.undescribe, tc.undescribe)
			}
		})
	}
}
