package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// TestRollingWindows: rolling windows of distinct users per day (a series
// of days joined to the events on a window of created_at per day) are
// answered from the daily rollup in both protocols: every day's count
// within 5 standard errors of PostgreSQL's, counts and days exact, the
// columns PostgreSQL's. A series whose windows do not start and end on
// the rollup's buckets is planned but refused at run time by the outer
// statement's check, and PostgreSQL answers it, with a notice saying why.
func TestRollingWindows(t *testing.T) {
	t.Parallel()
	db, _ := rolledUpEvents(t, 1_000_000, 90, "2026-03-29 12:00", "3 days")
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	answered := []string{
		// As kysely writes it.
		`select "d"."d"::date as "day", count(distinct "events"."user_id") as "users_7d" from generate_series('2026-02-01'::timestamp, '2026-03-20'::timestamp, interval '1 day') as "d" left join "events" on "events"."created_at" >= ("d"."d" - interval '6 days') AT TIME ZONE 'UTC' and "events"."created_at" < ("d"."d" + interval '1 day') AT TIME ZONE 'UTC' group by "d"."d" order by "d"."d"`,
		// By hand: 28-day actives with a count, an inner join and a
		// filter, the series before the window's start.
		`SELECT d.day, count(DISTINCT e.user_id) AS users_28d, count(*) AS events FROM generate_series('2026-02-01', '2026-03-01', interval '1 day') AS d(day)
		   JOIN events e ON e.created_at >= d.day - interval '28 days' AND e.created_at < d.day WHERE e.country = 'DE' GROUP BY d.day ORDER BY 1`,
		// Weekly steps, a window beyond the data (no rows: 0).
		`SELECT d.w, count(DISTINCT e.user_id) FILTER (WHERE e.device = 'ios') AS users_ios FROM generate_series('2026-03-02'::date, '2026-04-20'::date, interval '7 days') AS d(w)
		   LEFT JOIN events e ON e.created_at >= d.w AND e.created_at < d.w + interval '7 days' GROUP BY 1 ORDER BY 1`,
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		for _, sql := range answered {
			want, err := direct.query(ctx, sql)
			if err != nil {
				t.Fatalf("direct: %v\n%s", err, sql)
			}
			got, err := proxied.query(ctx, sql)
			if err != nil {
				t.Errorf("%v: through the proxy: %v\n%s", mode, err, sql)
				continue
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], "from rollup daily (standard error 0.81%)") {
				t.Errorf("%v: notices %q, want the rollup's\n%s\n%s", mode, got.notices, sql, p.Log())
				continue
			}
			errs, err := compareRollupAnswer(got, want)
			if err != nil {
				t.Errorf("%v: %v\n%s\n got %q\nwant %q", mode, err, sql, got.rows, want.rows)
				continue
			}
			for i := range got.fields {
				g, w := got.fields[i], want.fields[i]
				if g.Name != w.Name || g.DataTypeOID != w.DataTypeOID || g.DataTypeSize != w.DataTypeSize || g.TypeModifier != w.TypeModifier {
					t.Errorf("%v: column %d is %+v, PostgreSQL's %+v\n%s", mode, i+1, g, w, sql)
				}
			}
			worst := 0.0
			for _, e := range errs {
				worst = max(worst, e)
			}
			if worst > 5 {
				t.Errorf("%v: an estimate is %.2f standard errors off\n%s\n got %q\nwant %q", mode, worst, sql, got.rows, want.rows)
			}
			t.Logf("%v: %d rows, worst %.2f standard errors: %s", mode, len(got.rows), worst, strings.Join(strings.Fields(sql), " "))
		}
	}

	// Windows from noon to noon: planned, refused by the outer
	// statement's check of the bounds, answered by PostgreSQL, with a
	// notice that says so.
	direct := connectSimple(t, db.DSN)
	noon := `SELECT d.d, count(DISTINCT e.user_id) FROM generate_series('2026-02-01 12:00:00'::timestamp, '2026-02-10 12:00:00'::timestamp, interval '1 day') AS d
	           LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d GROUP BY 1 ORDER BY 1`
	want, err := direct.query(ctx, noon)
	if err != nil {
		t.Fatal(err)
	}
	proxied := connectSimple(t, p.URL(db.DSN))
	got, err := proxied.query(ctx, noon)
	if err != nil {
		t.Fatalf("windows from noon: %v", err)
	}
	if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
		t.Errorf("windows from noon: got %q, PostgreSQL's %q", got.rows, want.rows)
	}
	if len(got.notices) != 1 || !strings.Contains(got.notices[0], "a window bound is not a bucket start of the rollup within the span read (SQLSTATE 22007)") ||
		!strings.HasSuffix(got.notices[0], "answered exactly by PostgreSQL") {
		t.Errorf("windows from noon: notices %q, want one saying why PostgreSQL answered", got.notices)
	}
}

