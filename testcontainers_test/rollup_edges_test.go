package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// TestRollupInfiniteBounds: a range bounded by ±infinity, as a literal or
// a parameter, counts the rows at ±infinity exactly as PostgreSQL does
// ('-infinity' > '-infinity' is false), for every time column type. The
// rollup holds the rows at -infinity in a bucket of their own; those at
// +infinity are past its watermark.
func TestRollupInfiniteBounds(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	direct := connectSimple(t, db.DSN)
	proxied := connectSimple(t, p.URL(db.DSN))
	prepared := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)
	directPrepared := connectMode(t, db.DSN, pgx.QueryExecModeCacheStatement)
	for _, typ := range []string{"timestamptz", "timestamp", "date"} {
		table := "inf_" + typ
		mustExec(t, conn, fmt.Sprintf(`CREATE TABLE %[1]s (t %[2]s, u int);
			INSERT INTO %[1]s VALUES ('-infinity', 1), ('-infinity', 2), ('infinity', 3), ('infinity', 4), (NULL, 5);
			INSERT INTO %[1]s SELECT '2026-01-01'::date + i %% 5, 10 + i FROM generate_series(0, 19) i;
			SELECT pgsketch.create_rollup('%[1]s_daily', '%[1]s', 't', distinct_columns => '{u}')`, table, typ))
		refreshRollup(t, conn, table+"_daily", refresh.Options{})
		for _, where := range []string{
			"t > '-infinity'", "t >= '-infinity'", "t < 'infinity'", "t <= 'infinity'",
			"t > '-infinity' AND t < 'infinity'", "t >= '-infinity' AND t <= 'infinity'",
			"t > 'infinity'", "t >= 'infinity'", "t < '-infinity'", "t <= '-infinity'",
			"t > '-infinity' AND t < '2026-01-03'", "t >= '-infinity' AND t < '2026-01-03'",
		} {
			sql := fmt.Sprintf("SELECT count(*), count(DISTINCT u) FROM %s WHERE %s", table, where)
			want, err := direct.query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			got, err := proxied.query(ctx, sql)
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			if len(got.notices) != 1 {
				t.Errorf("%s: not answered from the rollup: %q", sql, got.notices)
			}
			if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
				t.Errorf("%s: got %v, want %v", sql, got.rows, want.rows)
			}
			psql, args := parameterize(sql)
			if len(args) == 0 {
				continue
			}
			want, err = directPrepared.query(ctx, psql, args...)
			if err != nil {
				t.Fatal(err)
			}
			got, err = prepared.query(ctx, psql, args...)
			if err != nil {
				t.Fatalf("%s %v: %v", psql, args, err)
			}
			if len(got.notices) != 1 {
				t.Errorf("%s %v: not answered from the rollup: %q", psql, args, got.notices)
			}
			if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
				t.Errorf("%s %v: got %v, want %v", psql, args, got.rows, want.rows)
			}
		}
	}
}

// TestRollupFloatSums: sum() of a real or double precision column is not
// added up from the rollup's per-bucket sums, whose total differs from
// PostgreSQL's sum of the rows (floating-point addition is not
// associative): the query passes through and gets PostgreSQL's answer.
func TestRollupFloatSums(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	direct := connectSimple(t, db.DSN)
	proxied := connectSimple(t, p.URL(db.DSN))
	// Each day's sum rounds the 1 away; PostgreSQL, adding the rows in
	// their order, keeps both.
	mustExec(t, conn, `CREATE TABLE fl (t timestamptz, u int, d float8, r real, n int);
		INSERT INTO fl VALUES ('2026-01-01', 1, 1e16, 1e8, 1), ('2026-01-02', 2, -1e16, -1e8, 2),
		                      ('2026-01-01', 3, 1, 1, 3), ('2026-01-02', 4, 1, 1, 4);
		SELECT pgsketch.create_rollup('fl_daily', 'fl', 't', distinct_columns => '{u}', sum_columns => '{d,r,n}')`)
	refreshRollup(t, conn, "fl_daily", refresh.Options{})
	for _, c := range []struct {
		sql    string
		rollup bool
	}{
		{"SELECT count(DISTINCT u), sum(d) FROM fl", false},
		{"SELECT count(DISTINCT u), sum(r) FROM fl WHERE t >= '2026-01-01'", false},
		{"SELECT count(DISTINCT u), sum(n) FROM fl", true},
	} {
		want, err := direct.query(ctx, c.sql)
		if err != nil {
			t.Fatal(err)
		}
		got, err := proxied.query(ctx, c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if c.rollup != (len(got.notices) == 1) {
			t.Errorf("%s: notices %q", c.sql, got.notices)
		}
		if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
			t.Errorf("%s: got %v, want %v", c.sql, got.rows, want.rows)
		}
	}
}

