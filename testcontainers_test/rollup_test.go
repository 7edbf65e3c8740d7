package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/internal/demodata"
	"github.com/pgsketch/pgsketch/migrations"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/sketch"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// catalogDB is a test database with the pgsketch catalog migrated up.
func catalogDB(t *testing.T) (*testDB, *pgx.Conn) {
	t.Helper()
	db := newTestDB(t)
	m, err := migrations.Open(db.DSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	return db, db.Conn(t)
}

// eventsDB is a test database with the pgsketch catalog and a generated
// events table of rows events over days days starting 2026-01-01.
func eventsDB(t *testing.T, rows int64, days int) (*testDB, *pgx.Conn) {
	t.Helper()
	db, conn := catalogDB(t)
	spec := demodata.Default
	spec.Rows, spec.Days, spec.Users = rows, days, rows/2
	mustExec(t, conn, spec.CreateSQL())
	return db, conn
}

const eventsRollupArgs = `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}',
	sum_columns => '{amount}', min_columns => '{amount}', max_columns => '{created_at}'`

// hourlyRollupArgs are eventsRollupArgs with hour buckets.
var hourlyRollupArgs = strings.Replace(eventsRollupArgs, "'day'", "'hour'", 1)

func createRollup(t *testing.T, conn *pgx.Conn, name, args string) {
	t.Helper()
	mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.create_rollup(%s, 'events', 'created_at', %s)`,
		"'"+name+"'", args))
}

func refreshRollup(t *testing.T, conn *pgx.Conn, name string, opt refresh.Options) refresh.Result {
	t.Helper()
	res, err := refresh.Refresh(context.Background(), pgsession.Conn{C: conn.PgConn()}, name, opt)
	if err != nil {
		t.Fatalf("refresh %s: %v", name, err)
	}
	t.Log(res)
	return res
}

// rollupContent is every row of a rollup table as text, in key order.
func rollupContent(t *testing.T, conn *pgx.Conn, table string) string {
	t.Helper()
	var s string
	err := conn.QueryRow(context.Background(), fmt.Sprintf(
		`SELECT coalesce(string_agg(r::text, E'\n' ORDER BY bucket, country, device), '') FROM %s r`, table)).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rollupState is a rollup's rows together with its catalog row.
func rollupState(t *testing.T, conn *pgx.Conn, name string) string {
	t.Helper()
	var cat string
	err := conn.QueryRow(context.Background(),
		`SELECT format('watermark %s version %s rows %s', watermark, version, rollup_rows) FROM pgsketch.rollup_defs WHERE name = $1`,
		name).Scan(&cat)
	if err != nil {
		t.Fatal(err)
	}
	return cat + "\n" + rollupContent(t, conn, name)
}

// sameAsFull rebuilds rollup name's definition from scratch as a second
// rollup and requires identical rows, sketch bytes included.
func sameAsFull(t *testing.T, conn *pgx.Conn, name, args string) {
	t.Helper()
	ref := name + "_ref"
	mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.drop_rollup('%s', if_exists => true)`, ref))
	createRollup(t, conn, ref, args)
	// The reference is read by three parallel readers: the parallel path
	// must give the very bytes of the single stream.
	refreshRollup(t, conn, ref, refresh.Options{Full: true, Streams: 3, Dial: pgsession.Dial(conn.Config().ConnString())})
	got, want := rollupContent(t, conn, name), rollupContent(t, conn, ref)
	if got != want {
		t.Fatalf("rollup %s differs from a full rebuild:\n%s", name, firstDiff(got, want))
	}
	var wmGot, wmWant *time.Time
	if err := conn.QueryRow(context.Background(),
		`SELECT (SELECT watermark FROM pgsketch.rollup_defs WHERE name = $1), (SELECT watermark FROM pgsketch.rollup_defs WHERE name = $2)`,
		name, ref).Scan(&wmGot, &wmWant); err != nil {
		t.Fatal(err)
	}
	if (wmGot == nil) != (wmWant == nil) || (wmGot != nil && !wmGot.Equal(*wmWant)) {
		t.Fatalf("watermark %v, full rebuild has %v", wmGot, wmWant)
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d (of %d / %d):\n got  %.300s\n want %.300s", i+1, len(g), len(w), a, b)
		}
	}
	return "no difference"
}