// TestRollingWindowsLocalZone: rolling windows of New York's days (bounds
// at New York midnights, written with AT TIME ZONE, or a series of dates
// in a session whose TimeZone is Berlin's) are answered from the hourly
// UTC rollup, not tried on the daily one, across March 2026's clock
// changes: every count within 5 standard errors of PostgreSQL's. India's
// days, which start at half past UTC hours, are PostgreSQL's, with no
// notice (refused when planned, not when run).
func TestRollingWindowsLocalZone(t *testing.T) {
	t.Parallel()
	db, conn := eventsDB(t, 300_000, 90)
	createRollup(t, conn, "daily", eventsRollupArgs)
	refreshRollup(t, conn, "daily", refresh.Options{})
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ctx := context.Background()
	kysely := func(zone string) string {
		return `select "d"."d"::date as "day", count(distinct "events"."user_id") as "users_7d" from generate_series('2026-03-01'::timestamp, '2026-04-05'::timestamp, interval '1 day') as "d"
			left join "events" on "events"."created_at" >= ("d"."d" - interval '6 days') AT TIME ZONE '` + zone + `'
			and "events"."created_at" < ("d"."d" + interval '1 day') AT TIME ZONE '` + zone + `' group by "d"."d" order by "d"."d"`
	}
	type stmt struct {
		zone, sql string
		answered  bool
	}
	stmts := []stmt{
		{"UTC", kysely("America/New_York"), true},
		{"Europe/Berlin", `SELECT d.d, count(DISTINCT e.user_id) AS users_7d FROM generate_series('2026-03-20'::date, '2026-04-03'::date, interval '1 day') AS d
			LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`, true},
		{"UTC", kysely("Asia/Kolkata"), false},
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		for _, s := range stmts {
			direct, proxied := connectMode(t, db.DSN, mode), connectMode(t, p.URL(db.DSN), mode)
			for _, c := range []*noticeConn{direct, proxied} {
				if _, err := c.query(ctx, "SET TimeZone = '"+s.zone+"'"); err != nil {
					t.Fatal(err)
				}
			}
			want, err := direct.query(ctx, s.sql)
			if err != nil {
				t.Fatalf("direct: %v\n%s", err, s.sql)
			}
			got, err := proxied.query(ctx, s.sql)
			if err != nil {
				t.Fatalf("%v: through the proxy: %v\n%s", mode, err, s.sql)
			}
			if !s.answered {
				if len(got.notices) != 0 || fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
					t.Errorf("%v: got %q with notices %q, want PostgreSQL's %q\n%s", mode, got.rows, got.notices, want.rows, s.sql)
				}
				continue
			}
			if why := rollupAnswerError(got, want, "from rollup hourly"); why != "" {
				t.Errorf("%v: %s\n%s", mode, why, s.sql)
			}
		}
	}
}

