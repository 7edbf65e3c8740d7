package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/migrations"
	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// firstSeenQueries count keys by their first bucket. Their counts are
// compared exactly, but for columns named users*, which hold estimates.
var firstSeenQueries = []string{
	`SELECT d, count(*) AS n FROM (SELECT user_id, min(created_at)::date AS d FROM ev GROUP BY user_id) t GROUP BY d ORDER BY d`,
	`SELECT w, count(*) FROM (SELECT user_id, date_trunc('week', min(created_at)) AS w FROM ev GROUP BY user_id) t GROUP BY 1 ORDER BY 1`,
	`SELECT count(*) AS new_users FROM (SELECT user_id FROM ev GROUP BY user_id
	 HAVING min(created_at) >= '2026-02-01' AND min(created_at) < '2026-03-01') t`,
	`SELECT count(*) AS new_since FROM (SELECT user_id, min(created_at) AS first FROM ev GROUP BY user_id
	 HAVING min(created_at) >= '2026-02-20') t`,
	// Returning users: February's active users (estimated, within 5
	// standard errors) less its new users (exact).
	`WITH active AS (SELECT count(DISTINCT user_id) AS n FROM ev WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01'),
	      fresh AS (SELECT count(*) AS n FROM (SELECT user_id FROM ev GROUP BY user_id
	                HAVING min(created_at) >= '2026-02-01' AND min(created_at) < '2026-03-01') t)
	 SELECT active.n AS users_active, fresh.n AS new, active.n - fresh.n AS users_returning FROM active, fresh`,
}