// TestRollupAccuracy: a daily rollup of 1 M events over 30 days, built with
// the CLI. Every row's sketch estimate is within 5 standard errors of the
// exact distinct count of its bucket and dimensions, 99 % within 3; the row
// count, sum, min and max are exact; and the hll extension reads every
// sketch.
func TestRollupAccuracy(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 1_000_000, 30)
	r := runCLI(t, nil, "rollup", "create", "events_daily", "--dsn", db.DSN, "--table", "public.events",
		"--time", "created_at", "--grain", "day", "--dims", "country,device", "--distinct", "user_id",
		"--sum", "amount", "--min", "amount", "--max", "created_at")
	if r.code != 0 {
		t.Fatalf("rollup create: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "full refresh of all buckets: 1000000 rows read") {
		t.Fatalf("rollup create output:\n%s", r.stdout)
	}
	rows, err := conn.Query(context.Background(), `
		WITH exact AS (
		  SELECT date_trunc('day', created_at, 'UTC') AS bucket, country, device, count(*) AS n,
		         count(DISTINCT user_id) AS users, sum(amount) AS s, min(amount) AS lo, max(created_at) AS hi
		    FROM events GROUP BY 1, 2, 3)
		SELECT e.bucket::text, coalesce(e.country, 'NULL'), e.device, e.users, r.distinct_user_id,
		       e.n = r.row_count AND e.s::text = r.sum_amount::text AND e.lo = r.min_amount AND e.hi = r.max_created_at,
		       hll_cardinality(r.distinct_user_id::hll)
		  FROM exact e FULL JOIN events_daily r
		    ON r.bucket = e.bucket AND r.country IS NOT DISTINCT FROM e.country AND r.device = e.device`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		bucket, country, device string
		users                   *int64
		sk                      []byte
		partialsOK              *bool
		extCard                 *float64
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		var b, c *string
		err := r.Scan(&b, &c, &x.device, &x.users, &x.sk, &x.partialsOK, &x.extCard)
		if b != nil {
			x.bucket, x.country = *b, *c
		}
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 1000 {
		t.Fatalf("only %d rollup rows", len(got))
	}
	within3, worst := 0, 0.0
	for _, x := range got {
		key := x.bucket + " " + x.country + " " + x.device
		if x.users == nil || x.sk == nil {
			t.Fatalf("row %s: present only on one side (exact users %v, sketch %v)", key, x.users, x.sk != nil)
		}
		if x.partialsOK == nil || !*x.partialsOK {
			t.Errorf("row %s: count, sum, min or max differs from the exact value", key)
		}
		if x.extCard == nil {
			t.Errorf("row %s: hll_cardinality is NULL", key)
		}
		h := new(sketch.HLL)
		if err := h.UnmarshalBinary(x.sk); err != nil {
			t.Fatalf("row %s: %v", key, err)
		}
		z := (h.Estimate() - float64(*x.users)) / (1.04 / math.Sqrt(float64(int(1)<<h.Log2m())) * float64(*x.users))
		if math.Abs(z) <= 3 {
			within3++
		}
		worst = math.Max(worst, math.Abs(z))
		if math.Abs(z) > 5 {
			t.Errorf("row %s: estimate %.1f, exact %d: %.2f standard errors", key, h.Estimate(), *x.users, z)
		}
	}
	share := float64(within3) / float64(len(got))
	t.Logf("%d rollup rows: %.2f%% within 3 standard errors, worst %.2f", len(got), 100*share, worst)
	if share < 0.99 {
		t.Errorf("only %.2f%% of estimates within 3 standard errors, want 99%%", 100*share)
	}

	// rollup verify agrees, through the CLI.
	v := runCLI(t, nil, "rollup", "verify", "events_daily", "--dsn", db.DSN, "--buckets", "5")
	if v.code != 0 || !strings.Contains(v.stdout, "0 beyond 5, 0 row counts wrong") {
		t.Fatalf("rollup verify: exit %d\n%s\n%s", v.code, v.stdout, v.stderr)
	}
}

// TestRollupRefreshMatchesFullRebuild: incremental refreshes after appends
// and after late rows inside the late-data window, and a range refresh
// after updates and deletes, each leave the very bytes of a full rebuild.
func TestRollupRefreshMatchesFullRebuild(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 200_000, 20)
	// The rollup starts with days 1..10 only; the rest arrives later.
	mustExec(t, conn, `CREATE TABLE later AS SELECT * FROM events WHERE created_at >= '2026-01-11'; DELETE FROM events WHERE created_at >= '2026-01-11'`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	sameAsFull(t, conn, "daily", eventsRollupArgs)

	t.Run("appends", func(t *testing.T) {
		mustExec(t, conn, `INSERT INTO events SELECT * FROM later WHERE created_at < '2026-01-16'`)
		res := refreshRollup(t, conn, "daily", refresh.Options{})
		if res.Mode != "incremental" || !strings.HasPrefix(res.From, "2026-01-10") {
			t.Fatalf("want an incremental refresh from the last bucket (2026-01-10), got %+v", res)
		}
		sameAsFull(t, conn, "daily", eventsRollupArgs)
	})
	t.Run("late rows inside the window", func(t *testing.T) {
		// The watermark is 2026-01-16; the window is one day: rows of
		// 2026-01-15 are picked up, together with new ones.
		mustExec(t, conn, `INSERT INTO events SELECT id + 10000000, created_at - interval '12 hours', user_id + 1, country, device, amount
		                     FROM later WHERE created_at >= '2026-01-16' AND created_at < '2026-01-16 06:00'`)
		mustExec(t, conn, `INSERT INTO events SELECT * FROM later WHERE created_at >= '2026-01-16' AND created_at < '2026-01-18'`)
		refreshRollup(t, conn, "daily", refresh.Options{})
		sameAsFull(t, conn, "daily", eventsRollupArgs)
	})
	t.Run("range refresh after updates and deletes", func(t *testing.T) {
		mustExec(t, conn, `UPDATE events SET user_id = user_id + 7, amount = amount + 1 WHERE created_at >= '2026-01-03' AND created_at < '2026-01-03 12:00';
		                   DELETE FROM events WHERE created_at >= '2026-01-05 03:00' AND created_at < '2026-01-06 01:00';
		                   UPDATE events SET country = 'ZZ' WHERE created_at >= '2026-01-07' AND created_at < '2026-01-07 00:10'`)
		before := rollupState(t, conn, "daily")
		res := refreshRollup(t, conn, "daily", refresh.Options{From: "2026-01-03", To: "2026-01-07 00:10"})
		if res.Mode != "range" || !strings.HasPrefix(res.From, "2026-01-03") || !strings.HasPrefix(res.To, "2026-01-08") {
			t.Fatalf("want buckets 2026-01-03 up to 2026-01-08 rebuilt, got %+v", res)
		}
		if after := rollupState(t, conn, "daily"); strings.SplitN(after, "\n", 2)[0] == strings.SplitN(before, "\n", 2)[0] {
			t.Fatal("catalog row unchanged by the range refresh (version not bumped)")
		}
		sameAsFull(t, conn, "daily", eventsRollupArgs)
	})
}

// TestRollupRefreshAllOrNothing: a refresh cancelled mid-run and a refresher
// process killed mid-run leave the rollup as it was or fully advanced,
// never half; two concurrent refreshes give the bytes of one.
func TestRollupRefreshAllOrNothing(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 1_000_000, 30)
	mustExec(t, conn, `CREATE TABLE later AS SELECT * FROM events WHERE created_at >= '2026-01-05'; DELETE FROM events WHERE created_at >= '2026-01-05'`)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	mustExec(t, conn, `INSERT INTO events SELECT * FROM later`)
	initial := rollupState(t, conn, "daily")

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c2, err := pgx.Connect(ctx, db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close(context.Background())
		var seen int64
		_, err = refresh.Refresh(ctx, pgsession.Conn{C: c2.PgConn()}, "daily", refresh.Options{
			ProgressEvery: 5 * time.Millisecond,
			Progress: func(p refresh.Progress) {
				if p.Rows > 0 && seen == 0 {
					seen = p.Rows
					cancel()
				}
			}})
		if err == nil {
			t.Fatal("refresh cancelled mid-run succeeded")
		}
		t.Logf("cancelled after %d rows: %v", seen, err)
		if seen == 0 {
			t.Fatal("the refresh ended before it could be cancelled mid-run")
		}
		if got := rollupState(t, conn, "daily"); got != initial {
			t.Fatalf("cancelled refresh changed the rollup:\n%s", firstDiff(got, initial))
		}
	})

	t.Run("refresher killed", func(t *testing.T) {
		cmd := exec.Command(binary(t), "rollup", "refresh", "daily", "--dsn", db.DSN)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it while its COPY is streaming.
		waitFor(t, 30*time.Second, "the refresher's COPY to start", func() bool {
			var n int
			_ = conn.QueryRow(context.Background(),
				`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'COPY (SELECT true,%' AND state = 'active'`).Scan(&n)
			return n > 0
		})
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		// The backend notices the lost client; the lock frees when it has rolled back.
		waitFor(t, 30*time.Second, "the killed refresher's backend to end", func() bool {
			var n int
			_ = conn.QueryRow(context.Background(),
				`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'COPY (SELECT true,%'`).Scan(&n)
			return n == 0
		})
		if got := rollupState(t, conn, "daily"); got != initial {
			t.Fatalf("killed refresh changed the rollup:\n%s", firstDiff(got, initial))
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := pgx.Connect(context.Background(), db.DSN)
				if err != nil {
					errs[i] = err
					return
				}
				defer c.Close(context.Background())
				_, errs[i] = refresh.Refresh(context.Background(), pgsession.Conn{C: c.PgConn()}, "daily", refresh.Options{})
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		sameAsFull(t, conn, "daily", eventsRollupArgs)
	})
}

