package proxy

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsketch/pgsketch/upstream"
	"github.com/pgsketch/pgsketch/wire/wiretest"
)

// TestOwnSnapshotWarningNotRelayed: a statement that runs in a transaction
// of its own is preceded by SET TRANSACTION, which PostgreSQL answers, in
// the extended protocol's implicit transaction, with a warning (SQLSTATE
// 25P01) as well as doing it. That warning is the proxy's, and the client
// does not get it; a notice the statement itself raises, and a second
// 25P01 warning, which the proxy did not cause, reach the client.
func TestOwnSnapshotWarningNotRelayed(t *testing.T) {
	const fetch = "SELECT 42"
	noBlock := &pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: "25P01",
		Message: "SET TRANSACTION can only be used in transaction blocks"}
	own := &pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: "from the statement"}
	script := []wiretest.Step{
		wiretest.Expect(&pgproto3.Parse{Query: ownSnapshot}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Parse{Query: noJITOneConn}),
		wiretest.Expect(&pgproto3.Bind{}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Parse{Name: "pgsketch_q_1", Query: fetch}),
		wiretest.Expect(&pgproto3.Bind{PreparedStatement: "pgsketch_q_1"}),
		wiretest.Expect(&pgproto3.Describe{ObjectType: 'P'}),
		wiretest.Expect(&pgproto3.Execute{}),
		wiretest.Expect(&pgproto3.Sync{}),
		wiretest.Reply(
			&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, noBlock, &pgproto3.CommandComplete{CommandTag: []byte("SET")},
			&pgproto3.ParseComplete{}, &pgproto3.BindComplete{},
			&pgproto3.DataRow{Values: [][]byte{[]byte("off"), []byte("1")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
			&pgproto3.ParseComplete{}, &pgproto3.BindComplete{}, &pgproto3.RowDescription{}, own, noBlock,
			&pgproto3.DataRow{Values: [][]byte{[]byte("42")}}, &pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
			&pgproto3.ReadyForQuery{TxStatus: 'I'}),
	}
	w := wiretest.New(t, script...)
	c := &sessionConn{s: w.Session, txStatus: 'I'}
	res, err := c.Query(context.Background(), upstream.Statement{SQL: fetch, OwnSnapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || string(res.Rows[0][0]) != "42" {
		t.Errorf("rows %q, want 42", res.Rows)
	}
	if err := w.Session.Flush(); err != nil {
		t.Fatal(err)
	}
	w.WantClient(own, noBlock)
}