// TestFirstSeen: keys counted by their first bucket through the proxy
// equal PostgreSQL's counts, from the first-seen bookkeeping while it is
// exact (also with keys first seen after the watermark), answered exactly
// with a NOTICE while a change before the range's end is not refreshed
// (late rows earlier than keys' first rows, deleted first rows, an update
// moving them, a dropped partition), and from the bookkeeping again after
// one refresh.
func TestFirstSeen(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	partitionedEv(t, conn, 60000)
	// Keys first seen on every day of February, and a NULL key.
	mustExec(t, conn, `INSERT INTO ev SELECT timestamptz '2026-02-01' + (i % 28) * interval '1 day' + i * interval '1 minute',
			'DE', 'web', 100000 + i, 1 FROM generate_series(1, 2000) i;
		INSERT INTO ev VALUES ('2026-01-20 10:00+00', 'FR', 'ios', NULL, 1), ('2026-02-10 10:00+00', 'FR', 'ios', NULL, 1);
		ANALYZE ev`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	mustExec(t, conn, `SELECT pgsketch.add_first_seen('ev_daily', 'user_id')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})

	p := startProxy(t, server.adminURL, "--approx", "on")
	proxy := connectSimple(t, p.URL(db.DSN))
	direct := connectSimple(t, db.DSN)

	check := func(step string, fromBookkeeping bool) {
		t.Helper()
		ctx := context.Background()
		for _, q := range firstSeenQueries {
			exact, err := direct.query(ctx, q)
			if err != nil {
				t.Fatalf("%s: direct: %v", step, err)
			}
			got, err := proxy.query(ctx, q)
			if err != nil {
				t.Fatalf("%s: proxy: %v", step, err)
			}
			if _, err := compareRollupAnswer(got, exact); err != nil {
				t.Fatalf("%s: %s: %v\nnotices %q", step, q, err, got.notices)
			}
			answered := len(got.notices) == 1 && strings.Contains(got.notices[0], "first-seen bookkeeping of rollup ev_daily")
			if answered != fromBookkeeping {
				t.Fatalf("%s: %s: answered from the bookkeeping: %v, want %v; notices %q", step, q, answered, fromBookkeeping, got.notices)
			}
			if !fromBookkeeping && (len(got.notices) != 1 || !strings.Contains(got.notices[0], "not used")) {
				t.Fatalf("%s: %s: answered exactly without a NOTICE saying why: %q", step, q, got.notices)
			}
		}
	}
	refreshed := func(step string) {
		t.Helper()
		check(step, false)
		refreshRollup(t, conn, "ev_daily", refresh.Options{})
		check(step+", refreshed", true)
	}

	check("built", true)

	// The extended protocol, bounds as bound parameters (binary
	// timestamptz), the statement prepared once and run twice.
	ext := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)
	extDirect := connectMode(t, db.DSN, pgx.QueryExecModeCacheStatement)
	params := `SELECT d, count(*) AS n FROM (SELECT user_id, min(created_at)::date AS d FROM ev GROUP BY user_id
		HAVING min(created_at) >= $1 AND min(created_at) < $2) t GROUP BY d ORDER BY d`
	for _, b := range [][2]time.Time{
		{time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)},
	} {
		exact, err := extDirect.query(context.Background(), params, b[0], b[1])
		if err != nil {
			t.Fatal(err)
		}
		got, err := ext.query(context.Background(), params, b[0], b[1])
		if err != nil {
			t.Fatalf("extended protocol: %v", err)
		}
		if _, err := compareRollupAnswer(got, exact); err != nil {
			t.Fatalf("extended protocol, %v: %v", b, err)
		}
		if len(got.notices) != 1 || !strings.Contains(got.notices[0], "first-seen bookkeeping") {
			t.Fatalf("extended protocol, %v: notices %q", b, got.notices)
		}
	}

	// A bound bound to NULL: HAVING is false for every key.
	nullBound := `SELECT count(*) AS n FROM (SELECT user_id FROM ev GROUP BY user_id HAVING min(created_at) >= $1 AND min(created_at) < $2) t`
	for _, args := range [][]any{{nil, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}, {time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil}} {
		exact, err := extDirect.query(context.Background(), nullBound, args...)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ext.query(context.Background(), nullBound, args...)
		if err != nil {
			t.Fatalf("a NULL bound: %v", err)
		}
		if _, err := compareRollupAnswer(got, exact); err != nil {
			t.Fatalf("a NULL bound %v: %v", args, err)
		}
	}

	// After the watermark (the default partition): new keys, a key seen
	// before, the NULL key again. Counted from the source's rows there.
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-03-05 10:00+00', 'DE', 'web', 900001, 1), ('2026-03-05 11:00+00', 'DE', 'web', 900002, 1),
		('2026-03-06 10:00+00', 'DE', 'web', 100005, 1), ('2026-03-06 10:00+00', 'DE', 'web', NULL, 1)`)
	check("rows after the watermark", true)

	// Late rows earlier than some keys' first rows.
	mustExec(t, conn, `INSERT INTO ev SELECT '2026-01-03 08:00+00', 'US', 'web', 100000 + i, 1 FROM generate_series(1, 300, 3) i`)
	refreshed("late rows")

	// The first rows of some keys deleted, so that they are first seen later.
	mustExec(t, conn, `DELETE FROM ev e USING (SELECT user_id, min(created_at) AS m FROM ev WHERE user_id BETWEEN 100400 AND 100600
		GROUP BY user_id) f WHERE e.user_id = f.user_id AND e.created_at = f.m`)
	refreshed("first rows deleted")

	// An update moving keys' first rows to another day.
	mustExec(t, conn, `UPDATE ev SET created_at = created_at + interval '9 days' WHERE user_id BETWEEN 100700 AND 100800`)
	refreshed("first rows moved")

	// The oldest partition dropped: keys first seen in January are first
	// seen later, or gone.
	mustExec(t, conn, `ALTER TABLE ev DETACH PARTITION ev_2026_01; DROP TABLE ev_2026_01`)
	refreshed("partition dropped")

	// Keys first seen at -infinity and before Christ: the refresh
	// recomputes from there.
	mustExec(t, conn, `INSERT INTO ev VALUES ('-infinity', 'DE', 'web', 910001, 1), ('0044-03-15 12:00:00+00 BC', 'DE', 'web', 910002, 1),
		('0044-03-16 12:00:00+00 BC', 'DE', 'web', 100003, 1)`)
	refreshed("infinite and BC times")
	mustExec(t, conn, `DELETE FROM ev WHERE created_at < '2000-01-01'`)
	refreshed("infinite and BC times deleted")

	// The key's type changed: the bookkeeping takes it, every key read again.
	mustExec(t, conn, `ALTER TABLE ev ALTER COLUMN user_id TYPE text`)
	refreshed("key type changed")

	// Every key, the NULL one too, gone from the materialized buckets.
	mustExec(t, conn, `TRUNCATE ev`)
	refreshed("truncated")
}

// TestFirstSeenPrivileges: the first-seen tables are read only by roles
// that may read the source, also directly; a role that may not gets
// PostgreSQL's own permission error through the proxy; add_first_seen
// refuses a column the rollup does not read, and drop_rollup leaves no
// first-seen table behind.
func TestFirstSeenPrivileges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	partitionedEv(t, conn, 20000)
	mustExec(t, conn, `ALTER TABLE ev ADD COLUMN note text`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	err := conn.QueryRow(ctx, `SELECT pgsketch.add_first_seen('ev_daily', 'note')`).Scan(new(any))
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22023" {
		t.Fatalf("add_first_seen of a column the rollup does not read: %v, want 22023", err)
	}
	mustExec(t, conn, `SELECT pgsketch.add_first_seen('ev_daily', 'user_id')`)
	role := "pgsk_first_reader" + strings.TrimPrefix(db.Name, server.prefix)
	mustExec(t, conn, fmt.Sprintf(`DROP ROLE IF EXISTS %[1]s; CREATE ROLE %[1]s; GRANT SELECT ON ev TO %[1]s`, role))
	dropRoleAtEnd(t, db.DSN, role)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})

	p := startProxy(t, server.adminURL, "--approx", "on")
	reader := connectSimple(t, p.URL(db.DSN))
	mustExec(t, reader.Conn, "SET ROLE "+role)
	q := firstSeenQueries[2]
	got, err := reader.query(ctx, q)
	if err != nil || len(got.notices) != 1 || !strings.Contains(got.notices[0], "first-seen bookkeeping") {
		t.Fatalf("a reader of the source: %v, %+v", err, got)
	}

	mustExec(t, conn, `REVOKE SELECT ON ev FROM `+role)
	if _, err := reader.query(ctx, q); !errors.As(err, &pe) || pe.Code != "42501" || !strings.Contains(pe.Message, "ev") {
		t.Fatalf("after REVOKE, through the proxy: %v, want PostgreSQL's permission error on ev", err)
	}
	direct := connectSimple(t, db.DSN)
	mustExec(t, direct.Conn, "SET ROLE "+role)
	for _, tbl := range []string{"pgsketch.first_ev_daily", "pgsketch.firstn_ev_daily"} {
		a, err := direct.query(ctx, "SELECT * FROM "+tbl)
		if err == nil && len(a.rows) > 0 {
			t.Fatalf("after REVOKE, %s read directly: %d rows", tbl, len(a.rows))
		}
	}
	mustExec(t, direct.Conn, "RESET ROLE")

	// Down to catalog version 22 and up again: the tables go, and come
	// back when the rollup is given first-seen again.
	m := openMigrator(t, db.DSN)
	if err := m.Down(int(migrations.Latest()) - 22); err != nil {
		t.Fatalf("down to 22: %v", err)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname IN ('first_ev_daily', 'firstn_ev_daily', 'rollup_first_seen')`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("at version 22: %d first-seen tables left (%v)", left, err)
	}
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	if err := m.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
	mustExec(t, conn, `SELECT pgsketch.add_first_seen('ev_daily', 'user_id')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	mustExec(t, reader.Conn, "RESET ROLE")
	if got, err := reader.query(ctx, q); err != nil || len(got.notices) != 1 || !strings.Contains(got.notices[0], "first-seen bookkeeping") {
		t.Fatalf("up again: %v, %+v", err, got)
	}

	mustExec(t, conn, `SELECT pgsketch.drop_rollup('ev_daily')`)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname IN ('first_ev_daily', 'firstn_ev_daily')`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("after drop_rollup: %d first-seen tables left (%v)", left, err)
	}
}

// TestFirstSeenFullRefresh: a full refresh rebuilds the first-seen tables
// without a lock that waits for their readers (a transaction that read
// them stays open while it runs), and a transaction whose snapshot is
// older than the refresh reads them as they were: its answer is the one
// it had before.
func TestFirstSeenFullRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	partitionedEv(t, conn, 40000)
	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-03-05 10:00+00', 'DE', 'web', 900001, 1)`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	mustExec(t, conn, `SELECT pgsketch.add_first_seen('ev_daily', 'user_id')`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	q := `SELECT count(*) AS n FROM (SELECT user_id FROM ev GROUP BY user_id HAVING min(created_at) >= '2026-01-20') t`

	for _, readFirst := range []bool{true, false} {
		nc := connectSimple(t, p.URL(db.DSN))
		want, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, nc.Conn, "BEGIN ISOLATION LEVEL REPEATABLE READ")
		if readFirst {
			// The transaction holds its lock on the first-seen tables.
			if _, err := nc.query(ctx, q); err != nil {
				t.Fatal(err)
			}
		} else {
			// Its snapshot is taken, its locks on them are not.
			mustExec(t, nc.Conn, "SELECT count(*) FROM ev")
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err = refresh.Refresh(rctx, pgsession.Conn{C: conn.PgConn()}, "ev_daily", refresh.Options{Full: true})
		cancel()
		if err != nil {
			t.Fatalf("a full refresh while a transaction that read the tables=%v is open: %v", readFirst, err)
		}
		got, err := nc.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
			t.Fatalf("read first=%v: in the older snapshot %v, before %v; notices %q", readFirst, got.rows, want.rows, got.notices)
		}
		mustExec(t, nc.Conn, "COMMIT")
	}
}

