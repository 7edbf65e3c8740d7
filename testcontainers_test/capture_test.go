package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// captureArgs define the rollups of the change-capture tests over table ev.
const captureArgs = `grain => 'day', dimensions => '{country,device}', distinct_columns => '{user_id}',
	sum_columns => '{amount}'`

var changedRE = regexp.MustCompile(`; (\d+) changed bucket`)

// captureQueries are compared through the proxy and directly after each
// write: counts and sums must be equal, distinct counts (columns named
// users) within 5 standard errors.
var captureQueries = []string{
	`SELECT country, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev GROUP BY country ORDER BY country`,
	`SELECT device, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev
	 WHERE created_at >= '2026-01-01' AND created_at < '2026-03-01' GROUP BY device ORDER BY device`,
	`SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev
	 WHERE created_at >= '2026-01-10' AND created_at < '2026-01-20' GROUP BY 1 ORDER BY 1`,
}

// partitionedEv makes table ev, partitioned by month (January, February
// and a default partition), with an index on its time and rows over 59
// days of 2026.
func partitionedEv(t *testing.T, conn *pgx.Conn, rows int) {
	t.Helper()
	mustExec(t, conn, fmt.Sprintf(`CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint,
			amount numeric(12,2)) PARTITION BY RANGE (created_at);
		CREATE TABLE ev_2026_01 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
		CREATE TABLE ev_2026_02 PARTITION OF ev FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
		CREATE TABLE ev_rest PARTITION OF ev DEFAULT;
		CREATE INDEX ON ev (created_at);
		INSERT INTO ev SELECT timestamptz '2026-01-01' + (i %% 59) * interval '1 day' + (i %% 86399) * interval '1 second',
			(ARRAY['DE','FR','US','BR','JP'])[1 + i %% 5], (ARRAY['ios','android','web'])[1 + (i / 5) %% 3],
			(i * 7919) %% 20000, (i %% 1000) / 10.0
		  FROM generate_series(1, %d) i;
		ANALYZE ev`, rows))
}

