package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// TestLocalZoneCharts: charts bucketed in a local time zone whose hours are
// UTC hours (New York, Berlin, Sydney; days, weeks and months, across the
// clock changes of March 2026) are answered from an hourly UTC rollup in
// both protocols, written with AT TIME ZONE, with date_trunc's zone
// argument and with the session's TimeZone: every distinct count within 5
// standard errors of PostgreSQL's, keys and counts exact, the columns
// PostgreSQL's. India's days (hours at half past UTC's) and Lord Howe
// Island's (half-hour clock changes) are answered exactly by PostgreSQL.
func TestLocalZoneCharts(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 400_000, 90)
	mustExec(t, conn, `CREATE INDEX ON events (created_at)`)
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	// Late rows in an hour already rolled up: its base rows are read.
	mustExec(t, conn, `INSERT INTO events SELECT id + 10000000, created_at, user_id + 7, country, device, amount
		FROM events WHERE created_at >= '2026-03-08 06:00+00' AND created_at < '2026-03-08 08:00+00'`)
	mustExec(t, conn, `ANALYZE events`)
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()

	const sessionDays = `SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users
		   FROM events WHERE created_at >= '2026-03-05' AND created_at < '2026-03-12' GROUP BY 1 ORDER BY 1`
	type stmt struct{ zone, sql string }
	answered := []stmt{
		{"UTC", `SELECT date_trunc('day', created_at AT TIME ZONE 'America/New_York') AS day, count(DISTINCT user_id) AS users, count(*) AS n
		   FROM events WHERE created_at >= '2026-03-01 05:00' AND created_at < '2026-03-15 04:00' GROUP BY 1 ORDER BY 1`},
		{"UTC", `SELECT date_trunc('week', created_at AT TIME ZONE 'Europe/Berlin') AS week, country, count(DISTINCT user_id) AS users
		   FROM events WHERE created_at >= '2026-03-02 00:00+01' AND created_at < '2026-04-01 00:00+02' GROUP BY 1, 2 ORDER BY 1, 2`},
		{"UTC", `SELECT date_trunc('month', created_at, 'Australia/Sydney') AS month, count(DISTINCT user_id) AS users, sum(amount) AS amount
		   FROM events GROUP BY 1 ORDER BY 1`},
		// Cube's form: the column cast, the bounds in UTC.
		{"UTC", `SELECT date_trunc('day', ("events".created_at::timestamptz AT TIME ZONE 'America/New_York')) "events__created_at_day",
		   count(distinct "events".user_id) "users" FROM events AS "events"
		   WHERE ("events".created_at >= '2026-03-05T05:00:00.000Z'::timestamptz AND "events".created_at <= '2026-03-12T03:59:59.999Z'::timestamptz)
		   GROUP BY 1 ORDER BY 1`},
		// A day filter on New York's day of the clock change.
		{"UTC", `SELECT device, count(DISTINCT user_id) AS users FROM events
		   WHERE date_trunc('day', created_at AT TIME ZONE 'America/New_York') = '2026-03-08' GROUP BY 1 ORDER BY 1`},
		// The session's zone cuts the days: the same text in UTC first (the
		// plans and cached rows of one zone are not another's).
		{"UTC", sessionDays},
		{"America/New_York", sessionDays},
		{"Europe/Berlin", `SELECT created_at::date AS day, count(DISTINCT user_id) FILTER (WHERE device = 'ios') AS users_ios
		   FROM events WHERE created_at >= '2026-03-26' AND created_at < '2026-04-01' GROUP BY 1 ORDER BY 1`},
	}
	exact := []stmt{
		{"UTC", `SELECT date_trunc('day', created_at AT TIME ZONE 'Asia/Kolkata') AS day, count(DISTINCT user_id) AS users
		   FROM events WHERE created_at >= '2026-03-01' AND created_at < '2026-03-05' GROUP BY 1 ORDER BY 1`},
		{"Australia/Lord_Howe", `SELECT date_trunc('day', created_at) AS day, count(DISTINCT user_id) AS users
		   FROM events WHERE created_at >= '2026-03-01' AND created_at < '2026-03-05' GROUP BY 1 ORDER BY 1`},
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		conns := map[string][2]*noticeConn{}
		pair := func(zone string) [2]*noticeConn {
			if c, ok := conns[zone]; ok {
				return c
			}
			c := [2]*noticeConn{connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)}
			for _, nc := range c {
				if _, err := nc.query(ctx, "SET TimeZone = '"+zone+"'"); err != nil {
					t.Fatal(err)
				}
			}
			conns[zone] = c
			return c
		}
		for _, s := range answered {
			c := pair(s.zone)
			want, err := c[0].query(ctx, s.sql)
			if err != nil {
				t.Fatalf("direct: %v\n%s", err, s.sql)
			}
			got, err := c[1].query(ctx, s.sql)
			if err != nil {
				t.Errorf("%v, %s: through the proxy: %v\n%s", mode, s.zone, err, s.sql)
				continue
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup hourly (standard error 0.81%)") {
				t.Errorf("%v, %s: notices %q, want the rollup's\n%s", mode, s.zone, got.notices, s.sql)
				continue
			}
			errs, err := compareRollupAnswer(got, want)
			if err != nil {
				t.Errorf("%v, %s: %v\n%s\n got %q\nwant %q", mode, s.zone, err, s.sql, got.rows, want.rows)
				continue
			}
			if w := worstOf(errs); w > 5 {
				t.Errorf("%v, %s: an estimate is %.2f standard errors off\n%s\n got %q\nwant %q", mode, s.zone, w, s.sql, got.rows, want.rows)
			}
			t.Logf("%v, %s: %d rows, worst %.2f standard errors: %s", mode, s.zone, len(got.rows), worstOf(errs), strings.Join(strings.Fields(s.sql), " "))
		}
		for _, s := range exact {
			c := pair(s.zone)
			want, err := c[0].query(ctx, s.sql)
			if err != nil {
				t.Fatalf("direct: %v\n%s", err, s.sql)
			}
			got, err := c[1].query(ctx, s.sql)
			if err != nil {
				t.Errorf("%v, %s: through the proxy: %v\n%s", mode, s.zone, err, s.sql)
				continue
			}
			if len(got.notices) != 0 || fmt.Sprint(got.rows) != fmt.Sprint(want.rows) || fmt.Sprint(got.nulls) != fmt.Sprint(want.nulls) {
				t.Errorf("%v, %s: got %q with notices %q, want PostgreSQL's %q\n%s", mode, s.zone, got.rows, got.notices, want.rows, s.sql)
			}
		}
	}
}

