package e2e

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// refresherLockTimeout is the background refresher's lock timeout
// (refresh.BackgroundLockTimeout).
const refresherLockTimeout = 500 * time.Millisecond

// lateRows inserts n events for new users on 2026-01-03, a day the rollup
// of eventsDB(..., 5) holds, with ids below every generated one.
func lateRows(t *testing.T, conn *pgx.Conn, n int, firstID int) {
	t.Helper()
	_, err := conn.Exec(context.Background(), `INSERT INTO events (id, created_at, user_id, country, device, amount)
		SELECT -($2::int + g), timestamptz '2026-01-03 10:00+00' + g * interval '1 second', 90000000 + $2::int + g, 'DE', 'ios', 1
		FROM generate_series(1, $1::int) g`, n, firstID)
	if err != nil {
		t.Fatal(err)
	}
}

// statusPage is the proxy's status page at addr.
func statusPage(t *testing.T, addr string) string {
	t.Helper()
	body, _ := httpGet(t, addr, "/")
	return body
}

// TestServeRefreshesByDefault: serve given only its ordinary flags (an
// upstream URL with the login of the role that owns the rollups) refreshes
// in the background, every minute: rows written late into a day the rollup
// holds are first read from the base table by every answer, and within a
// round no longer; the answer stays the same and the rollup is what a full
// build makes.
func TestServeRefreshesByDefault(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 20_000, 5)
	createRollup(t, conn, "daily", eventsRollupArgs)
	p := startProxy(t, db.DSN)
	if recs := p.records("background refresher on"); len(recs) != 1 || recs[0]["interval"] != "1m0s" ||
		recs[0]["lock_timeout"] != refresherLockTimeout.String() || recs[0]["login"] != "--upstream" {
		t.Fatalf("the refresher is not on every minute with the upstream's login:\n%s", p.Log())
	}
	waitFor(t, time.Minute, "the first background refresh (at start)", func() bool { return len(p.records("refreshed")) == 1 })
	if recs := p.records("background refresher refreshing"); len(recs) != 1 ||
		!strings.Contains(recs[0]["reason"].(string), "refreshing 1 rollup(s) of database "+db.Name) {
		t.Fatalf("the refresher does not say what it refreshes:\n%s", p.Log())
	}
	var before int64
	if err := conn.QueryRow(context.Background(), `SELECT version FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&before); err != nil {
		t.Fatal(err)
	}

	lateRows(t, conn, 300, 0)
	late := time.Now()
	pc := connectSimple(t, p.URL(db.DSN))
	const q = `SELECT approx_count_distinct(user_id) FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-01-06'`
	ask := func() (string, string) {
		t.Helper()
		a, err := pc.query(context.Background(), q)
		if err != nil || len(a.rows) != 1 || len(a.notices) != 1 {
			t.Fatalf("%s: %v %+v", q, err, a)
		}
		return a.rows[0][0], a.notices[0]
	}
	dirtyAnswer, notice := ask()
	var inserted int64
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pgsketch.inserts_daily`).Scan(&inserted); err != nil || inserted != 300 {
		t.Errorf("the late rows right after the write (the next round a minute after the first): %d inserted rows kept (%v), want 300; %s", inserted, err, notice)
	}

	waitFor(t, 90*time.Second, "a background refresh to fold the late rows into the rollup", func() bool {
		var version, logged int64
		err := conn.QueryRow(context.Background(), `SELECT (SELECT version FROM pgsketch.rollup_defs WHERE name = 'daily'),
			(SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = 'daily') + (SELECT count(*) FROM pgsketch.inserts_daily)`).Scan(&version, &logged)
		return err == nil && version > before && logged == 0
	})
	t.Logf("late rows folded in %s after the write", time.Since(late).Round(time.Second))
	cleanAnswer, notice := ask()
	if strings.Contains(notice, "changed bucket") {
		t.Errorf("after the background refresh the answer still reads changed buckets from the base table: %s", notice)
	}
	if cleanAnswer != dirtyAnswer {
		t.Errorf("the answer changed with the refresh: %s before, %s after", dirtyAnswer, cleanAnswer)
	}
	if n := len(p.records("background refresher refreshing")); n != 1 {
		t.Errorf("the refresher said what it refreshes %d times, want once:\n%s", n, p.Log())
	}
	sameAsFull(t, conn, "daily", eventsRollupArgs)
}

// TestServeRefresherGivesWay: a background refresh that must wait for a
// lock another session holds — the capture trigger dropped under a
// transaction that writes the table, so that putting the trigger back waits
// for that writer — gives up within its lock timeout and retries at the next
// round. Meanwhile the holder's later statements run at once, and another
// session's writes to the table, queued behind the refresher's request,
// wait at most the lock timeout; once the holder commits, a round refreshes.
func TestServeRefresherGivesWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := eventsDB(t, 20_000, 5)
	createRollup(t, conn, "daily", eventsRollupArgs)
	p := startProxy(t, db.DSN, "--refresh-interval", "1s", "--http-listen", "127.0.0.1:0")
	httpAddr := p.httpAddr(t)
	waitFor(t, time.Minute, "the first background refresh", func() bool { return len(p.records("refreshed")) > 0 })

	// While a session holds the rollup's lock (no round can start), drop a
	// capture trigger and begin a transaction that writes the table.
	locker := db.Conn(t)
	mustExec(t, locker, `SELECT pg_advisory_lock(pgsketch.lock_class(), hashtext('daily'))`)
	var trigger string
	if err := conn.QueryRow(ctx, `SELECT pgsketch.capture_trigger('daily', 'upd')`).Scan(&trigger); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `DROP TRIGGER `+pgx.Identifier{trigger}.Sanitize()+` ON events`)
	holder := db.Conn(t)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	lateRows(t, tx.Conn(), 100, 0)
	mustExec(t, locker, `SELECT pg_advisory_unlock(pgsketch.lock_class(), hashtext('daily'))`)
	gaveWayBefore := len(p.records("background refresh gave way: a lock was not granted within the lock timeout; the next round retries"))

	// The next round asks for the table's lock to put the trigger back, and
	// waits for the holder.
	waiting := func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = 'pgsketch-proxy refresher' AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	}
	waitFor(t, 30*time.Second, "the refresher to wait for the holder's lock", waiting)
	// Another session writing the table queues behind the refresher's
	// request (CREATE TRIGGER's lock conflicts with writers), for at most
	// the lock timeout.
	other := db.Conn(t)
	start := time.Now()
	lateRows(t, other, 100, 1000)
	waited := time.Since(start)
	t.Logf("a writer waited %s behind the refresher", waited)
	if waited > refresherLockTimeout+2*time.Second {
		t.Errorf("a writer waited %s behind the refresher, whose lock timeout is %s", waited, refresherLockTimeout)
	}
	// The holder's own later statements run while the refresher retries.
	waitFor(t, 30*time.Second, "the refresher to wait again", waiting)
	start = time.Now()
	lateRows(t, tx.Conn(), 100, 100)
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	waited = time.Since(start)
	t.Logf("the holder's statements took %s while the refresher waited", waited)
	if waited > refresherLockTimeout+2*time.Second {
		t.Errorf("the holder's statements took %s while the refresher waited", waited)
	}
	waitFor(t, 30*time.Second, "a round to give way", func() bool {
		return len(p.records("background refresh gave way: a lock was not granted within the lock timeout; the next round retries")) > gaveWayBefore
	})
	for _, rec := range p.records("background refresh gave way: a lock was not granted within the lock timeout; the next round retries") {
		t.Logf("gave way after %s: %s", rec["waited"], rec["err"])
		waited, err := time.ParseDuration(rec["waited"].(string))
		if err != nil || waited > refresherLockTimeout+2*time.Second || !strings.Contains(rec["err"].(string), "55P03") {
			t.Errorf("a round gave way after %s (lock timeout %s): %v", rec["waited"], refresherLockTimeout, rec)
		}
	}
	if m := scrapeMetrics(t, httpAddr); m[`pgsketch_refresher_refreshes_total{result="gave_way"}`] < 1 {
		t.Errorf("the metrics do not count the rounds that gave way: %v", m)
	}
	if page := statusPage(t, httpAddr); !strings.Contains(page, "gave way") || !strings.Contains(page, `id="refresher-error"`) {
		t.Errorf("the status page does not show the refresh that gave way:\n%s", page)
	}

	// Once the holder commits, a round puts the trigger back and rebuilds
	// the rollup (a trigger was missing), the holder's rows included.
	var before int64
	if err := conn.QueryRow(ctx, `SELECT version FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "a round after the holder committed", func() bool {
		var version, logged int64
		var trig bool
		err := conn.QueryRow(ctx, `SELECT (SELECT version FROM pgsketch.rollup_defs WHERE name = 'daily'),
			(SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = 'daily') + coalesce((SELECT count(*) FROM pgsketch.inserts_daily), 0),
			EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'events'::regclass AND tgname = $1 AND tgenabled = 'A')`,
			trigger).Scan(&version, &logged, &trig)
		return err == nil && version > before && logged == 0 && trig
	})
	sameAsFull(t, conn, "daily", eventsRollupArgs)
}

