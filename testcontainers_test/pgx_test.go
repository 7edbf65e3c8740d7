package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func connectPgx(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// typedRow is one row of every common type, read back in Go.
const typedQuery = `SELECT $1::int4 + 1, 'text ' || $2::text, 2.5::numeric * $1, now() IS NOT NULL,
	'2026-01-02 03:04:05+00'::timestamptz, '{1,2,3}'::int8[], '\xdeadbeef'::bytea, NULL::text,
	'6f0a1c2e-8b7d-4c3a-9e5f-0123456789ab'::uuid, '{"a": [1, 2]}'::jsonb`

func readTypedRow(t *testing.T, ctx context.Context, c *pgx.Conn, opts ...any) []any {
	t.Helper()
	rows, err := c.Query(ctx, typedQuery, append(opts, 41, "x")...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no row: %v", rows.Err())
	}
	vals, err := rows.Values()
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return vals
}

func TestPgxThroughProxy(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	cert, key := selfSignedCert(t)
	p := startProxy(t, server.adminURL, "--tls-cert", cert, "--tls-key", key)
	ctx := context.Background()
	direct := connectPgx(t, db.DSN)
	proxied := connectPgx(t, p.URL(db.DSN))
	mustExec(t, direct, `CREATE TABLE kv (k int PRIMARY KEY, v text, b bytea)`)

	t.Run("protocols and formats", func(t *testing.T) {
		want := fmt.Sprint(readTypedRow(t, ctx, direct))
		for _, mode := range []struct {
			name string
			opts []any
		}{
			{"extended, binary results", nil},
			{"extended, text results", []any{pgx.QueryResultFormats{pgx.TextFormatCode}}},
			{"simple protocol", []any{pgx.QueryExecModeSimpleProtocol}},
			{"describe exec", []any{pgx.QueryExecModeDescribeExec}},
			{"exec, no statement cache", []any{pgx.QueryExecModeExec}},
		} {
			if got := fmt.Sprint(readTypedRow(t, ctx, proxied, mode.opts...)); got != want {
				t.Errorf("%s: got %s, want %s", mode.name, got, want)
			}
		}
	})

	t.Run("prepared statements", func(t *testing.T) {
		if _, err := proxied.Prepare(ctx, "put", "INSERT INTO kv (k, v) VALUES ($1, $2)"); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if _, err := proxied.Exec(ctx, "put", i, fmt.Sprintf("value %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		var n int
		var sum int64
		if err := direct.QueryRow(ctx, "SELECT count(*), sum(k) FROM kv").Scan(&n, &sum); err != nil || n != 100 || sum != 4950 {
			t.Fatalf("count %d sum %d err %v", n, sum, err)
		}
	})

	t.Run("pipelined batch", func(t *testing.T) {
		b := &pgx.Batch{}
		b.Queue("SELECT count(*) FROM kv")
		b.Queue("UPDATE kv SET v = upper(v) WHERE k < $1", 10)
		b.Queue("SELECT v FROM kv WHERE k = $1", 3)
		b.Queue("SELECT 1/0")
		b.Queue("SELECT 'never'")
		br := proxied.SendBatch(ctx, b)
		var n int
		if err := br.QueryRow().Scan(&n); err != nil || n != 100 {
			t.Fatalf("batch count: %d %v", n, err)
		}
		tag, err := br.Exec()
		if err != nil || tag.RowsAffected() != 10 {
			t.Fatalf("batch update: %v %v", tag, err)
		}
		var v string
		if err := br.QueryRow().Scan(&v); err != nil || v != "VALUE 3" {
			t.Fatalf("batch select: %q %v", v, err)
		}
		var pgErr *pgconn.PgError
		if _, err := br.Exec(); !errors.As(err, &pgErr) || pgErr.Code != "22012" {
			t.Fatalf("batch division by zero: %v", err)
		}
		br.Close()
		// The failed batch ran in one implicit transaction: the update is gone.
		if err := proxied.QueryRow(ctx, "SELECT v FROM kv WHERE k = 3").Scan(&v); err != nil || v != "value 3" {
			t.Fatalf("after failed batch: %q %v", v, err)
		}
	})

	t.Run("portal suspension", func(t *testing.T) {
		conn := connectPgx(t, p.URL(db.DSN))
		hj, err := conn.PgConn().Hijack()
		if err != nil {
			t.Fatal(err)
		}
		defer hj.Conn.Close()
		fe := hj.Frontend
		fe.Send(&pgproto3.Parse{Query: "SELECT g FROM generate_series(1, 5) g"})
		fe.Send(&pgproto3.Bind{})
		fe.Send(&pgproto3.Execute{MaxRows: 2})
		fe.Send(&pgproto3.Execute{MaxRows: 2})
		fe.Send(&pgproto3.Execute{})
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			switch m := msg.(type) {
			case *pgproto3.DataRow:
				got = append(got, string(m.Values[0]))
			case *pgproto3.PortalSuspended:
				got = append(got, "suspended")
			case *pgproto3.CommandComplete:
				got = append(got, string(m.CommandTag))
			case *pgproto3.ErrorResponse:
				t.Fatalf("error: %s", m.Message)
			}
			if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		if want := "1 2 suspended 3 4 suspended 5 SELECT 1"; strings.Join(got, " ") != want {
			t.Fatalf("got %q, want %q", strings.Join(got, " "), want)
		}
	})

	t.Run("copy from and to", func(t *testing.T) {
		rows := make([][]any, 20000)
		for i := range rows {
			rows[i] = []any{1000 + i, fmt.Sprintf("copied\t%d\n", i), []byte{byte(i), 0, 255}}
		}
		n, err := proxied.CopyFrom(ctx, pgx.Identifier{"kv"}, []string{"k", "v", "b"}, pgx.CopyFromRows(rows))
		if err != nil || n != int64(len(rows)) {
			t.Fatalf("CopyFrom: %d %v", n, err)
		}
		var a, b bytes.Buffer
		const q = "COPY (SELECT * FROM kv ORDER BY k) TO STDOUT WITH (FORMAT binary)"
		if _, err := direct.PgConn().CopyTo(ctx, &a, q); err != nil {
			t.Fatal(err)
		}
		if _, err := proxied.PgConn().CopyTo(ctx, &b, q); err != nil {
			t.Fatal(err)
		}
		if a.Len() < 20000*10 || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("CopyTo: direct %d bytes, proxied %d bytes", a.Len(), b.Len())
		}
	})

	t.Run("cancel by context", func(t *testing.T) {
		conn := connectPgx(t, p.URL(db.DSN))
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := conn.Exec(cctx, "SELECT pg_sleep(30) /* pgx cancel test */")
		if err == nil || time.Since(start) > 10*time.Second {
			t.Fatalf("pg_sleep(30) with a 500 ms context: err %v after %v", err, time.Since(start))
		}
		// The cancel must have reached the upstream backend: nothing sleeps there.
		waitFor(t, 5*time.Second, "the upstream query to stop", func() bool {
			var n int
			direct.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE state = 'active' AND query LIKE '%pgx cancel test%' AND pid <> pg_backend_pid()`).Scan(&n)
			return n == 0
		})
	})

	t.Run("64 MB bytea", func(t *testing.T) {
		big := make([]byte, 64<<20)
		rand.Read(big)
		if _, err := proxied.Exec(ctx, "INSERT INTO kv (k, b) VALUES (-1, $1)", big); err != nil {
			t.Fatal(err)
		}
		// Parse, Bind and Execute in one group, as libpq's PQexecParams sends
		// them: the 64 MB Bind streams through the middle of the group.
		if _, err := proxied.Exec(ctx, "INSERT INTO kv (k, b) VALUES (-2, $1)", pgx.QueryExecModeExec, big); err != nil {
			t.Fatal(err)
		}
		var same bool
		if err := proxied.QueryRow(ctx, "SELECT (SELECT b FROM kv WHERE k = -1) = (SELECT b FROM kv WHERE k = -2)").Scan(&same); err != nil || !same {
			t.Fatalf("the two 64 MB inserts differ: %v %v", same, err)
		}
		var back []byte
		if err := proxied.QueryRow(ctx, "SELECT b FROM kv WHERE k = -1").Scan(&back); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, big) {
			t.Fatalf("64 MB bytea came back as %d different bytes", len(back))
		}
		var text string // the text format doubles it: \x plus hex
		if err := proxied.QueryRow(ctx, "SELECT b FROM kv WHERE k = -1", pgx.QueryResultFormats{pgx.TextFormatCode}).Scan(&text); err != nil {
			t.Fatal(err)
		}
		if len(text) != 2+2*len(big) {
			t.Fatalf("text bytea length %d", len(text))
		}
	})

	t.Run("TLS to the proxy", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(strings.Replace(p.URL(db.DSN), "sslmode=disable", "sslmode=require", 1))
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLSConfig = &tls.Config{InsecureSkipVerify: true}
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, ok := c.PgConn().Conn().(*tls.Conn); !ok {
			t.Fatalf("connection is %T, not TLS", c.PgConn().Conn())
		}
		var n int
		if err := c.QueryRow(ctx, "SELECT 6 * $1::int", 7).Scan(&n); err != nil || n != 42 {
			t.Fatalf("query over TLS: %d %v", n, err)
		}
	})
}