// TestChangeCapture: after each kind of write to a partitioned source, with
// no refresh in between, every answer through the proxy is exact for
// counts and sums and within 5 standard errors for distinct counts; writes
// the triggers see are answered from the rollup with the changed buckets
// read from the base table (the NOTICE counts them; a small INSERT's rows
// are copied instead, and added to the rollup rows), writes they cannot see
// (DETACH, a table swapped by RENAME) are answered exactly. One refresh
// then makes the rollup byte-identical to a fresh build.
func TestChangeCapture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	partitionedEv(t, conn, 120000)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})

	p := startProxy(t, server.adminURL, "--approx", "on")
	nc := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)

	// check compares every query; fromRollup says whether the rollup must
	// answer (with changed > 0: at least that many changed buckets counted
	// in some NOTICE; with tail: base rows after the watermark read), or
	// whether PostgreSQL must (a NOTICE saying why).
	type want struct {
		fromRollup bool
		changed    int
		tail       bool
	}
	check := func(step string, w want) {
		t.Helper()
		maxChanged, tail := 0, false
		for _, q := range captureQueries {
			exact, err := direct.query(ctx, q)
			if err != nil {
				t.Fatalf("%s: direct: %v", step, err)
			}
			got, err := nc.query(ctx, q)
			if err != nil {
				t.Fatalf("%s: proxy: %v\n%s", step, err, p.Log())
			}
			errs, err := compareRollupAnswer(got, exact)
			if err != nil {
				t.Fatalf("%s: %s: %v\nnotices %q", step, q, err, got.notices)
			}
			for _, e := range errs {
				if e > 5 {
					t.Fatalf("%s: %s: a distinct count %.1f standard errors off\nnotices %q", step, q, e, got.notices)
				}
			}
			rollup := len(got.notices) == 1 && strings.Contains(got.notices[0], "approximated from rollup ev_daily")
			if rollup != w.fromRollup {
				t.Fatalf("%s: %s: answered from the rollup: %v, want %v; notices %q", step, q, rollup, w.fromRollup, got.notices)
			}
			// Refused by the fetch statement, a NOTICE says why; refused
			// by the planner (the catalog already says so), none.
			if !w.fromRollup && len(got.notices) > 0 && (len(got.notices) != 1 || !strings.Contains(got.notices[0], "answered exactly by PostgreSQL")) {
				t.Fatalf("%s: %s: notices %q, want one saying why the query ran exactly", step, q, got.notices)
			}
			if rollup {
				if m := changedRE.FindStringSubmatch(got.notices[0]); m != nil {
					n, _ := strconv.Atoi(m[1])
					maxChanged = max(maxChanged, n)
				}
				tail = tail || strings.Contains(got.notices[0], "edge and tail rows read")
			}
		}
		if maxChanged < w.changed {
			t.Fatalf("%s: at most %d changed buckets counted, want at least %d", step, maxChanged, w.changed)
		}
		if w.tail && !tail {
			t.Fatalf("%s: no NOTICE says base rows after the watermark were read", step)
		}
		t.Logf("%s: ok (%d changed buckets counted)", step, maxChanged)
	}
	check("clean", want{fromRollup: true})

	// The open bucket: today's rows are after the watermark.
	mustExec(t, conn, `INSERT INTO ev SELECT now() - i * interval '1 second', 'DE', 'web', 100000 + i, 1 FROM generate_series(1, 50) i`)
	check("rows into the open bucket", want{fromRollup: true, tail: true})
	// One day's dimension updated.
	mustExec(t, conn, `UPDATE ev SET country = 'XX' WHERE created_at >= '2026-01-15' AND created_at < '2026-01-16' AND country = 'DE'`)
	check("UPDATE of a dimension on one day", want{fromRollup: true, changed: 1})
	// A role that may only insert into the source: the trigger function
	// writes the log with its owner's rights.
	mustExec(t, conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s; GRANT INSERT ON ev TO %[1]s;
		SET ROLE %[1]s; INSERT INTO ev VALUES ('2026-01-25 08:00+00', 'JP', 'ios', 700001, 6); RESET ROLE`, db.Name+"_writer"))
	check("INSERT by a role holding only INSERT on the source", want{fromRollup: true, changed: 1})
	// MERGE with two WHEN actions, on another day.
	mustExec(t, conn, `MERGE INTO ev USING (SELECT g AS user_id, timestamptz '2026-01-20 10:00+00' AS at FROM generate_series(0, 4000) g) s
		ON ev.user_id = s.user_id AND ev.created_at >= '2026-01-20' AND ev.created_at < '2026-01-21'
		WHEN MATCHED THEN UPDATE SET amount = ev.amount + 10
		WHEN NOT MATCHED THEN INSERT VALUES (s.at, 'SE', 'web', 600000 + s.user_id, 9)`)
	check("MERGE with two WHEN actions", want{fromRollup: true, changed: 2})
	// Rows 30 days late, and a late row at a bucket boundary.
	mustExec(t, conn, `INSERT INTO ev SELECT timestamptz '2026-02-01' + i * interval '1 minute', 'FR', 'ios', 200000 + i, 2
		FROM generate_series(1, 300) i;
		INSERT INTO ev VALUES ('2026-02-27 23:59:59.999999+00', 'JP', 'web', 300001, 3)`)
	check("rows 30 days late", want{fromRollup: true, changed: 2})
	// COPY straight into a partition: its own triggers fire.
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"ev_2026_02"}, []string{"created_at", "country", "device", "user_id", "amount"},
		pgx.CopyFromSlice(100, func(i int) ([]any, error) {
			at := time.Date(2026, 2, 10, 12, i, 0, 0, time.UTC)
			return []any{at, "US", "ios", int64(500000 + i), "7.00"}, nil
		})); err != nil {
		t.Fatal(err)
	}
	check("COPY into a partition", want{fromRollup: true, changed: 2})
	// A row dated 12024 (a typo), then on-time rows.
	mustExec(t, conn, `INSERT INTO ev VALUES ('12024-01-01 00:00+00', 'US', 'web', 400001, 4)`)
	mustExec(t, conn, `INSERT INTO ev SELECT now() - i * interval '1 second', 'BR', 'android', 400100 + i, 5 FROM generate_series(1, 20) i`)
	check("a row in year 12024, then on-time rows", want{fromRollup: true, changed: 2, tail: true})
	// An erasure: a tenth of the users' January rows.
	mustExec(t, conn, `DELETE FROM ev WHERE user_id % 10 = 3 AND created_at < '2026-02-01'`)
	check("DELETE of a tenth of the users' old rows", want{fromRollup: true, changed: 31})
	// TRUNCATE of a partition.
	mustExec(t, conn, `TRUNCATE ev_2026_02`)
	check("TRUNCATE of a partition", want{fromRollup: true, changed: 59})

	// What no DML trigger sees.
	mustExec(t, conn, `ALTER TABLE ev DETACH PARTITION ev_2026_01`)
	check("DETACH PARTITION", want{fromRollup: false})
	mustExec(t, conn, `CREATE TABLE ev_swap (LIKE ev INCLUDING ALL);
		INSERT INTO ev_swap SELECT * FROM ev WHERE user_id % 2 = 0 UNION ALL SELECT * FROM ev_2026_01 WHERE user_id % 2 = 0;
		ALTER TABLE ev RENAME TO ev_old; ALTER TABLE ev_swap RENAME TO ev`)
	check("a table swapped by RENAME", want{fromRollup: false})

	// One refresh repairs the capture and rebuilds exactly.
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily_ref', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily_ref", refresh.Options{Full: true})
	if got, want := rollupContent(t, conn, "ev_daily"), rollupContent(t, conn, "ev_daily_ref"); got != want {
		t.Fatalf("after one refresh the rollup differs from a fresh build:\n%s", firstDiff(got, want))
	}
	var wm, wmRef *string
	if err := conn.QueryRow(ctx, `SELECT (SELECT watermark::text FROM pgsketch.rollup_defs WHERE name = 'ev_daily'),
		(SELECT watermark::text FROM pgsketch.rollup_defs WHERE name = 'ev_daily_ref')`).Scan(&wm, &wmRef); err != nil {
		t.Fatal(err)
	}
	if wm == nil || wmRef == nil || *wm != *wmRef || strings.HasPrefix(*wm, "12024") {
		t.Fatalf("watermark %v, a fresh build's %v", wm, wmRef)
	}
	mustExec(t, conn, `SELECT pgsketch.drop_rollup('ev_daily_ref')`)
	check("after one refresh", want{fromRollup: true})
}

// TestChangeCaptureDetects: what no DML trigger sees makes the proxy answer
// exactly (never from the rollup) until a refresh, which repairs the
// capture and leaves the rollup as a fresh build; a replication apply
// session's writes (session_replication_role = replica) are captured.
func TestChangeCaptureDetects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev GROUP BY country ORDER BY country`
	setup := func(t *testing.T, partitioned bool) (*testDB, *pgx.Conn, *noticeConn) {
		db, conn := catalogDB(t)
		ddl := `CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint, amount numeric(12,2))`
		if partitioned {
			ddl += ` PARTITION BY RANGE (created_at);
				CREATE TABLE ev_2026_01 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')`
		}
		mustExec(t, conn, ddl+`;
			INSERT INTO ev SELECT timestamptz '2026-01-01' + (i % 28) * interval '1 day', (ARRAY['DE','FR'])[1 + i % 2], 'web', i, 1
			  FROM generate_series(1, 5000) i`)
		mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
		refreshRollup(t, conn, "ev_daily", refresh.Options{})
		p := startProxy(t, server.adminURL, "--approx", "on")
		return db, conn, connectSimple(t, p.URL(db.DSN))
	}
	// answer checks q through the proxy against PostgreSQL and whether the
	// rollup answered.
	answer := func(t *testing.T, conn *pgx.Conn, nc *noticeConn, fromRollup bool) {
		t.Helper()
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		var exact [][]string
		for rows.Next() {
			var c string
			var u, n int64
			var s string
			if err := rows.Scan(&c, &u, &n, &s); err != nil {
				t.Fatal(err)
			}
			exact = append(exact, []string{c, strconv.FormatInt(u, 10), strconv.FormatInt(n, 10), s})
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got.rows) != len(exact) {
			t.Fatalf("%d groups, want %d", len(got.rows), len(exact))
		}
		for i := range exact {
			if got.rows[i][0] != exact[i][0] || got.rows[i][2] != exact[i][2] || got.rows[i][3] != exact[i][3] {
				t.Fatalf("group %d: %q, exact %q; notices %q", i, got.rows[i], exact[i], got.notices)
			}
		}
		rollup := len(got.notices) == 1 && strings.Contains(got.notices[0], "approximated from rollup")
		if rollup != fromRollup {
			t.Fatalf("answered from the rollup: %v, want %v; notices %q", rollup, fromRollup, got.notices)
		}
	}
	repaired := func(t *testing.T, conn *pgx.Conn, nc *noticeConn) {
		t.Helper()
		refreshRollup(t, conn, "ev_daily", refresh.Options{})
		sameAs(t, conn, "ev", "ev_daily")
		answer(t, conn, nc, true)
	}

	t.Run("disabled triggers", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, false)
		mustExec(t, conn, `ALTER TABLE ev DISABLE TRIGGER ALL; DELETE FROM ev WHERE created_at < '2026-01-03'; ALTER TABLE ev ENABLE TRIGGER ALL`)
		answer(t, conn, nc, false) // re-enabled, but not ALWAYS: still refused
		repaired(t, conn, nc)
	})
	t.Run("replication apply", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, false)
		mustExec(t, conn, `SET session_replication_role = replica; DELETE FROM ev WHERE created_at < '2026-01-03'; RESET session_replication_role`)
		answer(t, conn, nc, true)
		repaired(t, conn, nc)
	})
	t.Run("dropped and re-created", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, false)
		mustExec(t, conn, `DROP TABLE ev; CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint, amount numeric(12,2));
			INSERT INTO ev SELECT timestamptz '2026-01-01' + (i % 10) * interval '1 day', 'DE', 'ios', i, 2 FROM generate_series(1, 500) i`)
		answer(t, conn, nc, false)
		repaired(t, conn, nc)
	})
	t.Run("partition attached", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, true)
		mustExec(t, conn, `CREATE TABLE ev_2026_02 (LIKE ev);
			INSERT INTO ev_2026_02 SELECT timestamptz '2026-02-01' + (i % 5) * interval '1 day', 'FR', 'ios', i, 3 FROM generate_series(1, 500) i;
			ALTER TABLE ev ATTACH PARTITION ev_2026_02 FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`)
		answer(t, conn, nc, false)
		// The refresh logs the new partition's buckets and rebuilds those,
		// not every bucket.
		res := refreshRollup(t, conn, "ev_daily", refresh.Options{})
		if res.Mode != "incremental" || res.RowsRead > 1000 {
			t.Errorf("refresh after an attach: %s, %d rows read; want an incremental one reading the new partition's days", res.Mode, res.RowsRead)
		}
		sameAs(t, conn, "ev", "ev_daily")
		answer(t, conn, nc, true)
	})
	t.Run("partition created", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, true)
		mustExec(t, conn, `CREATE TABLE ev_2026_02 PARTITION OF ev FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`)
		answer(t, conn, nc, false)
		repaired(t, conn, nc)
	})
	t.Run("TRUNCATE", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, true)
		mustExec(t, conn, `TRUNCATE ev; INSERT INTO ev VALUES ('2026-01-03 10:00+00', 'DE', 'web', 1, 1)`)
		answer(t, conn, nc, true)
		repaired(t, conn, nc)
	})
	t.Run("INSERT ON CONFLICT", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, false)
		mustExec(t, conn, `ALTER TABLE ev ADD COLUMN id bigint GENERATED ALWAYS AS (user_id) STORED UNIQUE`)
		// Row 7 moves from its day to January 20th (an UPDATE), row 900001 is new (an INSERT).
		mustExec(t, conn, `INSERT INTO ev (created_at, country, device, user_id, amount)
			VALUES ('2026-01-20 10:00+00', 'FR', 'ios', 7, 50), ('2026-01-21 10:00+00', 'FR', 'ios', 900001, 60)
			ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, amount = ev.amount + excluded.amount`)
		answer(t, conn, nc, true)
		repaired(t, conn, nc)
	})
	t.Run("too many changed buckets", func(t *testing.T) {
		t.Parallel()
		_, conn, nc := setup(t, false)
		mustExec(t, conn, `INSERT INTO ev SELECT timestamptz '2026-02-01' + (i % 80) * interval '1 day', 'DE', 'web', i, 1
			FROM generate_series(1, 4000) i`)
		refreshRollup(t, conn, "ev_daily", refresh.Options{})
		mustExec(t, conn, `DELETE FROM ev WHERE user_id % 7 = 0 AND created_at >= '2026-02-01'`) // 80 days changed
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "80 of the buckets in the range changed") ||
			!strings.Contains(got.notices[0], "answered exactly by PostgreSQL") {
			t.Fatalf("notices %q, want one saying the query ran exactly as 80 buckets changed", got.notices)
		}
		answer(t, conn, nc, false)
		repaired(t, conn, nc)
	})
	t.Run("materialized view", func(t *testing.T) {
		t.Parallel()
		db, conn := catalogDB(t)
		mustExec(t, conn, `CREATE TABLE ev_base (created_at timestamptz NOT NULL, country text, device text, user_id bigint, amount numeric(12,2));
			INSERT INTO ev_base SELECT timestamptz '2026-01-01' + (i % 28) * interval '1 day', 'DE', 'web', i, 1 FROM generate_series(1, 1000) i;
			CREATE MATERIALIZED VIEW ev AS SELECT * FROM ev_base`)
		mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
		refreshRollup(t, conn, "ev_daily", refresh.Options{})
		p := startProxy(t, server.adminURL, "--approx", "on")
		nc := connectSimple(t, p.URL(db.DSN))
		mustExec(t, conn, `DELETE FROM ev_base WHERE created_at < '2026-01-05'; REFRESH MATERIALIZED VIEW ev`)
		answer(t, conn, nc, false)
	})
}

