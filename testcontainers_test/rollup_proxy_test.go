package e2e

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestRefreshThroughProxy: SELECT pgsketch.refresh_rollup(...) sent through
// pgsketch-proxy is run by the proxy on the client's session, as the client;
// inside a transaction block it is refused; with the extended protocol it
// reaches PostgreSQL, whose error says what to do.
func TestRefreshThroughProxy(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 5)
	createRollup(t, conn, "daily", eventsRollupArgs)
	p := startProxy(t, server.adminURL)
	url := p.URL(db.DSN)

	listener, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	mustExec(t, listener, "LISTEN pgsketch_rollups")

	out, errOut, code := psql(t, url, "-A", "-t", "-c", "SELECT pgsketch.refresh_rollup('daily')")
	if code != 0 || strings.TrimSpace(out) != "20000" || !strings.Contains(errOut, "daily: incremental refresh of all buckets: 20000 rows read") {
		t.Fatalf("psql: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := listener.WaitForNotification(ctx); err != nil || !strings.Contains(n.Payload, `"rollup" : "daily"`) {
		t.Fatalf("notification through the proxy: %v %v", n, err)
	}
	sameAsFull(t, conn, "daily", eventsRollupArgs)

	// Named arguments and a range, in a psql session that goes on afterwards.
	mustExec(t, conn, `UPDATE events SET amount = amount + 1 WHERE created_at < '2026-01-02'`)
	out, errOut, code = psql(t, url, "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-c", "select PGSKETCH.refresh_rollup( 'daily', from_time => '2026-01-01', to_time => '2026-01-02' );",
		"-c", "SELECT 'still here'")
	if code != 0 || !strings.Contains(out, "still here") || !strings.Contains(errOut, "range refresh") {
		t.Fatalf("psql: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	sameAsFull(t, conn, "daily", eventsRollupArgs)

	pc, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	// Inside a transaction block: refused, and the transaction is aborted as
	// PostgreSQL would leave it.
	tx, err := pc.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(context.Background(), "SELECT pgsketch.refresh_rollup('daily')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25001" {
		t.Fatalf("refresh in a transaction block: %v", err)
	}
	// As after VACUUM in a transaction block, the transaction is aborted.
	if _, err = tx.Exec(context.Background(), "SELECT 1"); !errors.As(err, &pe) || pe.Code != "25P02" {
		t.Fatalf("statement after the refused refresh: %v, want 25P02", err)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	// An unknown rollup: PostgreSQL's error, through the proxy, and the session goes on.
	_, err = pc.Exec(context.Background(), "SELECT pgsketch.refresh_rollup('nope')")
	if !errors.As(err, &pe) || pe.Code != "42704" || !strings.Contains(pe.Message, `rollup 'nope' does not exist`) {
		t.Fatalf("unknown rollup: %v", err)
	}
	// The extended protocol is not intercepted.
	var n int64
	err = pc.QueryRow(context.Background(), "SELECT pgsketch.refresh_rollup($1)", "daily").Scan(&n)
	if !errors.As(err, &pe) || pe.Code != "0A000" {
		t.Fatalf("extended protocol: %v", err)
	}
	var one int
	if err := pc.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("session after the refusals: %v", err)
	}
}

// TestServeRefreshInterval: serve --refresh-interval refreshes every rollup
// in the background.
func TestServeRefreshInterval(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 5)
	mustExec(t, conn, `CREATE TABLE later AS SELECT * FROM events WHERE created_at >= '2026-01-04'; DELETE FROM events WHERE created_at >= '2026-01-04'`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	p := startProxy(t, server.adminURL, "--refresh-interval", "300ms", "--refresh-dsn", db.DSN)
	watermark := func() string {
		var s *string
		if err := conn.QueryRow(context.Background(), `SELECT watermark::text FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return ""
		}
		return *s
	}
	waitFor(t, 30*time.Second, "the first background refresh", func() bool { return watermark() == "2026-01-04 00:00:00+00" })
	mustExec(t, conn, `INSERT INTO events SELECT * FROM later`)
	waitFor(t, 30*time.Second, "a background refresh after appends", func() bool { return watermark() == "2026-01-06 00:00:00+00" })
	sameAsFull(t, conn, "daily", eventsRollupArgs)
	if !strings.Contains(p.Log(), `"msg":"refreshed"`) {
		t.Fatalf("no refresh logged:\n%s", p.Log())
	}
}

// TestServeRefresherOnByDefault: given the refresher's login alone, serve
// refreshes in the background every minute, the first round at start;
// --refresh-interval 0 turns it off, and without any login it says so.
func TestServeRefresherOnByDefault(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 5_000, 3)
	createRollup(t, conn, "daily", eventsRollupArgs)
	p := startProxy(t, server.adminURL, "--refresh-dsn", db.DSN)
	waitFor(t, 30*time.Second, "the first background refresh", func() bool { return strings.Contains(p.Log(), `"msg":"refreshed"`) })
	if !strings.Contains(p.Log(), `"msg":"background refresher on","interval":"1m0s"`) {
		t.Errorf("no refresher every minute in the log:\n%s", p.Log())
	}
	off := startProxy(t, server.adminURL, "--refresh-dsn", db.DSN, "--refresh-interval", "0")
	time.Sleep(time.Second)
	if strings.Contains(off.Log(), "background refresher on") || strings.Contains(off.Log(), `"msg":"refreshed"`) {
		t.Errorf("--refresh-interval 0 started the refresher:\n%s", off.Log())
	}
	// Without --refresh-dsn and a user in --upstream, no refresher, and no failure either.
	if os.Getenv("PGUSER") == "" {
		none := startProxy(t, upstreamURL(t), "--refresh-interval", "1m")
		waitFor(t, 10*time.Second, "the refresher to say it has no login", func() bool {
			recs := none.records("background refresher cannot refresh")
			return len(recs) == 1 && strings.HasPrefix(recs[0]["reason"].(string), "no login: ")
		})
	}
}
