package pgsession

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsketch/pgsketch/internal/localpg"
	"github.com/pgsketch/pgsketch/upstream"
)

// session opens a Conn to PGSKETCH_TEST_DSN or, without it, to a throwaway
// local cluster. Like the end-to-end tests, it fails, naming the packages
// to install, where there is neither.
func session(t *testing.T) Conn {
	t.Helper()
	ctx := context.Background()
	s, closeConn, err := Dial(localpg.TestServer(t))(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeConn)
	return s.(Conn)
}

// TestConn runs every method of the Session on one connection: a Query
// with typed and binary parameters and mixed result formats, one without
// rows, one that fails, the text rows of upstream.Rows, and COPY both ways.
func TestConn(t *testing.T) {
	ctx := context.Background()
	c := session(t)

	i8 := binary.BigEndian.AppendUint64(nil, 41)
	res, err := c.Query(ctx, upstream.Statement{
		SQL:           "SELECT $1 + 1 AS n, pg_typeof($2)::text AS t, $3::text AS z",
		ParamOIDs:     []uint32{pgtype.Int8OID, pgtype.Int4OID},
		Params:        [][]byte{i8, []byte("7"), nil},
		ParamFormats:  []int16{1, 0, 0},
		ResultFormats: []int16{1, 0, 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fields) != 3 {
		t.Fatalf("fields %+v", res.Fields)
	}
	for i, want := range []struct {
		name   string
		oid    uint32
		format int16
	}{{"n", pgtype.Int8OID, 1}, {"t", pgtype.TextOID, 0}, {"z", pgtype.TextOID, 0}} {
		f := res.Fields[i]
		if string(f.Name) != want.name || f.DataTypeOID != want.oid || f.Format != want.format {
			t.Errorf("field %d: %s, type %d, format %d; want %s, %d, %d", i, f.Name, f.DataTypeOID, f.Format, want.name, want.oid, want.format)
		}
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 3 {
		t.Fatalf("rows %q", res.Rows)
	}
	if row := res.Rows[0]; !bytes.Equal(row[0], binary.BigEndian.AppendUint64(nil, 42)) || string(row[1]) != "integer" || row[2] != nil {
		t.Errorf("row %q, want 42 in binary, integer (the parameter's type as given), NULL", row)
	}
	if res.Tag != "SELECT 1" {
		t.Errorf("tag %q", res.Tag)
	}

	// No rows: the description still comes back.
	res, err = c.Query(ctx, upstream.Statement{SQL: "SELECT 1 AS a WHERE false"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fields) != 1 || string(res.Fields[0].Name) != "a" || res.Rows != nil || res.Tag != "SELECT 0" {
		t.Errorf("no rows: fields %+v, rows %q, tag %q", res.Fields, res.Rows, res.Tag)
	}

	var pe *pgconn.PgError
	if _, err := c.Query(ctx, upstream.Statement{SQL: "SELECT 1/0"}); !errors.As(err, &pe) || pe.Code != "22012" {
		t.Errorf("division by zero: %v, want a PgError 22012", err)
	}

	rows, err := upstream.Rows(ctx, c, "SELECT $1::text, $2::text", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || string(rows[0][0]) != "x" || rows[0][1] != nil {
		t.Errorf("text rows %q", rows)
	}

	if err := c.Exec(ctx, "CREATE TEMP TABLE t (v text); INSERT INTO t VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	n, err := c.CopyFrom(ctx, bytes.NewReader([]byte("b\nc\n")), "COPY t FROM STDIN")
	if err != nil || n != 2 {
		t.Fatalf("COPY FROM: %d rows, %v", n, err)
	}
	var out bytes.Buffer
	if err := c.CopyTo(ctx, &out, "COPY (SELECT v FROM t ORDER BY v) TO STDOUT"); err != nil {
		t.Fatal(err)
	}
	if out.String() != "a\nb\nc\n" {
		t.Errorf("COPY TO: %q", out.String())
	}
}

// TestQueryPair: the two statements of a pair share one transaction (one
// txid, and with OwnSnapshot one REPEATABLE READ snapshot), which ends
// with the pair; an error of the second rolls it back.
func TestQueryPair(t *testing.T) {
	ctx := context.Background()
	c := session(t)
	res, second, err := c.QueryPair(ctx, upstream.Statement{SQL: "SELECT pg_catalog.transaction_timestamp()::text", OwnSnapshot: true},
		func(first *upstream.Result) (*upstream.Statement, error) {
			return &upstream.Statement{SQL: "SELECT $1::timestamptz = pg_catalog.transaction_timestamp(), pg_catalog.current_setting('transaction_isolation')",
				Params: [][]byte{first.Rows[0][0]}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || second == nil || len(second.Rows) != 1 {
		t.Fatalf("results %v, %v", res, second)
	}
	if row := second.Rows[0]; string(row[0]) != "t" || string(row[1]) != "repeatable read" {
		t.Errorf("the second statement: same transaction %s, isolation %s; want t, repeatable read", row[0], row[1])
	}
	if c.C.TxStatus() != 'I' {
		t.Errorf("transaction status %c after the pair", c.C.TxStatus())
	}

	_, _, err = c.QueryPair(ctx, upstream.Statement{SQL: "SELECT 1"},
		func(*upstream.Result) (*upstream.Statement, error) {
			return &upstream.Statement{SQL: "SELECT 1/0"}, nil
		})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22012" {
		t.Errorf("a failing second statement: %v, want 22012", err)
	}
	if c.C.TxStatus() != 'I' {
		t.Errorf("transaction status %c after a failed pair", c.C.TxStatus())
	}
}