// TestFirstSeenVerify: rollup list shows a rollup's first-seen key and
// whether the next refresh builds it; rollup verify compares the new keys
// per bucket the bookkeeping answers with their exact count, says why it
// did not while changes are logged, and fails, naming the bucket, when a
// count is wrong.
func TestFirstSeenVerify(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	partitionedEv(t, conn, 30000)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('ev_daily', 'ev', 'created_at', `+captureArgs+`)`)
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	mustExec(t, conn, `SELECT pgsketch.add_first_seen('ev_daily', 'user_id')`)
	list := func(built bool) {
		t.Helper()
		r := runCLI(t, nil, "rollup", "list", "--dsn", db.DSN)
		if r.code != 0 || !strings.Contains(r.stdout, "FIRST SEEN") || !strings.Contains(r.stdout, " user_id ") ||
			strings.Contains(r.stdout, "built by the next refresh") == built {
			t.Errorf("rollup list, built %v: exit %d\n%s%s", built, r.code, r.stdout, r.stderr)
		}
	}
	list(false)
	verify := func(step string, code int, want ...string) {
		t.Helper()
		r := runCLI(t, nil, "rollup", "verify", "ev_daily", "--dsn", db.DSN)
		if (r.code == 0) != (code == 0) {
			t.Errorf("%s: rollup verify exit %d, want %d\n%s%s", step, r.code, code, r.stdout, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout+r.stderr, w) {
				t.Errorf("%s: rollup verify does not say %q\n%s%s", step, w, r.stdout, r.stderr)
			}
		}
	}
	verify("not built", 0, "first seen by user_id: not checked: pgsketch: first-seen of rollup ev_daily not used: its first-seen bookkeeping is built by the next refresh")

	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	list(true)
	verify("built", 0, "first seen by user_id: 59 buckets checked, 0 wrong; 0 keys with another first bucket")

	mustExec(t, conn, `INSERT INTO ev VALUES ('2026-01-03 08:00+00', 'US', 'web', 777777, 1)`)
	verify("a row inserted", 0, "first seen by user_id: not checked: ", "rows were inserted before the end of the range")
	refreshRollup(t, conn, "ev_daily", refresh.Options{})
	verify("refreshed", 0, "first seen by user_id: 59 buckets checked, 0 wrong; 0 keys with another first bucket")

	// Two keys' first buckets swapped: every count right, the key table not.
	mustExec(t, conn, `UPDATE pgsketch.first_ev_daily SET bucket = CASE WHEN bucket = '2026-01-05' THEN timestamptz '2026-01-06' ELSE '2026-01-05' END
		WHERE key IN ((SELECT key FROM pgsketch.first_ev_daily WHERE bucket = '2026-01-05' LIMIT 1),
		              (SELECT key FROM pgsketch.first_ev_daily WHERE bucket = '2026-01-06' LIMIT 1))`)
	verify("keys swapped", 1, "first seen by user_id: 59 buckets checked, 0 wrong; 2 keys with another first bucket",
		"failed verification of its first-seen counts")
	refreshRollup(t, conn, "ev_daily", refresh.Options{Full: true})
	verify("rebuilt", 0, "first seen by user_id: 59 buckets checked, 0 wrong; 0 keys with another first bucket")

	// A count off by one, and a bucket that has none.
	mustExec(t, conn, `UPDATE pgsketch.firstn_ev_daily SET users = users + 1 WHERE bucket = '2026-01-03';
		INSERT INTO pgsketch.firstn_ev_daily VALUES ('2025-12-30', 5)`)
	verify("counts wrong", 1, "first seen by user_id: 60 buckets checked, 2 wrong; 0 keys", "failed verification of its first-seen counts",
		"2026-01-03 00:00:00+00", "2025-12-30 00:00:00+00")
	r := runCLI(t, nil, "rollup", "verify", "ev_daily", "--dsn", db.DSN, "--first-seen=false")
	if r.code != 0 || strings.Contains(r.stdout, "first seen") {
		t.Errorf("rollup verify --first-seen=false: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestFirstSeenDoubledMidnight: in a zone where a midnight happens twice
// (the Azores on 2025-10-26: at 00:00 and at 01:00 UTC), the day counts
// from the second. With the watermark there, keys whose only rows lie in
// the hour before it are new on that day: counted after the watermark,
// and kept by the refreshes that recompute from that day (version 23
// bounded the rows it read by their time and missed them both ways).
func TestFirstSeenDoubledMidnight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, conn := catalogDB(t)
	azoresRollup(t, conn, `SELECT pgsketch.add_first_seen('az', 'user_id')`)
	var watermark string
	if err := conn.QueryRow(ctx, `SELECT (watermark AT TIME ZONE 'UTC')::text FROM pgsketch.rollup_defs WHERE name = 'az'`).Scan(&watermark); err != nil ||
		!strings.HasPrefix(watermark, "2025-10-26 01:00:00") {
		t.Fatalf("watermark %q, %v; want the second midnight", watermark, err)
	}
	mustExec(t, conn, `INSERT INTO ev VALUES ('2025-10-26 00:30+00', 9001, 5), ('2025-10-26 00:50+00', 9002, 5),
		('2025-10-26 01:30+00', 9003, 5)`)

	p := startProxy(t, server.adminURL, "--approx", "on")
	opt := "&options=" + strings.NewReplacer(" ", "%20", "=", "%3D", "/", "%2F").Replace("-c TimeZone=Atlantic/Azores")
	proxy := connectSimple(t, p.URL(db.DSN)+opt)
	direct := connectSimple(t, db.DSN+opt)
	rowsOf := func(q string) string {
		t.Helper()
		res, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(res.rows)
	}
	same := func(step string) {
		t.Helper()
		exact := rowsOf(`SELECT b::text, count(*) FROM (SELECT date_trunc('day', min(tz), 'Atlantic/Azores') AS b FROM ev GROUP BY user_id) k
			GROUP BY b ORDER BY b`)
		if got := rowsOf(`SELECT bucket::text, users FROM pgsketch.first_seen('az', NULL, NULL) ORDER BY bucket`); got != exact {
			t.Errorf("%s: first_seen %s, exact %s", step, got, exact)
		}
		q := `SELECT d, count(*) AS n FROM (SELECT user_id, date_trunc('day', min(tz)) AS d FROM ev GROUP BY user_id) t GROUP BY d ORDER BY d`
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := proxy.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compareRollupAnswer(got, want); err != nil || len(got.notices) != 1 || !strings.Contains(got.notices[0], "first-seen bookkeeping") {
			t.Errorf("%s: through the proxy %v (%v), exact %v; notices %q", step, got.rows, err, want.rows, got.notices)
		}
		check, err := refresh.VerifyFirstSeen(ctx, pgsession.Conn{C: conn.PgConn()}, "az")
		if err != nil || check.Skipped != "" || len(check.Wrong) != 0 || check.WrongKeys != 0 {
			t.Errorf("%s: verify %+v, %v", step, check, err)
		}
	}
	same("rows after the watermark, before it in time")
	refreshRollup(t, conn, "az", refresh.Options{})
	same("refreshed from the doubled midnight")
	mustExec(t, conn, `INSERT INTO ev VALUES ('2025-10-26 12:00+00', 9004, 1)`)
	refreshRollup(t, conn, "az", refresh.Options{})
	same("refreshed from that day again")

	// Bookkeeping that version 23 kept is built anew after the upgrade
	// (it may lack keys): first_seen refuses until the next refresh.
	m := openMigrator(t, db.DSN)
	migrateDownTo(t, m, 23)
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.query(ctx, `SELECT * FROM pgsketch.first_seen('az', NULL, NULL)`); err == nil ||
		!strings.Contains(err.Error(), "built by the next refresh") {
		t.Errorf("first_seen after the upgrade: %v, want a refusal until the next refresh", err)
	}
	refreshRollup(t, conn, "az", refresh.Options{})
	same("rebuilt after the upgrade")
}
