package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/wire/wiretest"
)

// ownRead is the upstream's part of an OwnSnapshot statement prepared now
// as stmt: the transaction block begun, the statement, then COMMIT and
// Sync, or (held, the first of a pair) Flush.
func ownRead(stmt, sql string, held bool) []wiretest.Step {
	out := []wiretest.Step{
		wiretest.Expect(&pgproto3.Parse{Query: ownSnapshot}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Parse{Query: noJITOneConn}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Parse{Query: "SET LOCAL TimeZone = 'Asia/Kolkata'"}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Parse{Name: stmt, Query: sql}),
		wiretest.Expect(&pgproto3.Bind{PreparedStatement: stmt}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P'}),
		wiretest.Expect(&pgproto3.Execute{}),
	}
	if held {
		return append(out, wiretest.Expect(&pgproto3.Flush{}))
	}
	return append(out, commitRead()...)
}

// commitRead is the upstream's part of ownCommit, then Sync.
func commitRead() []wiretest.Step {
	return []wiretest.Step{
		wiretest.Expect(&pgproto3.Parse{Query: ownCommit}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Sync{}),
	}
}

// preambleReply is the upstream's reply to ownRead's preamble.
func preambleReply() []pgproto3.BackendMessage {
	return []pgproto3.BackendMessage{
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.CommandComplete{CommandTag: []byte("BEGIN")},
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("off"), []byte("1"), []byte("local")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.CommandComplete{CommandTag: []byte("SET")},
	}
}

// commitReply is the upstream's reply to commitRead.
func commitReply() []pgproto3.BackendMessage {
	return []pgproto3.BackendMessage{&pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
		&pgproto3.CommandComplete{CommandTag: []byte("COMMIT")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}}
}

// rollbackSteps are the upstream's part and reply when the proxy rolls back
// an aborted transaction block of its own (a simple Query outside the
// extended protocol).
func rollbackSteps() []wiretest.Step {
	return []wiretest.Step{
		wiretest.Expect(&pgproto3.Query{String: "ROLLBACK"}),
		wiretest.Reply(&pgproto3.CommandComplete{CommandTag: []byte("ROLLBACK")}, &pgproto3.ReadyForQuery{TxStatus: 'I'}),
	}
}

// TestOwnSnapshotTransactionBlock: a statement that needs a snapshot of its
// own runs in a REPEATABLE READ transaction block begun and committed
// around it in one round trip (inside one, Citus opens a transaction on
// each worker it reads); the result is the statement's (not COMMIT's), and
// a notice the statement raises reaches the client.
func TestOwnSnapshotTransactionBlock(t *testing.T) {
	const fetch = "SELECT 42"
	own := &pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: "from the statement"}
	script := ownRead("pgsketch_q_1", fetch, false)
	script = append(script, wiretest.Reply(append(append(preambleReply(),
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{}, own,
		&pgproto3.DataRow{Values: [][]byte{[]byte("42")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}),
		commitReply()...)...))
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	res, err := c.Query(context.Background(), upstream.Statement{SQL: fetch, OwnSnapshot: true, Zone: "Asia/Kolkata"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || string(res.Rows[0][0]) != "42" || res.Tag != "SELECT 1" {
		t.Errorf("result %q, tag %q; want 42, SELECT 1", res.Rows, res.Tag)
	}
	if err := w.Session.Flush(); err != nil {
		t.Fatal(err)
	}
	w.WantClient(own)
}

// TestOwnSnapshotFailureRolledBack: when the statement fails, the upstream
// skips the COMMIT and leaves the block aborted at Sync; the proxy rolls it
// back, so the client's session is idle again, and returns the error.
func TestOwnSnapshotFailureRolledBack(t *testing.T) {
	const fetch = "SELECT 1/0"
	script := ownRead("pgsketch_q_1", fetch, false)
	script = append(script, wiretest.Reply(append(preambleReply(),
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
		&pgproto3.ErrorResponse{Severity: "ERROR", Code: "22012", Message: "division by zero"},
		&pgproto3.ReadyForQuery{TxStatus: 'E'})...))
	script = append(script, rollbackSteps()...)
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	_, err := c.Query(context.Background(), upstream.Statement{SQL: fetch, OwnSnapshot: true, Zone: "Asia/Kolkata"})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22012" {
		t.Fatalf("Query: %v, want the statement's error", err)
	}
	if c.txStatus != 'I' {
		t.Errorf("status %c after the failure, want I", c.txStatus)
	}
}

// TestQueryPairOneTransaction: QueryPair sends the first statement with
// Flush, not Sync, reads its rows, and sends the second statement the
// rows make in the same transaction block, then COMMIT and Sync; the
// second gets no preamble.
func TestQueryPairOneTransaction(t *testing.T) {
	const first, second = "SELECT 'span'", "SELECT 'base'"
	script := ownRead("pgsketch_q_1", first, true)
	script = append(script, wiretest.Reply(append(preambleReply(),
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("span")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")})...))
	script = append(script,
		wiretest.Expect(&pgproto3.Parse{Query: second, ParameterOIDs: []uint32{25}}),
		wiretest.Expect(&pgproto3.Bind{Parameters: [][]byte{[]byte("span")}}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P'}),
		wiretest.Expect(&pgproto3.Execute{}))
	script = append(script, commitRead()...)
	script = append(script, wiretest.Reply(append([]pgproto3.BackendMessage{&pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
		&pgproto3.RowDescription{}, &pgproto3.DataRow{Values: [][]byte{[]byte("base")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}},
		commitReply()...)...))
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	res, res2, err := c.QueryPair(context.Background(), upstream.Statement{SQL: first, OwnSnapshot: true, Zone: "Asia/Kolkata"},
		func(r *upstream.Result) (*upstream.Statement, error) {
			if len(r.Rows) != 1 {
				return nil, fmt.Errorf("first statement: %d rows", len(r.Rows))
			}
			return &upstream.Statement{SQL: second, ParamOIDs: []uint32{25}, Params: r.Rows[0]}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res2 == nil || len(res2.Rows) != 1 || string(res2.Rows[0][0]) != "base" || res2.Tag != "SELECT 1" {
		t.Errorf("results %q and %v", res.Rows, res2)
	}
	if c.held || c.hold || c.txStatus != 'I' {
		t.Errorf("after the pair: held %v, hold %v, status %c", c.held, c.hold, c.txStatus)
	}
}

// TestQueryPairNoSecond: when the first statement's rows call for no
// second statement, COMMIT and Sync end the transaction.
func TestQueryPairNoSecond(t *testing.T) {
	const first = "SELECT 'nothing'"
	script := ownRead("pgsketch_q_1", first, true)
	script = append(script, wiretest.Reply(append(preambleReply(),
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})...))
	script = append(script, commitRead()...)
	script = append(script, wiretest.Reply(commitReply()...))
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	res, res2, err := c.QueryPair(context.Background(), upstream.Statement{SQL: first, OwnSnapshot: true, Zone: "Asia/Kolkata"},
		func(*upstream.Result) (*upstream.Statement, error) { return nil, nil })
	if err != nil || res == nil || res2 != nil {
		t.Fatalf("QueryPair: %v, %v, %v", res, res2, err)
	}
	if c.held || c.txStatus != 'I' {
		t.Errorf("after the pair: held %v, status %c", c.held, c.txStatus)
	}
}

// TestQueryPairFirstFails: an error of the first statement ends its
// transaction with Sync (the upstream discards up to it) and a ROLLBACK of
// the aborted block, and is returned; the second statement is not made.
func TestQueryPairFirstFails(t *testing.T) {
	const first = "SELECT 1/0"
	script := ownRead("pgsketch_q_1", first, true)
	script = append(script, wiretest.Reply(append(preambleReply(),
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
		&pgproto3.ErrorResponse{Severity: "ERROR", Code: "22012", Message: "division by zero"})...),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(&pgproto3.ReadyForQuery{TxStatus: 'E'}))
	script = append(script, rollbackSteps()...)
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	_, _, err := c.QueryPair(context.Background(), upstream.Statement{SQL: first, OwnSnapshot: true, Zone: "Asia/Kolkata"},
		func(*upstream.Result) (*upstream.Statement, error) {
			t.Error("the second statement was made after the first failed")
			return nil, nil
		})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22012" {
		t.Fatalf("QueryPair: %v, want the first statement's error", err)
	}
	if c.held || c.txStatus != 'I' {
		t.Errorf("after the pair: held %v, status %c", c.held, c.txStatus)
	}
	// A statement prepared now and failed is prepared again next time.
	if _, fresh, _ := sessionState(w.Session).prepared.name(upstream.Statement{SQL: first}); !fresh {
		t.Error("the failed statement is kept as prepared")
	}
}

// TestQueryPairSecondFails: an error of the second statement skips the
// COMMIT; the aborted block is rolled back and the error returned.
func TestQueryPairSecondFails(t *testing.T) {
	const first, second = "SELECT 'span'", "SELECT 1/0"
	script := ownRead("pgsketch_q_1", first, true)
	script = append(script, wiretest.Reply(append(preambleReply(),
		&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})...))
	script = append(script,
		wiretest.Expect(&pgproto3.Parse{Query: second}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P'}),
		wiretest.Expect(&pgproto3.Execute{}))
	script = append(script, commitRead()...)
	script = append(script, wiretest.Reply(&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{},
		&pgproto3.ErrorResponse{Severity: "ERROR", Code: "22012", Message: "division by zero"}, &pgproto3.ReadyForQuery{TxStatus: 'E'}))
	script = append(script, rollbackSteps()...)
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	_, _, err := c.QueryPair(context.Background(), upstream.Statement{SQL: first, OwnSnapshot: true, Zone: "Asia/Kolkata"},
		func(*upstream.Result) (*upstream.Statement, error) { return &upstream.Statement{SQL: second}, nil })
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22012" {
		t.Fatalf("QueryPair: %v, want the second statement's error", err)
	}
	if c.txStatus != 'I' {
		t.Errorf("status %c after the pair, want I", c.txStatus)
	}
}

// TestQueryPairInTransactionBlock: inside the client's transaction block
// a pair of a statement that needs a transaction of its own is refused,
// and nothing goes upstream.
func TestQueryPairInTransactionBlock(t *testing.T) {
	w := wiretest.New(t)
	c := &sessionConn{s: w.Session, txStatus: 'T'}
	_, _, err := c.QueryPair(context.Background(), upstream.Statement{SQL: "SELECT 1", OwnSnapshot: true, Zone: "Asia/Kolkata"},
		func(*upstream.Result) (*upstream.Statement, error) { return nil, nil })
	var re *exec.Refused
	if !errors.As(err, &re) {
		t.Fatalf("QueryPair in a transaction block: %v, want exec.Refused", err)
	}
}