// TestServeRefresherCannotRefresh: where the background refresher cannot
// refresh — its login's role owns none of the rollups, there is no login,
// the database has no rollups yet — serve runs on, and the refresher says
// why once in the log and on the status page, round after round; a rollup
// created later is refreshed from the next round on.
func TestServeRefresherCannotRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const cannot = "background refresher cannot refresh"

	t.Run("not the owner", func(t *testing.T) {
		db, conn := eventsDB(t, 5_000, 3)
		createRollup(t, conn, "daily", eventsRollupArgs)
		var owner string
		var version int64
		if err := conn.QueryRow(ctx, `SELECT current_user, version FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&owner, &version); err != nil {
			t.Fatal(err)
		}
		role := db.Name + "_reader"
		mustExec(t, conn, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN PASSWORD 'reader'`)
		t.Cleanup(func() { adminExec(context.Background(), `DROP ROLE IF EXISTS `+pgx.Identifier{role}.Sanitize()) })
		u, err := url.Parse(db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(role, "reader")
		p := startProxy(t, u.String(), "--refresh-interval", "200ms", "--http-listen", "127.0.0.1:0")
		httpAddr := p.httpAddr(t)
		waitFor(t, 30*time.Second, "five rounds", func() bool {
			return scrapeMetrics(t, httpAddr)["pgsketch_refresher_rounds_total"] >= 5
		})
		recs := p.records(cannot)
		want := "role " + role + " owns none of the rollups of database " + db.Name + ": daily (owned by " + owner + ")"
		if len(recs) != 1 || !strings.Contains(recs[0]["reason"].(string), want) {
			t.Fatalf("want one %q line saying %q:\n%s", cannot, want, p.Log())
		}
		if page := statusPage(t, httpAddr); !strings.Contains(page, "Not refreshing: "+want) {
			t.Errorf("the status page does not say why:\n%s", page)
		}
		m := scrapeMetrics(t, httpAddr)
		if m["pgsketch_refresher_refreshing"] != 0 || m[`pgsketch_refresher_refreshes_total{result="failed"}`] != 0 ||
			m[`pgsketch_refresher_refreshes_total{result="ok"}`] != 0 {
			t.Errorf("metrics: %v", m)
		}
		var now int64
		if err := conn.QueryRow(ctx, `SELECT version FROM pgsketch.rollup_defs WHERE name = 'daily'`).Scan(&now); err != nil || now != version {
			t.Errorf("rollup version %d, was %d (%v)", now, version, err)
		}
		// serve runs on: the owner's session through it is answered.
		var users int64
		pc, err := pgx.Connect(ctx, p.URL(db.DSN))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
		if err := pc.QueryRow(ctx, `SELECT approx_count_distinct(user_id) FROM events`).Scan(&users); err != nil || users == 0 {
			t.Errorf("a query through the proxy: %d, %v", users, err)
		}
	})

	t.Run("no login", func(t *testing.T) {
		if os.Getenv("PGUSER") != "" {
			t.Skip("PGUSER names a user for libpq")
		}
		p := startProxy(t, upstreamURL(t), "--refresh-interval", "200ms")
		waitFor(t, 10*time.Second, "the refresher to say it has no login", func() bool { return len(p.records(cannot)) > 0 })
		time.Sleep(time.Second)
		if recs := p.records(cannot); len(recs) != 1 || !strings.HasPrefix(recs[0]["reason"].(string), "no login") ||
			strings.Contains(p.Log(), "background refresher on") {
			t.Fatalf("want one %q line saying there is no login:\n%s", cannot, p.Log())
		}
	})

	t.Run("no rollups yet", func(t *testing.T) {
		db, conn := eventsDB(t, 5_000, 3)
		p := startProxy(t, db.DSN, "--refresh-interval", "200ms")
		waitFor(t, 10*time.Second, "the refresher to say there are no rollups", func() bool { return len(p.records(cannot)) > 0 })
		time.Sleep(time.Second)
		if recs := p.records(cannot); len(recs) != 1 || recs[0]["reason"] != "database "+db.Name+" has no rollups yet" {
			t.Fatalf("want one %q line saying there are no rollups:\n%s", cannot, p.Log())
		}
		createRollup(t, conn, "daily", eventsRollupArgs)
		waitFor(t, 30*time.Second, "the new rollup's background refresh", func() bool { return len(p.records("refreshed")) > 0 })
		sameAsFull(t, conn, "daily", eventsRollupArgs)
	})

	t.Run("turned off", func(t *testing.T) {
		db, conn := eventsDB(t, 5_000, 3)
		createRollup(t, conn, "daily", eventsRollupArgs)
		p := startProxy(t, db.DSN, "--refresh-interval", "0")
		waitFor(t, 10*time.Second, "the refresher to say it is off", func() bool {
			return len(p.records("background refresher off")) > 0
		})
		time.Sleep(time.Second)
		if strings.Contains(p.Log(), "background refresher on") || len(p.records("refreshed")) > 0 {
			t.Fatalf("--refresh-interval 0 refreshed:\n%s", p.Log())
		}
	})
}