// TestChangeCaptureLevels: a level bucket holding a changed bucket is not
// read; the month is answered from the daily rows and the changed day from
// the base table.
func TestChangeCaptureLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE ev (created_at timestamptz NOT NULL, country text, device text, user_id bigint, amount numeric(12,2));
		INSERT INTO ev SELECT timestamptz '2026-01-01' + (i % 41) * interval '1 day', (ARRAY['DE','FR'])[1 + i % 2], 'web', i % 3000, 1
		  FROM generate_series(1, 8000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`);
		SELECT pgsketch.add_rollup_level('ev_daily', 'month')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	nc := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	const q = `SELECT country, count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev
		WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01' GROUP BY country ORDER BY country`
	plan, err := nc.query(ctx, "EXPLAIN "+q)
	if err != nil || !strings.Contains(fmt.Sprint(plan.rows), "level: month") {
		t.Fatalf("EXPLAIN: %v %v: want the month level read", plan, err)
	}
	compare := func(step string, changed int) {
		t.Helper()
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		errs, err := compareRollupAnswer(got, want)
		if err != nil {
			t.Fatalf("%s: %v (%q)", step, err, got.notices)
		}
		for _, e := range errs {
			if e > 5 {
				t.Fatalf("%s: %.1f standard errors off", step, e)
			}
		}
		m := changedRE.FindStringSubmatch(strings.Join(got.notices, ""))
		if (changed == 0) != (m == nil) || (m != nil && m[1] != strconv.Itoa(changed)) {
			t.Fatalf("%s: notices %q, want %d changed buckets", step, got.notices, changed)
		}
	}
	compare("clean", 0)
	mustExec(t, conn, `UPDATE ev SET amount = amount + 5, country = 'FR' WHERE created_at >= '2026-01-10' AND created_at < '2026-01-11' AND country = 'DE'`)
	compare("one day of the month changed", 1)
	// rollup verify leaves the changed day alone: it is stale by design.
	checks, err := refresh.Verify(ctx, pgsession.Conn{C: conn.PgConn()}, "ev_daily", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.RowCount != c.ExactRows || strings.HasPrefix(c.Key, "2026-01-10") {
			t.Fatalf("verify checked %s: %d rows stored, %d exact", c.Key, c.RowCount, c.ExactRows)
		}
	}
	// The refresh reads the changed day and its usual range (the last
	// day, its late window), not the days between.
	if res := refreshRollup(t, conn, "ev_daily", refresh.Options{}); res.RowsRead > 1000 {
		t.Errorf("the refresh read %d rows, want those of two days (about 400)", res.RowsRead)
	}
	compare("refreshed", 0)
	sameAs(t, conn, "ev", "ev_daily")
}