// TestRollingWindowEdges: windows that start after their bound and end at
// it (> and <=), at midnight or, as Cube writes them, a millisecond before
// it (also in Cube's own statement: a VALUES list of days joined to a
// subquery of the facts whose range is bound parameters), are answered
// from the daily rollup while no row lies at a bound and the subquery's
// range holds every window (else PostgreSQL answers, with a notice); a
// row exactly at a midnight bound, or in the last millisecond before a
// midnight, which the rollup's buckets would count in the wrong window,
// makes the outer statement's check refuse the answer, and PostgreSQL's
// exact one comes back with a notice saying why; so does a table without
// an index on its time column, which the check would scan per bound.
// Series of parameters or of current_date are answered too, the span
// their windows reach computed when run.
func TestRollingWindowEdges(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 200_000, 90, "2026-03-29 12:00", "3 days")
	ctx := context.Background()
	// No row at a midnight or in the millisecond before one, so that the
	// windows are answered from the rollup whatever the generator drew.
	mustExec(t, conn, `UPDATE events SET created_at = created_at - interval '2 milliseconds'
		WHERE created_at = date_trunc('day', created_at, 'UTC')
		   OR created_at > date_trunc('day', created_at, 'UTC') + interval '1 day' - interval '1 millisecond'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	midnight := `SELECT d.d, count(DISTINCT e.user_id) AS users_7d FROM generate_series('2026-02-01'::timestamp, '2026-02-20'::timestamp, interval '1 day') AS d
	               LEFT JOIN events e ON e.created_at > d.d - interval '7 days' AND e.created_at <= d.d GROUP BY 1 ORDER BY 1`
	cube := `SELECT d.d::date AS day, count(DISTINCT e.user_id) AS users_7d, count(e.id) AS events FROM generate_series('2026-02-01 23:59:59.999'::timestamp, '2026-02-20 23:59:59.999'::timestamp, interval '1 day') AS d
	           LEFT JOIN events e ON e.created_at > d.d - interval '7 days' AND e.created_at <= d.d GROUP BY d.d ORDER BY 1`
	// As Cube writes it: a VALUES list of days ending a millisecond before
	// midnight, joined to a subquery of the facts that keeps the range
	// the windows reach, by parameters.
	var days []string
	for d := 1; d <= 20; d++ {
		days = append(days, fmt.Sprintf("('2026-02-%02dT00:00:00.000', '2026-02-%02dT23:59:59.999')", d, d))
	}
	cubeWritten := `SELECT q_0."day", "users_7d" "users_7d" FROM (SELECT "s"."date_from" "day", count(distinct "users_7d") "users_7d"
		FROM (SELECT date_from::timestamp as "date_from", date_to::timestamp as "date_to" FROM (VALUES ` + strings.Join(days, ",") + `) AS dates (date_from, date_to)) AS "s"
		LEFT JOIN (SELECT ("e".created_at::timestamptz AT TIME ZONE 'UTC') "day", "e".user_id "users_7d" FROM events AS "e"
		           WHERE (("e".created_at::timestamptz AT TIME ZONE 'UTC') > $1::timestamp - interval '7 days' AND ("e".created_at::timestamptz AT TIME ZONE 'UTC') <= $2::timestamp)) AS "b"
		ON "b"."day" > "s"."date_to" - interval '7 days' AND "b"."day" <= "s"."date_to" GROUP BY 1) AS q_0 ORDER BY 1 ASC LIMIT 10000`
	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe}
	check := func(step, sql, notice string, exact bool, args ...any) {
		t.Helper()
		for _, mode := range modes {
			want, err := connectMode(t, db.DSN, mode).query(ctx, sql, args...)
			if err != nil {
				t.Fatalf("%s: direct: %v", step, err)
			}
			got, err := connectMode(t, p.URL(db.DSN), mode).query(ctx, sql, args...)
			if err != nil {
				t.Fatalf("%s: %v: through the proxy: %v", step, mode, err)
			}
			if !exact {
				if why := rollupAnswerError(got, want, notice); why != "" {
					t.Errorf("%s: %v: %s\n%s", step, mode, why, p.Log())
				}
				continue
			}
			if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) {
				t.Errorf("%s: %v: got %q, PostgreSQL's %q", step, mode, got.rows, want.rows)
			}
			if len(got.notices) != 1 || !strings.Contains(got.notices[0], notice) || !strings.HasSuffix(got.notices[0], "answered exactly by PostgreSQL") {
				t.Errorf("%s: %v: notices %q, want one saying %q", step, mode, got.notices, notice)
			}
		}
	}
	check("clean, midnight", midnight, "from rollup daily (standard error 0.81%)", false)
	check("clean, Cube's", cube, "from rollup daily (standard error 0.81%)", false)
	check("clean, as Cube writes it", cubeWritten, "from rollup daily (standard error 0.81%)", false, "2026-02-01T00:00:00.000", "2026-02-20T23:59:59.999")
	// Its range narrower than its windows: the first windows lose rows.
	check("a narrower range, as Cube writes it", cubeWritten, "keeps a narrower range of times than its windows reach", true, "2026-02-03T00:00:00.000", "2026-02-20T23:59:59.999")
	check("a range ending earlier, as Cube writes it", cubeWritten, "keeps a narrower range of times than its windows reach", true, "2026-02-01T00:00:00.000", "2026-02-19T23:59:59.999")
	check("a NULL range, as Cube writes it", cubeWritten, "keeps a narrower range of times than its windows reach", true, nil, "2026-02-20T23:59:59.999")

	// A new user at a midnight that bounds windows: in the windows that
	// end there, not in those that start there.
	mustExec(t, conn, `INSERT INTO events VALUES (900000001, '2026-02-10 00:00:00+00', 900000001, 'DE', 'ios', 1)`)
	atBound := "lie at a window's bound compared by > or <="
	check("a row at midnight, midnight", midnight, atBound, true)
	check("a row at midnight, Cube's", cube, "from rollup daily (standard error 0.81%)", false)
	mustExec(t, conn, `DELETE FROM events WHERE id = 900000001`)
	// One in the last millisecond of a day: in that day's window for
	// Cube, in the next day's bucket.
	mustExec(t, conn, `INSERT INTO events VALUES (900000002, '2026-02-10 23:59:59.9995+00', 900000002, 'DE', 'ios', 1)`)
	check("a row in the last millisecond, Cube's", cube, atBound, true)
	check("a row in the last millisecond, as Cube writes it", cubeWritten, atBound, true, "2026-02-01T00:00:00.000", "2026-02-20T23:59:59.999")
	check("a row in the last millisecond, midnight", midnight, "from rollup daily (standard error 0.81%)", false)

	// A series of parameters, as a dashboard binds its range, or of
	// current_date: the span the windows reach is computed at run time
	// (in the simple protocol pgx writes the values in: literals).
	params := `SELECT d.d, count(DISTINCT e.user_id) AS users_7d, count(*) AS rows FROM generate_series($1::timestamp, $2::timestamp, interval '1 day') AS d
	             LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`
	check("a series of parameters", params, "from rollup daily (standard error 0.81%)", false, "2026-03-01", "2026-03-25")
	check("a series of parameters at noon", params, "a window bound is not a bucket start of the rollup within the span read", true, "2026-03-01 12:00", "2026-03-05 12:00")
	today := `SELECT d.d, count(DISTINCT e.user_id) AS users_7d FROM generate_series(current_date - 400, current_date - 200, interval '1 day') AS d
	            LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`
	check("a series of current_date", today, "from rollup daily (standard error 0.81%)", false)

	mustExec(t, conn, `DROP INDEX events_created_at_idx`)
	check("no index", midnight, `has no btree index on "created_at" to check the rows at its bounds`, true)
}