// TestRollupCacheRelativeTimes: 'now', 'today', 'yesterday' and 'tomorrow'
// name another time at every query, as literals and as parameters. A
// query comparing a rollup dimension with one gets PostgreSQL's answer of
// the moment, not the cached answer of an earlier query (each query here
// runs on a new session: the cache is shared by the proxy's sessions).
func TestRollupCacheRelativeTimes(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "268435456")
	ctx := context.Background()
	direct := connectSimple(t, db.DSN)
	mustExec(t, conn, `CREATE TABLE due (t timestamptz, due timestamptz, u int);
		INSERT INTO due VALUES ('2026-01-01', '2000-01-01', 1), ('2026-01-01', clock_timestamp() + interval '3 seconds', 2);
		SELECT pgsketch.create_rollup('due_daily', 'due', 't', dimensions => '{due}', distinct_columns => '{u}')`)
	refreshRollup(t, conn, "due_daily", refresh.Options{})
	queries := []struct {
		sql  string
		args []any
	}{
		{"SELECT count(*), count(DISTINCT u) FROM due WHERE due < ' Now'", nil},
		{"SELECT count(*), count(DISTINCT u) FROM due WHERE due < $1", []any{"now"}},
	}
	ask := func(i int) {
		t.Helper()
		q := queries[i]
		want, err := direct.query(ctx, q.sql, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		c := connectSimple(t, p.URL(db.DSN))
		if q.args != nil {
			c = connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)
		}
		got, err := c.query(ctx, q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s %v: %v", q.sql, q.args, err)
		}
		if len(got.notices) != 1 {
			t.Errorf("%s %v: not answered from the rollup: %q", q.sql, q.args, got.notices)
		}
		if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
			t.Errorf("%s %v: got %v, want %v (%q)", q.sql, q.args, got.rows, want.rows, got.notices)
		}
	}
	for i := range queries {
		ask(i)
	}
	var passed bool
	for !passed {
		if err := conn.QueryRow(ctx, `SELECT max(due) < now() FROM due`).Scan(&passed); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i := range queries {
		ask(i)
	}
}

// TestRollupPreparedRelativeTimes: the proxy prepares its own statements
// once per session, but PostgreSQL reads 'now' and 'today' in a statement's
// text when it prepares it: a statement holding one is prepared anew each
// time, so one session asking again later gets the later answer.
func TestRollupPreparedRelativeTimes(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	p := startProxy(t, server.adminURL, "--approx", "on", "--cache-bytes", "0")
	ctx := context.Background()
	direct := connectSimple(t, db.DSN)
	mustExec(t, conn, `CREATE TABLE due (t timestamptz, due timestamptz, u int);
		INSERT INTO due VALUES ('2026-01-01', '2000-01-01', 1), ('2026-01-01', clock_timestamp() + interval '3 seconds', 2);
		SELECT pgsketch.create_rollup('due_daily', 'due', 't', dimensions => '{due}', distinct_columns => '{u}')`)
	refreshRollup(t, conn, "due_daily", refresh.Options{})
	const q = "SELECT count(*), count(DISTINCT u) FROM due WHERE due < 'now'"
	c := connectSimple(t, p.URL(db.DSN))
	ask := func() {
		t.Helper()
		want, err := direct.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.notices) != 1 {
			t.Errorf("not answered from the rollup: %q", got.notices)
		}
		if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
			t.Errorf("got %v, want %v (%q)", got.rows, want.rows, got.notices)
		}
	}
	ask()
	var passed bool
	for !passed {
		if err := conn.QueryRow(ctx, `SELECT max(due) < now() FROM due`).Scan(&passed); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ask()
}