// TestChangeCaptureZones: changed buckets are read right in every kind of
// bucket: days and hours in zones with a daylight-saving change in the
// range, weeks of timestamps, days of dates.
func TestChangeCaptureZones(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE ev (tz timestamptz NOT NULL, ts timestamp NOT NULL, d date NOT NULL, user_id bigint, amount numeric(12,2));
		INSERT INTO ev SELECT t, t AT TIME ZONE 'UTC', (t AT TIME ZONE 'UTC')::date, i % 700, 1
		  FROM (SELECT i, timestamptz '2025-10-20 00:00+00' + i * interval '7 minutes' AS t FROM generate_series(0, 3600) i) s`)
	p := startProxy(t, server.adminURL, "--approx", "on")
	for _, c := range []struct{ rollup, col, grain, zone, changed string }{
		{"berlin_day", "tz", "day", "Europe/Berlin", "tz >= '2025-10-26 00:30+02' AND tz < '2025-10-26 01:30+01'"},
		// The Azores' midnight of 2025-10-26 happens twice: the day's bucket
		// starts at the second, after the rows of the first hour.
		{"azores_day", "tz", "day", "Atlantic/Azores", "tz >= '2025-10-26 00:00+00' AND tz < '2025-10-26 02:00+00'"},
		{"ny_hour", "tz", "hour", "America/New_York", "tz >= '2025-11-02 05:00+00' AND tz < '2025-11-02 07:00+00'"},
		{"ts_week", "ts", "week", "UTC", "ts >= '2025-10-27' AND ts < '2025-10-27 02:00'"},
		{"d_day", "d", "day", "UTC", "d = '2025-10-30'"},
	} {
		// One rollup at a time, so that the query has no other to pick.
		mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.create_rollup('%s', 'ev', '%s', grain => '%s', time_zone => '%s',
			distinct_columns => '{user_id}', sum_columns => '{amount}')`, c.rollup, c.col, c.grain, c.zone))
		refreshRollup(t, conn, c.rollup, refresh.Options{})
		mustExec(t, conn, `UPDATE ev SET amount = amount + 1, user_id = user_id + 10000 WHERE `+c.changed)
		opt := "&options=" + strings.NewReplacer(" ", "%20", "=", "%3D", "/", "%2F").Replace("-c TimeZone="+c.zone)
		nc := connectSimple(t, p.URL(db.DSN)+opt)
		direct := connectSimple(t, db.DSN+opt)
		for _, q := range []string{
			fmt.Sprintf(`SELECT count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev WHERE %[1]s >= '2025-10-21' AND %[1]s < '2025-11-04'`, c.col),
			fmt.Sprintf(`SELECT count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev WHERE %s IS NOT NULL`, c.col),
		} {
			got, err := nc.query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := direct.query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			errs, err := compareRollupAnswer(got, want)
			if err != nil {
				t.Fatalf("%s: %s: %v (%q)", c.rollup, q, err, got.notices)
			}
			for _, e := range errs {
				if e > 5 {
					t.Fatalf("%s: %s: %.1f standard errors off", c.rollup, q, e)
				}
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "rollup "+c.rollup) || !changedRE.MatchString(got.notices[0]) {
				t.Fatalf("%s: %s: notices %q, want an answer from %s with changed buckets", c.rollup, q, got.notices, c.rollup)
			}
		}
		mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.drop_rollup('%s')`, c.rollup))
	}
}

// TestChangeCaptureHalfHourShift: on Lord Howe Island the clocks go back
// half an hour (02:00 to 01:30 on 2025-04-06), and date_trunc keeps a
// time's own offset for hours: the rows of the second 01:30 to 02:00 fall
// in a bucket that starts at 01:00 of the new offset (14:30 UTC), half an
// hour into the rows of the bucket before it (14:00 to 15:00 UTC). Changed
// buckets there, and a range that starts inside them, are read right.
func TestChangeCaptureHalfHourShift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE lh (t timestamptz NOT NULL, u bigint, amount numeric(12,2));
		INSERT INTO lh SELECT timestamptz '2025-04-05 00:00+00' + i * interval '7 minutes', i % 300, 1 FROM generate_series(0, 600) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('lh_hour', 'lh', 't', grain => 'hour', time_zone => 'Australia/Lord_Howe',
		distinct_columns => '{u}', sum_columns => '{amount}')`)
	refreshRollup(t, conn, "lh_hour", refresh.Options{})
	// The rows of both buckets (14:00 to 15:30 UTC) change.
	mustExec(t, conn, `UPDATE lh SET u = u + 1000, amount = amount + 1 WHERE t >= '2025-04-05 14:00+00' AND t < '2025-04-05 15:30+00'`)
	p := startProxy(t, server.adminURL, "--approx", "on")
	opt := "&options=" + strings.NewReplacer(" ", "%20", "=", "%3D", "/", "%2F").Replace("-c TimeZone=Australia/Lord_Howe")
	nc := connectSimple(t, p.URL(db.DSN)+opt)
	direct := connectSimple(t, db.DSN+opt)
	for _, w := range []string{"true", "t >= '2025-04-05 10:00+00' AND t < '2025-04-06 10:00+00'", "t < '2025-04-05 16:00+00'",
		"t >= '2025-04-05 14:00+00'", "t >= '2025-04-05 14:15+00'", "t > '2025-04-05 14:10+00' AND t <= '2025-04-05 15:40+00'"} {
		q := "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM lh WHERE " + w
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compareRollupAnswer(got, want); err != nil {
			t.Errorf("WHERE %s: %v, exact %v (%q)", w, got.rows, want.rows, got.notices)
		}
		if len(got.notices) != 1 || !changedRE.MatchString(got.notices[0]) {
			t.Errorf("WHERE %s: notices %q, want an answer from the rollup with changed buckets", w, got.notices)
		}
	}
}

