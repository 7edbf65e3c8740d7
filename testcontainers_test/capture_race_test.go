package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// raceDuration is how long TestChangeCaptureRace writes while refreshing
// (PGSKETCH_RACE_DURATION, default 60 s).
func raceDuration(t *testing.T) time.Duration {
	if s := os.Getenv("PGSKETCH_RACE_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("PGSKETCH_RACE_DURATION: %v", err)
		}
		return d
	}
	return 60 * time.Second
}

// TestChangeCaptureRace: four writers insert (on time and late), update and
// delete while the refresher runs every second; once they stop, the next
// refreshes (incremental: they rebuild only what the log lists) leave
// every bucket equal to a fresh build, so no write committed during a
// refresh was lost. The writers' throughput is measured first on a twin
// table without capture, then with it (and the refresher running).
func TestChangeCaptureRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	for _, tbl := range []string{"ev", "ev_plain"} {
		mustExec(t, conn, fmt.Sprintf(`CREATE TABLE %[1]s (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL,
				country text, device text, user_id bigint, amount numeric(12,2));
			CREATE INDEX ON %[1]s (created_at);
			INSERT INTO %[1]s (created_at, country, device, user_id, amount)
			SELECT timestamptz '2026-01-01' + (i %% 30) * interval '1 day' + (i %% 86399) * interval '1 second',
				(ARRAY['DE','FR','US','BR','JP'])[1 + i %% 5], (ARRAY['ios','android','web'])[1 + (i / 5) %% 3],
				(i * 7919) %% 20000, (i %% 1000) / 10.0
			  FROM generate_series(1, 40000) i`, tbl))
	}
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})

	dur := raceDuration(t)
	// write runs four writers on table for d, each on users of its own
	// (user_id % 4), and returns the statements they ran.
	write := func(table string, d time.Duration) int64 {
		var ops atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		deadline := time.Now().Add(d)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := pgx.Connect(ctx, db.DSN)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close(ctx)
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for time.Now().Before(deadline) {
					// A day of January (late rows and changes to old
					// buckets), or now (the open bucket).
					day := fmt.Sprintf("timestamptz '2026-01-01' + interval '%d hours'", rng.IntN(30*24))
					if rng.IntN(4) == 0 {
						day = "now()"
					}
					var sql string
					switch rng.IntN(4) {
					case 0, 1:
						sql = fmt.Sprintf(`INSERT INTO %s (created_at, country, device, user_id, amount)
							SELECT %s + i * interval '1 minute', 'SE', 'web', %d + 4 * i, 1 FROM generate_series(0, %d) i`,
							table, day, 100000+rng.IntN(1000)*4+w, rng.IntN(5))
					case 2:
						sql = fmt.Sprintf(`UPDATE %s SET country = 'XX', amount = amount + 1
							WHERE user_id %% 4 = %d AND user_id %% 97 = %d AND created_at >= %s AND created_at < %s + interval '1 day'`,
							table, w, rng.IntN(97), day, day)
					default:
						sql = fmt.Sprintf(`DELETE FROM %s WHERE user_id %% 4 = %d AND user_id %% 89 = %d
							AND created_at >= %s AND created_at < %s + interval '6 hours'`, table, w, rng.IntN(89), day, day)
					}
					if _, err := c.Exec(ctx, sql); err != nil {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
					ops.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return ops.Load()
	}

	// Throughput: without capture, with it, then with it and the refresher.
	plainDur := min(dur, 15*time.Second)
	plain := write("ev_plain", plainDur)
	alone := write("ev", plainDur)

	stop := make(chan struct{})
	refreshed := make(chan int, 1)
	go func() {
		n := 0
		defer func() { refreshed <- n }()
		rc, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			t.Error(err)
			return
		}
		defer rc.Close(ctx)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			res, err := refresh.Refresh(ctx, pgsession.Conn{C: rc.PgConn()}, "ev_daily", refresh.Options{})
			if err != nil {
				t.Errorf("refresh %d: %v", n+1, err)
				return
			}
			if n%10 == 0 {
				t.Logf("during the writes: %s", res)
			}
			n++
		}
	}()
	captured := write("ev", dur)
	// Two more refreshes with no writer running: each write must be in the
	// rollup or in the log by now, and these drain the log.
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	refreshes := <-refreshed
	rate := func(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }
	t.Logf("writers: %.0f statements/s without capture, %.0f with it (%.2f×) (%s each); %.0f with capture and %d refreshes in %s (%.2f×)",
		rate(plain, plainDur), rate(alone, plainDur), rate(alone, plainDur)/rate(plain, plainDur), plainDur,
		rate(captured, dur), refreshes, dur, rate(captured, dur)/rate(plain, plainDur))
	// A refresh starts every second, or as soon as the previous one ends
	// when it takes longer (as on a loaded machine); a few must have run
	// while the writers wrote.
	if refreshes < 3 {
		t.Errorf("only %d refreshes in %s", refreshes, dur)
	}

	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily_ref', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily_ref", refresh.Options{Full: true})
	var dirty int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = 'ev_daily'`).Scan(&dirty); err != nil {
		t.Fatal(err)
	}
	if got, want := rollupContent(t, conn, "ev_daily"), rollupContent(t, conn, "ev_daily_ref"); dirty != 0 || got != want {
		t.Fatalf("after the writers and two refreshes, %d log entries left, and the rollup differs from a fresh build:\n%s", dirty, firstDiff(got, want))
	}
}

// TestChangeCaptureDuringRefresh: a write that commits while a refresh is
// running, after the refresh read the base rows, is neither in the rollup
// nor lost: its row stays in the inserted rows (or its bucket in the log),
// queries add it (or read the bucket from the base table), and the next
// refresh (incremental) rebuilds its bucket.
func TestChangeCaptureDuringRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint, amount numeric(12,2));
		INSERT INTO ev SELECT timestamptz '2026-01-01' + (i % 30) * interval '1 day', 'DE', 'web', i, 1 FROM generate_series(1, 3000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})

	writer, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(ctx)
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ev VALUES ('2026-01-05 12:00+00', 'FR', 'ios', 999999, 5)`); err != nil {
		t.Fatal(err)
	}
	committed := false
	refreshRollup(t, conn, "ev_daily", refresh.Options{Progress: func(p refresh.Progress) {
		if p.Done && !committed { // the base rows are read: the refresh's snapshot is taken
			committed = true
			if err := tx.Commit(ctx); err != nil {
				t.Error(err)
			}
		}
	}})
	if !committed {
		t.Fatal("the refresh reported no end of reading")
	}
	var logged int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = 'ev_daily' AND bucket = '2026-01-05'`).Scan(&logged); err != nil {
		t.Fatal(err)
	}
	var inRollup int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(row_count), 0) FROM ev_daily WHERE bucket = '2026-01-05'`).Scan(&inRollup); err != nil {
		t.Fatal(err)
	}
	var inserted int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pgsketch.inserts_ev_daily WHERE user_id = 999999`).Scan(&inserted); err != nil {
		t.Fatal(err)
	}
	if logged == 0 && inRollup != 101 && inserted != 1 {
		t.Fatalf("the write committed during the refresh is lost: its bucket holds %d rows in the rollup (101 in the table), "+
			"the log does not list it and the inserted rows do not hold it", inRollup)
	}
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	sameAs(t, conn, "ev", "ev_daily")
}

// sameAs fails unless rollup name over source equals a fresh build.
func sameAs(t *testing.T, conn *pgx.Conn, source, name string) {
	t.Helper()
	mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.create_rollup('%s_ref', '%s', 'created_at', %s)`, name, source, captureArgs))
	defer mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.drop_rollup('%s_ref')`, name))
	refreshRollup(t, conn, name+"_ref", refresh.Options{Full: true})
	if got, want := rollupContent(t, conn, name), rollupContent(t, conn, name+"_ref"); got != want {
		t.Fatalf("rollup %s differs from a fresh build:\n%s", name, firstDiff(got, want))
	}
}