// TestLocalZoneParameter: a chart whose time zone is a bound parameter
// (knex writes `created_at AT TIME ZONE ?`) is planned for the value bound,
// in the extended protocol: the same prepared text is answered from the
// hourly rollup in UTC and New York (each with its own days, never the
// other value's plan or cached rows), Sydney's months through date_trunc's
// zone argument, and India's days, a NULL zone and a misspelt zone are
// PostgreSQL's, answer and error alike.
func TestLocalZoneParameter(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 200_000, 90)
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()

	const days = `SELECT date_trunc('day', created_at AT TIME ZONE $1) AS day, count(DISTINCT user_id) AS users
		FROM events WHERE created_at >= $2 AND created_at < $3 GROUP BY 1 ORDER BY 1`
	const months = `SELECT date_trunc('month', created_at, $1) AS month, count(DISTINCT user_id) AS users, count(*) AS n
		FROM events GROUP BY 1 ORDER BY 1`
	type run struct {
		sql      string
		args     []any
		answered bool
	}
	lo, hi := "2026-03-05 00:00+00", "2026-03-12 00:00+00"
	runs := []run{
		{days, []any{"UTC", lo, hi}, true},
		{days, []any{"America/New_York", lo, hi}, true},
		{days, []any{"Asia/Kolkata", lo, hi}, false},
		{days, []any{nil, lo, hi}, false},
		{days, []any{"UTC", lo, hi}, true},
		{days, []any{"America/New_York", lo, hi}, true},
		{months, []any{"Australia/Sydney"}, true},
		{months, []any{"UTC"}, true},
		{months, []any{"Australia/Lord_Howe"}, false},
	}
	direct := connectMode(t, db.DSN, pgx.QueryExecModeCacheStatement)
	proxied := connectMode(t, p.URL(db.DSN), pgx.QueryExecModeCacheStatement)
	for _, r := range runs {
		name := fmt.Sprintf("%q", r.args[0])
		want, err := direct.query(ctx, r.sql, r.args...)
		if err != nil {
			t.Fatalf("direct, %s: %v", name, err)
		}
		got, err := proxied.query(ctx, r.sql, r.args...)
		if err != nil {
			t.Fatalf("through the proxy, %s: %v", name, err)
		}
		if !r.answered {
			if len(got.notices) != 0 || fmt.Sprint(got.rows) != fmt.Sprint(want.rows) || fmt.Sprint(got.nulls) != fmt.Sprint(want.nulls) {
				t.Errorf("%s: got %q with notices %q, want PostgreSQL's %q", name, got.rows, got.notices, want.rows)
			}
			continue
		}
		if why := rollupAnswerError(got, want, "from rollup hourly"); why != "" {
			t.Errorf("%s: %s\n%s", name, why, r.sql)
		}
	}
	// A zone PostgreSQL does not know: its error, for the client's
	// statement.
	_, werr := direct.query(ctx, days, "Mars/Olympus", lo, hi)
	_, gerr := proxied.query(ctx, days, "Mars/Olympus", lo, hi)
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
		t.Errorf("an unknown zone: through the proxy %v, want PostgreSQL's %v", gerr, werr)
	}
	if _, err := proxied.query(ctx, "SELECT 1"); err != nil {
		t.Errorf("the session after the error: %v", err)
	}
}