// TestRollupRepeatedMidnight: in the Azores the midnight of 2025-10-26
// happens twice, and that day's bucket starts at the second: rows of the
// first hour belong to a bucket that starts after them. The base rows
// around the rollup's range (edges, the tail after the watermark) are
// split by bucket, not by instant, so none is lost or counted twice.
func TestRollupRepeatedMidnight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	azoresRollup(t, conn, "")
	// Rows in the first midnight hour, after the refresh: the day after the
	// watermark, yet before it in time.
	mustExec(t, conn, `INSERT INTO ev VALUES ('2025-10-26 00:30+00', 9001, 5), ('2025-10-26 00:50+00', 9002, 5), ('2025-10-26 01:30+00', 9003, 5)`)
	p := startProxy(t, server.adminURL, "--approx", "on")
	opt := "&options=" + strings.NewReplacer(" ", "%20", "=", "%3D", "/", "%2F").Replace("-c TimeZone=Atlantic/Azores")
	nc := connectSimple(t, p.URL(db.DSN)+opt)
	direct := connectSimple(t, db.DSN+opt)
	for _, w := range []string{"true", "tz >= '2025-10-23'", "tz < '2025-10-26'", "tz < '2025-10-26 01:00'",
		"tz < '2025-10-26 00:40+00'", "tz >= '2025-10-26'", "tz >= '2025-10-26 00:00+00'",
		"tz >= '2025-10-25' AND tz < '2025-10-27'", "tz > '2025-10-25 23:30'"} {
		q := "SELECT count(DISTINCT user_id) AS users, count(*) AS n, sum(amount) AS total FROM ev WHERE " + w
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compareRollupAnswer(got, want); err != nil {
			t.Errorf("WHERE %s: %v, exact %v (%q)", w, got.rows, want.rows, got.notices)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "rollup az") {
			t.Errorf("WHERE %s: notices %q, want an answer from the rollup", w, got.notices)
		}
	}
}

