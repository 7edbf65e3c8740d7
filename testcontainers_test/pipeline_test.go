package e2e

import (
	"context"
	bin "encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/refresh"
)

// slowDescribeConn writes a client's extended-protocol messages one at a
// time, pausing before each Describe while armed: the timing of pgx's own
// tests of a statement_timeout firing between Parse and Describe.
type slowDescribeConn struct {
	net.Conn
	armed atomic.Bool
	pause time.Duration
}

func (c *slowDescribeConn) Write(b []byte) (int, error) {
	if !c.armed.Load() {
		return c.Conn.Write(b)
	}
	n := 0
	for len(b) >= 5 {
		l := 1 + int(bin.BigEndian.Uint32(b[1:]))
		if l > len(b) {
			break
		}
		if b[0] == 'D' {
			time.Sleep(c.pause)
		}
		k, err := c.Conn.Write(b[:l])
		n += k
		if err != nil {
			return n, err
		}
		b = b[l:]
	}
	k, err := c.Conn.Write(b)
	return n + k, err
}

// connectSlowDescribe connects pgx through a slowDescribeConn.
func connectSlowDescribe(t *testing.T, url string, mode pgx.QueryExecMode) (*pgx.Conn, *slowDescribeConn) {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = mode
	var sc *slowDescribeConn
	cfg.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
		sc = &slowDescribeConn{Conn: c, pause: 200 * time.Millisecond}
		return sc, nil
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, sc
}

// TestTimeoutBetweenParseAndDescribe: a statement_timeout that fires
// between a Parse and its Describe reaches the client as it does without
// the proxy (the messages pgsketch does not answer go upstream as they
// come). pgx's own tests of it (Prepare, and a batch in each query exec
// mode that describes) run here against the proxy.
func TestTimeoutBetweenParseAndDescribe(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	p := startProxy(t, server.adminURL)
	ctx := context.Background()
	t.Run("prepare", func(t *testing.T) {
		conn, sc := connectSlowDescribe(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)
		mustExec(t, conn, "SET statement_timeout = '100ms'")
		sc.armed.Store(true)
		_, err := conn.Prepare(ctx, "test", "select $1::varchar")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("prepare: %v, want a statement timeout (57014)", err)
		}
		sc.armed.Store(false)
		mustExec(t, conn, "SET statement_timeout = DEFAULT")
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT exists(SELECT 1 FROM pg_prepared_statements WHERE name = 'test')",
			pgx.QueryExecModeExec).Scan(&exists); err != nil || !exists {
			t.Fatalf("the statement parsed before the timeout: exists %v, %v", exists, err)
		}
	})
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec} {
		t.Run("batch "+mode.String(), func(t *testing.T) {
			conn, sc := connectSlowDescribe(t, p.URL(db.DSN), mode)
			mustExec(t, conn, "SET statement_timeout = '100ms'")
			b := &pgx.Batch{}
			b.Queue("select 1")
			b.Queue("select 2")
			sc.armed.Store(true)
			err := conn.SendBatch(ctx, b).Close()
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "57014" {
				t.Fatalf("batch: %v, want a statement timeout (57014)", err)
			}
			sc.armed.Store(false)
			mustExec(t, conn, "SET statement_timeout = DEFAULT")
			b = &pgx.Batch{}
			b.Queue("select 1")
			b.Queue("select 2")
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				t.Fatalf("batch after the timeout: %v", err)
			}
		})
	}
}

// TestPipelineMixed: in one pipeline, statements PostgreSQL answers and a
// statement answered from a rollup get their replies in order, and the
// pipeline stays one implicit transaction: an error after the answered
// statement rolls back the write that came before it, as without the proxy.
func TestPipelineMixed(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 10)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, "CREATE TABLE marks (n int)")
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	const distinct = "SELECT count(DISTINCT user_id) FROM events WHERE created_at >= '2026-01-02' AND created_at < '2026-01-05'"
	var exact int64
	if err := conn.QueryRow(ctx, distinct).Scan(&exact); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			c := connectMode(t, p.URL(db.DSN), mode)
			mustExec(t, conn, "TRUNCATE marks")
			b := &pgx.Batch{}
			b.Queue("INSERT INTO marks VALUES (1)")
			b.Queue(distinct)
			b.Queue("SELECT 1/0")
			br := c.SendBatch(ctx, b)
			if _, err := br.Exec(); err != nil {
				t.Fatalf("insert: %v", err)
			}
			var got int64
			if err := br.QueryRow().Scan(&got); err != nil {
				t.Fatalf("distinct count: %v", err)
			}
			if _, err := br.Exec(); err == nil {
				t.Fatal("1/0 did not fail")
			}
			br.Close()
			if d := float64(got-exact) / float64(exact); d > 0.05 || d < -0.05 {
				t.Errorf("distinct count %d, exact %d", got, exact)
			}
			c.mu.Lock()
			notices := len(c.notices)
			c.notices = nil
			c.mu.Unlock()
			if notices == 0 {
				t.Errorf("the distinct count was not answered from the rollup\n%s", p.Log())
			}
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM marks").Scan(&n); err != nil || n != 0 {
				t.Errorf("rows of the failed pipeline's insert: %d (%v), want 0: it must roll back", n, err)
			}
		})
	}
}