// TestRollupCreateErrors: bad definitions fail with a clear message and
// SQLSTATE and create nothing.
func TestRollupCreateErrors(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 1000, 2)
	mustExec(t, conn, `ALTER TABLE events ADD COLUMN label text, ADD COLUMN score float8, ADD COLUMN payload jsonb`)
	createRollup(t, conn, "taken", `distinct_columns => '{user_id}'`)
	objects := func() string {
		var s string
		if err := conn.QueryRow(context.Background(), `
			SELECT (SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class WHERE relnamespace = 'public'::regnamespace)
			    || ' / ' || (SELECT string_agg(name, ',' ORDER BY name) FROM pgsketch.rollup_defs)
			    || ' / ' || (SELECT count(*) FROM pgsketch.rollup_measures)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := objects()
	for _, c := range []struct {
		name, call, code, msg string
	}{
		{"unknown table", `'r1', 'nope', 'created_at', distinct_columns => '{user_id}'`, "42P01", "relation nope does not exist"},
		{"unknown time column", `'r1', 'events', 'ts', distinct_columns => '{user_id}'`, "42703", `column ts of relation events does not exist`},
		{"unknown dimension", `'r1', 'events', 'created_at', dimensions => '{country,region}', distinct_columns => '{user_id}'`, "42703", "column region of relation events does not exist"},
		{"unknown measure column", `'r1', 'events', 'created_at', distinct_columns => '{visitor}'`, "42703", "column visitor of relation events does not exist"},
		{"time column not a time", `'r1', 'events', 'label', distinct_columns => '{user_id}'`, "42804", "time column label of events has type text"},
		{"sketch of numeric", `'r1', 'events', 'created_at', distinct_columns => '{amount}'`, "42804", "cannot sketch distinct values of column amount of type numeric(10,2)"},
		{"sketch of float", `'r1', 'events', 'created_at', distinct_columns => '{score}'`, "42804", "cannot sketch distinct values of column score"},
		{"sum of text", `'r1', 'events', 'created_at', sum_columns => '{label}'`, "42804", "cannot compute sum of column label of type text"},
		{"min of jsonb", `'r1', 'events', 'created_at', min_columns => '{payload}'`, "42804", "cannot compute min of column payload of type jsonb"},
		{"unknown grain", `'r1', 'events', 'created_at', grain => 'fortnight', distinct_columns => '{user_id}'`, "22023", `unknown grain 'fortnight'`},
		{"unknown time zone", `'r1', 'events', 'created_at', time_zone => 'Mars/Olympus', distinct_columns => '{user_id}'`, "22023", `unknown time zone 'Mars/Olympus'`},
		{"duplicate name", `'taken', 'events', 'created_at', distinct_columns => '{user_id}'`, "42710", `rollup 'taken' already exists`},
		{"bad name", `'Daily Users', 'events', 'created_at', distinct_columns => '{user_id}'`, "22023", `invalid rollup name 'Daily Users'`},
		{"no measure", `'r1', 'events', 'created_at'`, "22023", "a rollup needs at least one measure"},
		{"duplicate dimension", `'r1', 'events', 'created_at', dimensions => '{country,country}', distinct_columns => '{user_id}'`, "42701", "dimension country is listed twice"},
		{"log2m too big", `'r1', 'events', 'created_at', distinct_columns => '{user_id}', log2m => 18`, "22023", "log2m 18 is out of range"},
		{"name of an existing table", `'later_table', 'events', 'created_at', distinct_columns => '{user_id}'`, "42P07", "relation public.later_table already exists"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "name of an existing table" {
				mustExec(t, conn, `CREATE TABLE IF NOT EXISTS later_table ()`)
				before = objects()
			}
			_, err := conn.Exec(context.Background(), "SELECT pgsketch.create_rollup("+c.call+")")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatalf("want an error, got %v", err)
			}
			if pe.Code != c.code || !strings.Contains(pe.Message, c.msg) {
				t.Fatalf("got %s %q (hint %q), want %s containing %q", pe.Code, pe.Message, pe.Hint, c.code, c.msg)
			}
			if after := objects(); after != before {
				t.Fatalf("failed create left objects behind:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	t.Run("CLI", func(t *testing.T) {
		r := runCLI(t, nil, "rollup", "create", "r2", "--dsn", db.DSN, "--table", "events", "--time", "created_at",
			"--distinct", "amount")
		if r.code != 1 || !strings.Contains(r.stderr, "cannot sketch distinct values of column amount of type numeric(10,2)") ||
			!strings.Contains(r.stderr, "SQLSTATE 42804") {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if after := objects(); after != before {
			t.Fatalf("failed create left objects behind:\nbefore %s\nafter  %s", before, after)
		}
	})

	// A zone PostgreSQL may read as an abbreviation, whose meaning each
	// session decides: no query would be answered from the rollup.
	t.Run("CLI, a zone abbreviation", func(t *testing.T) {
		for _, tz := range []string{"EST", "cet", " PST"} {
			r := runCLI(t, nil, "rollup", "create", "r3", "--dsn", db.DSN, "--table", "events", "--time", "created_at",
				"--distinct", "user_id", "--tz", tz)
			if r.code != 2 || !strings.Contains(r.stderr, "is a time zone abbreviation to PostgreSQL") ||
				!strings.Contains(r.stderr, "America/New_York") {
				t.Fatalf("--tz %q: exit %d\nstdout %s\nstderr %s", tz, r.code, r.stdout, r.stderr)
			}
			if after := objects(); after != before {
				t.Fatalf("refused create left objects behind:\nbefore %s\nafter  %s", before, after)
			}
		}
	})

	t.Run("refresh_rollup straight to PostgreSQL", func(t *testing.T) {
		_, err := conn.Exec(context.Background(), "SELECT pgsketch.refresh_rollup('taken')")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Message, "must be executed by pgsketch-proxy") ||
			!strings.Contains(pe.Hint, "pgsketch-proxy rollup refresh taken") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestRollupGrantsAndNotify: the rollup table is readable by exactly the
// roles that can read the base table, re-synced at every refresh, and a
// committed refresh notifies pgsketch_rollups.
func TestRollupGrantsAndNotify(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 10_000, 3)
	suffix := strings.TrimPrefix(db.Name, server.prefix)
	analyst, outsider := "pgsk_analyst"+suffix, "pgsk_outsider"+suffix
	for _, r := range []string{analyst, outsider} {
		mustExec(t, conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s`, r))
		t.Cleanup(func() { // before the database is dropped: its grants name the role
			c, err := pgx.Connect(context.Background(), db.DSN)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, r)); err != nil {
				t.Errorf("drop role %s: %v", r, err)
			}
		})
	}
	mustExec(t, conn, `GRANT SELECT ON events TO `+analyst)
	createRollup(t, conn, "daily", eventsRollupArgs)
	canRead := func(role string) bool {
		var ok bool
		if err := conn.QueryRow(context.Background(), `SELECT has_table_privilege($1, 'public.daily', 'SELECT')`, role).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !canRead(analyst) || canRead(outsider) {
		t.Fatalf("after create: analyst can read %v (want true), outsider %v (want false)", canRead(analyst), canRead(outsider))
	}

	listener := db.Conn(t)
	mustExec(t, listener, "LISTEN pgsketch_rollups")
	mustExec(t, conn, `REVOKE SELECT ON events FROM `+analyst+`; GRANT SELECT ON events TO `+outsider)
	res := refreshRollup(t, conn, "daily", refresh.Options{})
	if canRead(analyst) || !canRead(outsider) {
		t.Fatalf("after refresh: analyst can read %v (want false), outsider %v (want true)", canRead(analyst), canRead(outsider))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"rollup" : "daily", "version" : %d}`, res.Version)
	if n.Channel != "pgsketch_rollups" || n.Payload != want {
		t.Fatalf("notification %s %q, want %q", n.Channel, n.Payload, want)
	}
}

// TestRollupBuckets: for every grain, time column type and a few zones
// (with daylight saving at midnight, and before 2000), the rollup's buckets
// and row counts are exactly those of date_trunc in PostgreSQL.
func TestRollupBuckets(t *testing.T) {
	t.Parallel()
	_, conn := catalogDB(t)
	// Times every 97 minutes over ten years around 2000 and the DST changes
	// of 2025/2026, plus the infinities and a NULL. The row at +infinity
	// is after the open bucket, which no refresh materializes.
	mustExec(t, conn, `CREATE TABLE times (id bigint, tz timestamptz, ts timestamp, d date);
		INSERT INTO times SELECT i, t, t AT TIME ZONE 'UTC', (t AT TIME ZONE 'UTC')::date
		  FROM (SELECT i, timestamptz '1995-06-01 00:00+00' + i * interval '97 minutes' AS t
		          FROM generate_series(0, 60000) i) s;
		INSERT INTO times SELECT 1000000 + i, t, t AT TIME ZONE 'UTC', (t AT TIME ZONE 'UTC')::date
		  FROM (SELECT i, timestamptz '2025-03-01 00:00+00' + i * interval '13 minutes' AS t
		          FROM generate_series(0, 40000) i) s;
		INSERT INTO times VALUES (-1, 'infinity', 'infinity', 'infinity'), (-2, '-infinity', '-infinity', '-infinity'),
		                         (-3, NULL, NULL, NULL)`) // a NULL time is in no bucket
	n := 0
	for _, col := range []string{"tz", "ts", "d"} {
		for _, grain := range []string{"hour", "day", "week", "month"} {
			zones := []string{"UTC"}
			if col == "tz" {
				// Santiago and the Azores turn their clocks at midnight (the
				// Azores' midnight happens twice), Lord Howe by 30 minutes.
				zones = append(zones, "Europe/Berlin", "America/Santiago", "Asia/Kolkata", "Atlantic/Azores",
					"America/New_York", "Australia/Lord_Howe")
			}
			for _, zone := range zones {
				if col == "d" && grain == "hour" {
					continue
				}
				n++
				name := fmt.Sprintf("b%d", n)
				t.Run(name+"_"+col+"_"+grain+"_"+zone, func(t *testing.T) {
					mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.create_rollup('%s', 'times', '%s', grain => '%s',
						time_zone => '%s', distinct_columns => '{id}')`, name, col, grain, zone))
					res := refreshRollup(t, conn, name, refresh.Options{})
					if res.Watermark == "infinity" {
						t.Fatal("the row at infinity moved the watermark to infinity")
					}
					// Rebuilding buckets must give them back exactly: an
					// incremental refresh, and ranges over the 2025 clock
					// changes of the zones above.
					refreshRollup(t, conn, name, refresh.Options{})
					for _, r := range [][2]string{{"2025-04-04", "2025-04-08"}, {"2025-10-24", "2025-10-28"},
						{"2025-11-01 00:30", "2025-11-03 01:30"}, {"1999-12-31 12:00", "2000-01-01"}} {
						refreshRollup(t, conn, name, refresh.Options{From: r[0], To: r[1]})
					}
					want := map[string]string{
						"tz": fmt.Sprintf("date_trunc('%s', tz, '%s')", grain, zone),
						"ts": fmt.Sprintf("date_trunc('%s', ts)", grain),
						"d":  fmt.Sprintf("date_trunc('%s', d::timestamp)::date", grain),
					}[col]
					var diff int
					if err := conn.QueryRow(context.Background(), fmt.Sprintf(`
						SELECT count(*) FROM (
						  (SELECT %[1]s AS bucket, count(*) AS n FROM times WHERE %[3]s < 'infinity' GROUP BY 1
						   EXCEPT SELECT bucket, row_count FROM %[2]s)
						  UNION ALL
						  (SELECT bucket, row_count FROM %[2]s
						   EXCEPT SELECT %[1]s, count(*) FROM times WHERE %[3]s < 'infinity' GROUP BY 1)) x`,
						want, name, col)).Scan(&diff); err != nil {
						t.Fatal(err)
					}
					if diff != 0 {
						t.Fatalf("%d buckets differ from %s", diff, want)
					}
				})
			}
		}
	}
}