// azoresRollup makes table ev (tz, user_id, amount) of 801 rows from
// 2025-10-22 to 2025-10-25 21:20 UTC and its daily rollup az in the time
// zone Atlantic/Azores, where 2025-10-26's midnight happens twice (at
// 00:00 and 01:00 UTC), runs the SQL statements also (after creating
// the rollup), and refreshes it: the watermark is the second midnight.
func azoresRollup(t *testing.T, conn *pgx.Conn, also string) {
	t.Helper()
	mustExec(t, conn, `CREATE TABLE ev (tz timestamptz NOT NULL, user_id bigint, amount numeric(12,2));
		INSERT INTO ev SELECT t, i % 500, 1 FROM (SELECT i, timestamptz '2025-10-22 00:00+00' + i * interval '7 minutes' AS t
		  FROM generate_series(0, 800) i) s`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('az', 'ev', 'tz', grain => 'day', time_zone => 'Atlantic/Azores',
		distinct_columns => '{user_id}', sum_columns => '{amount}')`)
	if also != "" {
		mustExec(t, conn, also)
	}
	refreshRollup(t, conn, "az", refresh.Options{})
}

// TestRollupClockChangeRanges: ranges with bounds every few minutes
// around clock changes, inclusive and exclusive, answered from rollups cut
// in those zones as PostgreSQL answers them. Where Lord Howe Island's
// clocks go back half an hour, an hour's bucket (14:30 UTC) starts before
// the last rows of the one before it (to 15:00 UTC), so a range from 14:40
// holds rows of a bucket that starts before it, next to one that starts
// after it; where they go forward, a bucket starts half an hour before its
// first row. In Santiago and the Azores a midnight happens twice or not at
// all.
func TestRollupClockChangeRanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	cases := []struct {
		zone, grain string
		changes     []string // instants of clock changes, UTC
		step        time.Duration
		widths      []time.Duration
	}{
		{"Australia/Lord_Howe", "hour", []string{"2025-04-05 15:00", "2025-10-04 15:30"}, 10 * time.Minute,
			[]time.Duration{10 * time.Minute, 30 * time.Minute, 70 * time.Minute}},
		{"America/St_Johns", "hour", []string{"2025-03-09 05:30", "2025-11-02 04:30"}, 15 * time.Minute,
			[]time.Duration{15 * time.Minute, 75 * time.Minute}},
		{"America/Santiago", "day", []string{"2025-04-06 03:00", "2025-09-07 04:00"}, 2 * time.Hour,
			[]time.Duration{time.Hour, 5 * time.Hour, 26 * time.Hour}},
		{"Atlantic/Azores", "day", []string{"2025-03-30 01:00", "2025-10-26 01:00"}, 2 * time.Hour,
			[]time.Duration{time.Hour, 5 * time.Hour, 26 * time.Hour}},
	}
	mustExec(t, conn, `CREATE TABLE lh (t timestamptz NOT NULL, u bigint, amount numeric(12,2))`)
	for _, c := range cases {
		for _, at := range c.changes {
			// Rows every three minutes over two days around the change.
			mustExec(t, conn, fmt.Sprintf(`INSERT INTO lh SELECT timestamptz '%s+00' + (i - 480) * interval '3 minutes', i %% 300, 1 FROM generate_series(0, 960) i`, at))
		}
	}
	p := startProxy(t, server.adminURL, "--approx", "on")
	nc := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	for _, c := range cases {
		// One rollup at a time, so that the query has no other to pick.
		name := "lh_" + c.grain
		mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.create_rollup('%s', 'lh', 't', grain => '%s', time_zone => '%s',
			distinct_columns => '{u}', sum_columns => '{amount}')`, name, c.grain, c.zone))
		refreshRollup(t, conn, name, refresh.Options{})
		for _, at := range c.changes {
			change, err := time.Parse("2006-01-02 15:04", at)
			if err != nil {
				t.Fatal(err)
			}
			span := c.widths[len(c.widths)-1]
			for lo := change.Add(-span); !lo.After(change.Add(span / 2)); lo = lo.Add(c.step) {
				for _, width := range c.widths {
					hi := lo.Add(width)
					for _, ops := range [][2]string{{">", "<="}, {">=", "<"}, {">", "<"}, {">=", "<="}} {
						w := fmt.Sprintf("t %s '%s+00' AND t %s '%s+00'", ops[0], lo.Format("2006-01-02 15:04"), ops[1], hi.Format("2006-01-02 15:04"))
						q := "SELECT count(DISTINCT u) AS users, count(*) AS n, sum(amount) AS total FROM lh WHERE " + w
						got, err := nc.query(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						want, err := direct.query(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						if _, err := compareRollupAnswer(got, want); err != nil {
							t.Errorf("%s: WHERE %s: %v, exact %v (%q)", c.zone, w, got.rows, want.rows, got.notices)
						}
						if len(got.notices) != 1 || !strings.Contains(got.notices[0], "rollup "+name) {
							t.Errorf("%s: WHERE %s: notices %q, want an answer from the rollup", c.zone, w, got.notices)
						}
					}
				}
			}
		}
		mustExec(t, conn, fmt.Sprintf(`SELECT pgsketch.drop_rollup('%s')`, name))
	}
}