// TestRollupLateRowInRepeatedHour: an hourly rollup in New York whose
// newest row lies in the hour that happens twice (2024-11-03 01:00 EDT);
// a row arriving late in that hour is counted by the next refresh.
func TestRollupLateRowInRepeatedHour(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 10, 1)
	mustExec(t, conn, `CREATE TABLE ny (t timestamptz, u int); INSERT INTO ny VALUES ('2024-11-03 05:10+00', 1)`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('nyh', 'ny', 't', grain => 'hour', time_zone => 'America/New_York', distinct_columns => '{u}')`)
	res := refreshRollup(t, conn, "nyh", refresh.Options{})
	if res.Watermark != "2024-11-03 06:00:00+00" {
		t.Fatalf("watermark %s, want the end of the hour read, 2024-11-03 06:00:00+00", res.Watermark)
	}
	mustExec(t, conn, `INSERT INTO ny VALUES ('2024-11-03 05:50+00', 2)`)
	refreshRollup(t, conn, "nyh", refresh.Options{})
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT row_count FROM nyh WHERE bucket = '2024-11-03 05:00+00'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("bucket 05:00Z has %d rows (%v), want 2", n, err)
	}
}

// TestRollupColumnTypes: a time column with a precision, a char(n)
// dimension with its min; dimensions and sketches refuse types whose equal
// values differ in bytes or text.
func TestRollupColumnTypes(t *testing.T) {
	t.Parallel()
	_, conn := eventsDB(t, 10, 1)
	mustExec(t, conn, `CREATE TABLE typed (t timestamptz(0), code char(2), n numeric, f float8, free bpchar, u uuid);
		INSERT INTO typed SELECT timestamptz '2026-01-01' + i * interval '7 minutes', (ARRAY['a','bb',NULL])[1 + i % 3],
		       i % 5, i % 3, 'x', md5(i::text)::uuid FROM generate_series(1, 2000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('typed_daily', 'typed', 't', dimensions => '{code}',
		distinct_columns => '{u}', min_columns => '{code}', max_columns => '{t}')`)
	refreshRollup(t, conn, "typed_daily", refresh.Options{})
	var diff int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM (
		(SELECT date_trunc('day', t, 'UTC'), code, count(*), min(code), max(t) FROM typed GROUP BY 1, 2
		 EXCEPT SELECT bucket, code, row_count, min_code, max_t FROM typed_daily)
		UNION ALL
		(SELECT bucket, code, row_count, min_code, max_t FROM typed_daily
		 EXCEPT SELECT date_trunc('day', t, 'UTC'), code, count(*), min(code), max(t) FROM typed GROUP BY 1, 2)) x`).Scan(&diff); err != nil || diff != 0 {
		t.Fatalf("%d rows differ from GROUP BY (%v)", diff, err)
	}
	for _, c := range []struct{ args, msg string }{
		{`dimensions => '{n}', distinct_columns => '{u}'`, "cannot use column n of type numeric as a dimension"},
		{`dimensions => '{f}', distinct_columns => '{u}'`, "cannot use column f of type double precision as a dimension"},
		{`distinct_columns => '{free}'`, "cannot sketch distinct values of column free of type bpchar"},
	} {
		_, err := conn.Exec(context.Background(), `SELECT pgsketch.create_rollup('bad', 'typed', 't', `+c.args+`)`)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42804" || !strings.Contains(pe.Message, c.msg) {
			t.Errorf("%s: got %v, want 42804 %q", c.args, err, c.msg)
		}
	}
	// A case-insensitive (nondeterministic) collation, where 'a' = 'A'.
	if _, err := conn.Exec(context.Background(), `CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)`); err == nil {
		mustExec(t, conn, `ALTER TABLE typed ADD COLUMN name text COLLATE ci`)
		_, err := conn.Exec(context.Background(), `SELECT pgsketch.create_rollup('bad', 'typed', 't', dimensions => '{name}', distinct_columns => '{u}')`)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42804" {
			t.Errorf("nondeterministic collation: got %v, want 42804", err)
		}
	} else {
		t.Logf("no ICU collations on this server (%v): the collation case is not exercised", err)
	}
	// A view: its tables' row-level security cannot be checked.
	mustExec(t, conn, `CREATE VIEW typed_v AS SELECT * FROM typed`)
	_, err := conn.Exec(context.Background(), `SELECT pgsketch.create_rollup('bad', 'typed_v', 't', distinct_columns => '{u}')`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42809" {
		t.Errorf("view: got %v, want 42809", err)
	}
}