// TestCountNotNullDropped: count(x) over columns declared NOT NULL is
// answered as the row count, and a DROP NOT NULL followed by NULL values
// never yields the row count for it: exact answers until the rollup is
// refreshed, then the catalog read anew, with the count of values.
func TestCountNotNullDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE ev (t timestamptz NOT NULL, u bigint NOT NULL, amount numeric(12,2));
		INSERT INTO ev SELECT timestamptz '2026-01-01' + i * interval '5 minutes', i % 500, 1 FROM generate_series(0, 5000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 't', distinct_columns => '{u}', sum_columns => '{amount}')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	nc := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)
	const q = `SELECT count(t::text || '/' || u::text) AS n, count(u) AS m, count(DISTINCT u) AS users FROM ev WHERE t >= '2026-01-03'`
	check := func(step string, fromRollup bool) {
		t.Helper()
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compareRollupAnswer(got, want); err != nil {
			t.Fatalf("%s: %v: %v, exact %v (%q)", step, err, got.rows, want.rows, got.notices)
		}
		answered := len(got.notices) == 1 && strings.Contains(got.notices[0], "approximated from rollup ev_daily")
		if answered != fromRollup {
			t.Fatalf("%s: notices %q, want an answer from the rollup: %v", step, got.notices, fromRollup)
		}
	}
	check("NOT NULL", true)
	mustExec(t, conn, `ALTER TABLE ev ALTER COLUMN u DROP NOT NULL`)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-05 10:00', NULL, 1), ('2026-01-20 10:00', NULL, 1)`)
	check("dropped, not refreshed", false)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-05 11:00', NULL, 1)`)
	check("refreshed", false)
}