// TestRollupSearchPathHijack: a function a user plants in a schema on the
// refresher's search_path (here public.format for uuid, which the refresh
// statement calls) is not what the refresh runs.
func TestRollupSearchPathHijack(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 10, 1)
	suffix := strings.TrimPrefix(db.Name, server.prefix)
	mallory := "pgsk_mallory" + suffix
	mustExec(t, conn, fmt.Sprintf(`CREATE ROLE %[1]s; GRANT CREATE ON SCHEMA public TO %[1]s;
		CREATE TABLE ids (t timestamptz, id uuid); INSERT INTO ids VALUES (now(), gen_random_uuid());
		SET ROLE %[1]s;
		CREATE FUNCTION public.format(f text, v uuid) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN EXECUTE 'ALTER ROLE %[1]s SUPERUSER'; RETURN pg_catalog.format(f, v); END $$;
		RESET ROLE`, mallory))
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), db.DSN)
		if err == nil {
			_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s; DROP ROLE %[1]s`, mallory))
			c.Close(context.Background())
		}
	})
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ids_daily', 'ids', 't', distinct_columns => '{id}')`)
	refreshRollup(t, conn, "ids_daily", refresh.Options{})
	var super bool
	if err := conn.QueryRow(context.Background(), `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, mallory).Scan(&super); err != nil || super {
		t.Fatalf("the planted function ran as the refresher: %s is superuser %v (%v)", mallory, super, err)
	}
}

// TestRollupMinOfPaddedDomain: the min and max of a column whose type is a
// domain over char(n) are kept in bpchar columns, not in "character" ones
// (char(1), as pg_typeof names the aggregate's type), where the refresh
// failed to store any longer value; and a rollup made so before version
// 28 gets its columns, and its levels', widened by the upgrade.
func TestRollupMinOfPaddedDomain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, conn, m := migratedDB(t)
	mustExec(t, conn, `CREATE DOMAIN cc AS char(2);
		CREATE TABLE dom (t timestamptz NOT NULL, c cc, u bigint);
		INSERT INTO dom SELECT timestamptz '2026-01-01' + (i % 40) * interval '1 day', (ARRAY['DE', 'FR', 'A', NULL])[1 + i % 4], i
		  FROM generate_series(1, 400) i`)
	check := func(name string) {
		t.Helper()
		refreshRollup(t, conn, name, refresh.Options{})
		var diff int
		if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM (
			(SELECT date_trunc('day', t, 'UTC'), min(c)::text, max(c)::text FROM dom GROUP BY 1
			 EXCEPT SELECT bucket, min_c::text, max_c::text FROM %[1]s)
			UNION ALL
			(SELECT bucket, min_c::text, max_c::text FROM %[1]s
			 EXCEPT SELECT date_trunc('day', t, 'UTC'), min(c)::text, max(c)::text FROM dom GROUP BY 1)) x`, name)).Scan(&diff); err != nil || diff != 0 {
			t.Fatalf("%s: %d rows differ from GROUP BY (%v)", name, diff, err)
		}
	}
	mustExec(t, conn, `SELECT pgsketch.create_rollup('dom_daily', 'dom', 't', min_columns => '{c}', max_columns => '{c}', distinct_columns => '{u}')`)
	check("dom_daily")

	migrateDownTo(t, m, 27)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('old_daily', 'dom', 't', min_columns => '{c}', max_columns => '{c}', distinct_columns => '{u}');
		SELECT pgsketch.add_rollup_level('old_daily', 'month')`)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	check("old_daily")
	var types string
	if err := conn.QueryRow(ctx, `SELECT string_agg(format_type(atttypid, atttypmod), ',' ORDER BY attrelid::regclass::text, attname)
		FROM pg_attribute WHERE attrelid IN (SELECT to_regclass(format('%I.%I', table_schema, table_name)) FROM pgsketch.rollup_levels
		                                     UNION ALL SELECT to_regclass(format('%I.%I', rollup_schema, rollup_table)) FROM pgsketch.rollup_defs)
		  AND attname IN ('min_c', 'max_c')`).Scan(&types); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(types, "character(1)") {
		t.Fatalf("min and max columns of the rollups and levels: %s", types)
	}
}