// TestBrokenCaptureSaysWhy: a rollup whose source changed since its last
// refresh is not used, and every query it would have answered says so in
// a NOTICE, both while the proxy's catalog snapshot predates the change
// and once it has read the catalog anew (an ALTER TABLE that rewrites the
// source changes its pg_class row, which the snapshot's fingerprint
// holds), in the simple and the extended protocol.
func TestBrokenCaptureSaysWhy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE ev (t timestamptz NOT NULL, u bigint NOT NULL, country text, amount numeric(12,2));
		INSERT INTO ev SELECT timestamptz '2026-01-01' + i * interval '5 minutes', i % 500, 'DE', 1 FROM generate_series(0, 5000) i`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 't', dimensions => '{country}', distinct_columns => '{u}')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	direct := connectSimple(t, db.DSN)
	const q = `SELECT country, count(DISTINCT u) AS users FROM ev GROUP BY 1`
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		nc := connectMode(t, p.URL(db.DSN), mode)
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "approximated from rollup ev_daily") {
			t.Fatalf("%v: before the change: notices %q", mode, got.notices)
		}
	}
	mustExec(t, conn, `ALTER TABLE ev ALTER COLUMN country TYPE varchar(10)`)
	want, err := direct.query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		nc := connectMode(t, p.URL(db.DSN), mode)
		for i := range 2 {
			got, err := nc.query(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
				t.Fatalf("%v, query %d after the change: %v, exact %v", mode, i+1, got.rows, want.rows)
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "rollup ev_daily not used") {
				t.Fatalf("%v, query %d after the change: notices %q, want one saying why the rollup is not used", mode, i+1, got.notices)
			}
		}
	}
}
