package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// attack is one statement run directly and through the proxy, after the
// session settings set (run on both connections, then reset).
type attack struct {
	name string
	set  []string
	sql  string
	args []any
}

// runAttack runs a through the proxy and directly and compares: a rollup
// answer (its NOTICE says "approximated") must have PostgreSQL's columns,
// rows and exact values, its distinct counts (columns named users...)
// within 5 standard errors; any other answer, or error, PostgreSQL's own.
// It reports whether the rollup answered.
func runAttack(t *testing.T, proxied, direct *noticeConn, a attack) bool {
	t.Helper()
	ctx := context.Background()
	for _, s := range a.set {
		mustExec(t, proxied.Conn, s)
		mustExec(t, direct.Conn, s)
	}
	defer func() {
		for _, s := range a.set {
			if f := strings.Fields(s); len(f) >= 2 && strings.EqualFold(f[0], "SET") {
				mustExec(t, proxied.Conn, "RESET "+f[1])
				mustExec(t, direct.Conn, "RESET "+f[1])
			}
		}
	}()
	want, werr := direct.query(ctx, a.sql, a.args...)
	got, gerr := proxied.query(ctx, a.sql, a.args...)
	if werr != nil || gerr != nil {
		if werr == nil || gerr == nil {
			t.Errorf("%s: direct error %v, proxy error %v\n%s", a.name, werr, gerr, a.sql)
		} else {
			t.Logf("%s: both fail: %v", a.name, werr)
		}
		return false
	}
	answered := false
	for _, n := range got.notices {
		if strings.Contains(n, "approximated") || strings.Contains(n, "from rollup") {
			answered = true
		}
	}
	if !answered {
		if fmt.Sprint(got.rows) != fmt.Sprint(want.rows) || fmt.Sprint(got.nulls) != fmt.Sprint(want.nulls) {
			t.Errorf("%s: passed through, yet got %q, PostgreSQL's %q\n%s", a.name, got.rows, want.rows, a.sql)
		} else {
			t.Logf("%s: PostgreSQL's answer (%d rows)", a.name, len(want.rows))
		}
		return false
	}
	errs, err := compareRollupAnswer(got, want)
	if err != nil {
		t.Errorf("%s: rollup answer wrong: %v\n%s\n got %q\nwant %q", a.name, err, a.sql, got.rows, want.rows)
		return true
	}
	if w := worstOf(errs); w > 5 {
		t.Errorf("%s: an estimate is %.2f standard errors off\n%s\n got %q\nwant %q", a.name, w, a.sql, got.rows, want.rows)
		return true
	}
	t.Logf("%s: rollup answer, %d rows, worst %.2f standard errors", a.name, len(got.rows), worstOf(errs))
	return true
}

// window is a rolling-window statement over series from, to, step and
// the ON condition on.
func window(series, on, extra string) string {
	return `SELECT d.d, count(DISTINCT e.user_id) AS users, count(*) AS n, count(e.user_id) AS nu, sum(e.amount) AS s, min(e.amount) AS lo, max(e.created_at) AS hi
	  FROM generate_series(` + series + `) AS d LEFT JOIN events e ON ` + on + extra + ` GROUP BY 1 ORDER BY 1`
}

const week = `e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day'`

// TestRedteamWindows: rolling windows and united distinct counts through
// the proxy, each compared with PostgreSQL's exact answer.
func TestRedteamWindows(t *testing.T) {
	t.Parallel()
	db, conn := rolledUpEvents(t, 300_000, 90, "2026-03-29 12:00", "3 days")
	p := startProxy(t, server.adminURL, "--approx", "on")
	days := `'2026-02-01'::timestamp, '2026-02-10'::timestamp, interval '1 day'`
	attacks := []attack{
		{name: "plain", sql: window(days, week, "")},
		{name: "windows with no rows", sql: window(`'2026-06-01'::timestamp, '2026-06-04'::timestamp, interval '1 day'`, week, "")},
		{name: "windows before the data", sql: window(`'2025-12-26'::timestamp, '2026-01-03'::timestamp, interval '1 day'`, week, "")},
		{name: "windows past the watermark", sql: window(`'2026-03-26'::timestamp, '2026-04-06'::timestamp, interval '1 day'`, week, "")},
		{name: "untyped series (timestamptz)", sql: window(`'2026-02-01', '2026-02-10', interval '1 day'`, week, "")},
		{name: "date series", sql: window(`'2026-02-01'::date, '2026-02-10'::date, interval '1 day'`, week, "")},
		{name: "negative step, start after stop", sql: window(`'2026-02-10'::date, '2026-02-01'::date, interval '-1 day'`, week, "")},
		{name: "negative step, empty", sql: window(`'2026-02-01'::timestamp, '2026-02-10'::timestamp, interval '-1 day'`, week, "")},
		{name: "step of 12 hours", sql: window(`'2026-02-01'::timestamp, '2026-02-05'::timestamp, interval '12 hours'`, week, "")},
		{name: "step of 12 hours, bounds cast to date", sql: window(`'2026-02-01'::timestamp, '2026-02-05'::timestamp, interval '12 hours'`,
			`e.created_at >= d.d::date - interval '6 days' AND e.created_at < d.d::date + interval '1 day'`, "")},
		{name: "bounds of hours", sql: window(days, `e.created_at >= d.d - interval '6 hours' AND e.created_at < d.d + interval '18 hours'`, "")},
		{name: "bounds of 24 hours", sql: window(days, `e.created_at >= d.d - interval '144 hours' AND e.created_at < d.d + interval '24 hours'`, "")},
		{name: "interval '1 week'", sql: window(days, `e.created_at >= d.d - interval '1 week' AND e.created_at < d.d`, "")},
		{name: "INTERVAL '1' DAY", sql: window(days, `e.created_at >= d.d - INTERVAL '6' DAY AND e.created_at < d.d + INTERVAL '1' DAY`, "")},
		{name: "'6 days'::interval", sql: window(days, `e.created_at >= d.d - '6 days'::interval AND e.created_at < d.d + '1 day'::interval`, "")},
		{name: "negative interval", sql: window(days, `e.created_at >= d.d + interval '-6 days' AND e.created_at < d.d - interval '-1 day'`, "")},
		{name: "AT TIME ZONE New York", sql: window(days, `e.created_at >= (d.d - interval '6 days') AT TIME ZONE 'America/New_York' AND e.created_at < d.d AT TIME ZONE 'America/New_York'`, "")},
		{name: "AT TIME ZONE +00", sql: window(days, `e.created_at >= (d.d - interval '6 days') AT TIME ZONE '+00' AND e.created_at < d.d AT TIME ZONE 'UTC'`, "")},
		{name: "two lower bounds", sql: window(days, `e.created_at >= d.d - interval '6 days' AND e.created_at >= d.d - interval '3 days' AND e.created_at < d.d`, "")},
		{name: "two upper bounds", sql: window(days, `e.created_at >= d.d - interval '6 days' AND e.created_at < d.d AND e.created_at < d.d - interval '2 days'`, "")},
		{name: "another > on the time column", sql: window(days, week, ` AND e.created_at > d.d - interval '3 days'`)},
		{name: "another <= on the time column", sql: window(days, week, ` AND e.created_at <= d.d - interval '3 days'`)},
		{name: "a bound written reversed", sql: window(days, week, ` AND d.d - interval '3 days' <= e.created_at`)},
		{name: "an equality on the time column", sql: window(days, week, ` AND e.created_at <> d.d`)},
		{name: "OR in ON", sql: window(days, `(`+week+`) OR e.country = 'US'`, "")},
		{name: "OR of windows", sql: window(days, `(`+week+`) OR (e.created_at >= d.d + interval '10 days' AND e.created_at < d.d + interval '11 days')`, "")},
		{name: "ON fact dimension", sql: window(days, week, ` AND e.country = 'US'`)},
		{name: "ON series only", sql: window(days, week, ` AND d.d < '2026-02-05'`)},
		{name: "ON fact and series", sql: window(days, week, ` AND (e.country = 'US' OR d.d < '2026-02-05')`)},
		{name: "ON time column cast", sql: window(days, week, ` AND e.created_at::date <> d.d::date`)},
		{name: "WHERE fact dimension, empty windows", sql: window(`'2026-06-01'::timestamp, '2026-06-04'::timestamp, interval '1 day'`, week, ` WHERE e.country = 'US'`)},
		{name: "WHERE fact dimension", sql: window(`'2026-03-28'::timestamp, '2026-04-06'::timestamp, interval '1 day'`, week, ` WHERE e.country = 'US'`)},
		{name: "WHERE fact dimension IS NULL", sql: window(`'2026-03-28'::timestamp, '2026-04-06'::timestamp, interval '1 day'`, week, ` WHERE e.country IS NULL`)},
		{name: "WHERE IS DISTINCT FROM", sql: window(`'2026-03-28'::timestamp, '2026-04-06'::timestamp, interval '1 day'`, week, ` WHERE e.device IS DISTINCT FROM 'ios'`)},
		{name: "WHERE coalesce", sql: window(`'2026-03-28'::timestamp, '2026-04-06'::timestamp, interval '1 day'`, week, ` WHERE coalesce(e.country, 'none') IN ('US', 'none')`)},
		{name: "WHERE series", sql: window(days, week, ` WHERE d.d >= '2026-02-03'`)},
		{name: "WHERE time column", sql: window(days, week, ` WHERE e.created_at >= '2026-02-01'`)},
		{name: "WHERE NOT EXISTS-like on sum", sql: window(`'2026-03-28'::timestamp, '2026-04-06'::timestamp, interval '1 day'`, week, ` WHERE e.amount IS NULL`)},
		{name: "FILTER on dimension", sql: `SELECT d.d, count(DISTINCT e.user_id) FILTER (WHERE e.device = 'ios') AS users, count(*) FILTER (WHERE e.country = 'US') AS n, sum(e.amount) FILTER (WHERE e.country = 'US') AS s
			FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "FILTER on the time column against the series", sql: `SELECT d.d, count(DISTINCT e.user_id) FILTER (WHERE e.created_at >= d.d) AS users, count(*) FILTER (WHERE e.created_at >= d.d) AS n
			FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "FILTER on the time column, literal", sql: `SELECT d.d, count(DISTINCT e.user_id) FILTER (WHERE e.created_at >= '2026-02-03') AS users, count(*) FILTER (WHERE e.created_at < '2026-02-03') AS n
			FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "FILTER on the series", sql: `SELECT d.d, count(DISTINCT e.user_id) FILTER (WHERE d.d > '2026-02-04') AS users, count(*) FILTER (WHERE d.d > '2026-02-04') AS n
			FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "series column named created_at", sql: `SELECT s.created_at, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS s(created_at)
			LEFT JOIN events e ON e.created_at >= s.created_at - interval '6 days' AND e.created_at < s.created_at + interval '1 day' GROUP BY 1 ORDER BY 1`},
		{name: "series alias created_at", sql: `SELECT created_at.created_at, count(DISTINCT e.user_id) AS users FROM generate_series(` + days + `) AS created_at
			LEFT JOIN events e ON e.created_at >= created_at.created_at - interval '6 days' AND e.created_at < created_at.created_at + interval '1 day' GROUP BY 1 ORDER BY 1`},
		{name: "series column named country", sql: `SELECT s.country, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS s(country)
			LEFT JOIN events e ON e.created_at >= s.country - interval '6 days' AND e.created_at < s.country + interval '1 day' GROUP BY 1 ORDER BY 1`},
		{name: "unqualified series column in SELECT", sql: `SELECT d, count(DISTINCT e.user_id) AS users FROM generate_series(` + days + `) AS d
			LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "unqualified fact column", sql: `SELECT d.d, count(DISTINCT user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d
			LEFT JOIN events e ON created_at >= d.d - interval '6 days' AND created_at < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`},
		{name: "USING", sql: `SELECT created_at, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d(created_at)
			LEFT JOIN events e USING (created_at) GROUP BY 1 ORDER BY 1`},
		{name: "NATURAL", sql: `SELECT created_at, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d(created_at)
			NATURAL LEFT JOIN events e GROUP BY 1 ORDER BY 1`},
		{name: "bound reads the fact table", sql: window(days, `e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + (CASE WHEN e.country = 'US' THEN interval '1 day' ELSE interval '0 days' END)`, "")},
		{name: "RIGHT JOIN", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users, count(*) AS n FROM events e RIGHT JOIN generate_series(` + days + `) AS d ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "fact LEFT JOIN series", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users, count(*) AS n FROM events e LEFT JOIN generate_series(` + days + `) AS d ON ` + week + ` GROUP BY 1 ORDER BY 1 NULLS FIRST`},
		{name: "FULL JOIN", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d FULL JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1 NULLS FIRST`},
		{name: "comma join", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d, events e WHERE ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "CROSS JOIN", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d CROSS JOIN events e WHERE ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "ORDER BY estimate", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 2 DESC, 1`},
		{name: "HAVING estimate", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 HAVING count(DISTINCT e.user_id) > 0 ORDER BY 1`},
		{name: "HAVING count(*)", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users FROM generate_series('2026-03-28'::timestamp, '2026-06-06'::timestamp, interval '7 days') AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 HAVING count(*) > 1 ORDER BY 1`},
		{name: "SELECT DISTINCT", sql: `SELECT DISTINCT count(DISTINCT e.user_id) > 0 AS any_users, count(*) > 1 AS many FROM generate_series('2026-03-28'::timestamp, '2026-06-06'::timestamp, interval '7 days') AS d LEFT JOIN events e ON ` + week + ` GROUP BY d.d ORDER BY 1, 2`},
		{name: "estimate in an expression", sql: `SELECT d.d, count(DISTINCT e.user_id) * 2 AS users2, count(DISTINCT e.user_id)::float8 / nullif(count(*), 0) AS users_ratio FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "window function over windows", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users, sum(count(*)) OVER (ORDER BY d.d ROWS 2 PRECEDING) AS n3, lag(count(*)) OVER (ORDER BY d.d) AS nprev FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "GROUP BY series and dimension", sql: `SELECT d.d, e.device, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series('2026-03-30'::timestamp, '2026-04-08'::timestamp, interval '1 day') AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1, 2 ORDER BY 1, 2 NULLS FIRST`},
		{name: "GROUP BY dimension only", sql: `SELECT e.device, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "no GROUP BY", sql: `SELECT count(DISTINCT e.user_id) AS users, count(*) AS n, sum(e.amount) AS s FROM generate_series(` + days + `) AS d JOIN events e ON ` + week},
		{name: "no GROUP BY, no rows", sql: `SELECT count(DISTINCT e.user_id) AS users, count(*) AS n, sum(e.amount) AS s FROM generate_series('2026-06-01'::timestamp, '2026-06-04'::timestamp, interval '1 day') AS d JOIN events e ON ` + week},
		{name: "ROLLUP over series", sql: `SELECT d.d, e.device, count(DISTINCT e.user_id) AS users, count(*) AS n FROM generate_series(` + days + `) AS d JOIN events e ON ` + week + ` GROUP BY ROLLUP (1, 2) ORDER BY 1, 2`},
		{name: "count(DISTINCT dimension)", sql: `SELECT d.d, count(DISTINCT e.country) AS nc, count(DISTINCT e.user_id) AS users FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "avg", sql: `SELECT d.d, avg(e.amount) AS a, count(DISTINCT e.user_id) AS users FROM generate_series(` + days + `) AS d LEFT JOIN events e ON ` + week + ` GROUP BY 1 ORDER BY 1`},
		{name: "fractional seconds", sql: window(`'2026-02-01 00:00:00.5'::timestamp, '2026-02-05'::timestamp, interval '1 day'`, week, "")},
		{name: "series of a year, 28 days", sql: `SELECT d.d, count(DISTINCT e.user_id) AS users FROM generate_series('2025-12-01'::date, '2026-05-01'::date, interval '7 days') AS d LEFT JOIN events e ON e.created_at >= d.d - interval '28 days' AND e.created_at < d.d GROUP BY 1 ORDER BY 1`},
		{name: "session New York, timestamp series", set: []string{"SET TimeZone = 'America/New_York'"}, sql: window(`'2026-03-01'::timestamp, '2026-03-12'::timestamp, interval '1 day'`, week, "")},
		{name: "session New York, untyped series", set: []string{"SET TimeZone = 'America/New_York'"}, sql: window(`'2026-03-01', '2026-03-12', interval '1 day'`, week, "")},
		{name: "session New York, bounds AT TIME ZONE UTC", set: []string{"SET TimeZone = 'America/New_York'"}, sql: window(`'2026-03-01'::timestamp, '2026-03-12'::timestamp, interval '1 day'`,
			`e.created_at >= (d.d - interval '6 days') AT TIME ZONE 'UTC' AND e.created_at < (d.d + interval '1 day') AT TIME ZONE 'UTC'`, "")},
		{name: "session Kolkata, bounds AT TIME ZONE UTC", set: []string{"SET TimeZone = 'Asia/Kolkata'"}, sql: window(`'2026-03-01'::timestamp, '2026-03-12'::timestamp, interval '1 day'`,
			`e.created_at >= (d.d - interval '6 days') AT TIME ZONE 'UTC' AND e.created_at < (d.d + interval '1 day') AT TIME ZONE 'UTC'`, "")},
		{name: "session Kolkata, untyped series", set: []string{"SET TimeZone = 'Asia/Kolkata'"}, sql: window(`'2026-03-01', '2026-03-12', interval '1 day'`, week, "")},
		{name: "session +10, timestamptz series at UTC midnight", set: []string{"SET TimeZone = 'Australia/Brisbane'"}, sql: window(`'2026-03-01 10:00', '2026-03-12 10:00', interval '1 day'`, week, "")},
		{name: "session UTC+14", set: []string{"SET TimeZone = 'Pacific/Kiritimati'"}, sql: window(`'2026-03-01'::timestamp, '2026-03-12'::timestamp, interval '1 day'`,
			`e.created_at >= (d.d - interval '6 days') AT TIME ZONE 'UTC' AND e.created_at < (d.d + interval '1 day') AT TIME ZONE 'UTC'`, "")},
		{name: "DateStyle and IntervalStyle", set: []string{"SET DateStyle = 'SQL, DMY'", "SET IntervalStyle = 'sql_standard'"}, sql: window(days, week, "")},
		{name: "pgsketch.approx off", set: []string{"SET pgsketch.approx = off"}, sql: window(days, week, "")},
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		answered := 0
		for _, a := range attacks {
			a.name = fmt.Sprintf("%v: %s", mode, a.name)
			if runAttack(t, proxied, direct, a) {
				answered++
			}
		}
		t.Logf("%v: %d of %d answered from the rollup", mode, answered, len(attacks))

		// Parameters in the series.
		runAttack(t, proxied, direct, attack{name: fmt.Sprintf("%v: parameters", mode),
			sql:  window(`$1::timestamp, $2::timestamp, interval '1 day'`, week, ""),
			args: []any{"2026-02-01", "2026-02-10"}})
		runAttack(t, proxied, direct, attack{name: fmt.Sprintf("%v: parameter in a bound", mode),
			sql:  window(days, `e.created_at >= d.d - $1::interval AND e.created_at < d.d + interval '1 day'`, ""),
			args: []any{"6 days"}})
	}

	// In a transaction block: a window refused at run time must not abort
	// the client's transaction.
	t.Run("transaction", func(t *testing.T) {
		ctx := context.Background()
		proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
		mustExec(t, proxied.Conn, "BEGIN")
		mustExec(t, direct.Conn, "BEGIN")
		mustExec(t, proxied.Conn, "CREATE TEMP TABLE redteam_tx (x int)")
		for _, a := range []attack{
			{name: "tx: noon", sql: window(`'2026-02-01 12:00'::timestamp, '2026-02-05 12:00'::timestamp, interval '1 day'`, week, "")},
			{name: "tx: answered", sql: window(days, week, "")},
			{name: "tx: past the span", sql: window(days, `e.created_at >= d.d - interval '6 days' AND e.created_at < (d.d + interval '1 day')::date + 400`, "")},
		} {
			runAttack(t, proxied, direct, a)
			if st := proxied.PgConn().TxStatus(); st != 'T' {
				t.Fatalf("%s: transaction status %c, want T", a.name, st)
			}
		}
		if _, err := proxied.Exec(ctx, "INSERT INTO redteam_tx VALUES (1)"); err != nil {
			t.Fatalf("after the windows: %v", err)
		}
		mustExec(t, proxied.Conn, "COMMIT")
		mustExec(t, direct.Conn, "COMMIT")
	})

	// Changes inside the windows after the refresh, none refreshed.
	t.Run("changes", func(t *testing.T) {
		proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
		mustExec(t, conn, `DELETE FROM events WHERE created_at >= '2026-02-05' AND created_at < '2026-02-06' AND country = 'US'`)
		mustExec(t, conn, `UPDATE events SET user_id = user_id + 50000000, amount = amount + 1000 WHERE created_at >= '2026-02-07' AND created_at < '2026-02-07 06:00'`)
		mustExec(t, conn, `UPDATE events SET created_at = created_at + interval '20 days' WHERE created_at >= '2026-02-03' AND created_at < '2026-02-03 03:00'`)
		mustExec(t, conn, `INSERT INTO events (id, created_at, user_id, country, device, amount)
			SELECT 90000000 + g, '2026-02-08 13:00'::timestamptz + g * interval '1 second', 70000000 + g, 'US', 'ios', 5 FROM generate_series(1, 5000) g`)
		for _, a := range []attack{
			{name: "changed: plain", sql: window(days, week, "")},
			{name: "changed: untyped", sql: window(`'2026-02-01', '2026-03-01', interval '1 day'`, week, "")},
			{name: "changed: WHERE", sql: window(days, week, ` WHERE e.country = 'US'`)},
		} {
			runAttack(t, proxied, direct, a)
		}
	})

	// Row-level security: a role that may read only US rows.
	t.Run("rls", func(t *testing.T) {
		role := "redteam_rls_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
		role = role[:min(len(role), 40)]
		mustExec(t, conn, fmt.Sprintf(`DO $$ BEGIN CREATE ROLE %s; EXCEPTION WHEN duplicate_object THEN NULL; END $$`, role))
		mustExec(t, conn, fmt.Sprintf(`GRANT SELECT ON events TO %s`, role))
		mustExec(t, conn, fmt.Sprintf(`GRANT USAGE ON SCHEMA pgsketch TO %s`, role))
		mustExec(t, conn, fmt.Sprintf(`CREATE POLICY us_only ON events FOR SELECT TO %s USING (country = 'US')`, role))
		mustExec(t, conn, `ALTER TABLE events ENABLE ROW LEVEL SECURITY`)
		proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
		a := attack{name: "rls: window", set: []string{"SET ROLE " + role}, sql: window(days, week, "")}
		if runAttack(t, proxied, direct, a) {
			t.Errorf("a role under row-level security got a rollup answer")
		}
		mustExec(t, proxied.Conn, "RESET ROLE")
		mustExec(t, direct.Conn, "RESET ROLE")
		mustExec(t, conn, `ALTER TABLE events DISABLE ROW LEVEL SECURITY`)
	})
}

// TestRedteamWindowWallClock: rolling windows over a timestamp (without
// time zone) column, whose rollup cuts buckets on the wall clock itself,
// in sessions whose TimeZone skips an hour (New York on 2026-03-08 at
// 02:00) or midnight (Havana on 2026-03-08).
func TestRedteamWindowWallClock(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE ev (id bigint PRIMARY KEY, ts timestamp NOT NULL, u bigint NOT NULL, c text NOT NULL)`)
	mustExec(t, conn, `INSERT INTO ev SELECT g, '2026-03-01'::timestamp + g * interval '7 seconds', hashint4(g) & 32767, CASE WHEN g % 3 = 0 THEN 'a' ELSE 'b' END
		FROM generate_series(0, 14 * 86400 / 7) g`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('evh', 'ev', 'ts', grain => 'hour', dimensions => '{c}', distinct_columns => '{u}')`)
	refreshRollup(t, conn, "evh", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	hourly := `SELECT d.d, count(DISTINCT e.u) AS users, count(*) AS n FROM generate_series('2026-03-07 22:00:00'::timestamp, '2026-03-08 05:00:00'::timestamp, interval '1 hour') AS d
		LEFT JOIN ev e ON e.ts >= d.d AND e.ts < d.d + interval '1 hour' GROUP BY 1 ORDER BY 1`
	daily := `SELECT d.d, count(DISTINCT e.u) AS users, count(*) AS n FROM generate_series('2026-03-08 01:00:00'::timestamp, '2026-03-08 01:00:00'::timestamp, interval '1 day') AS d
		LEFT JOIN ev e ON e.ts >= d.d - interval '1 hour' AND e.ts < d.d GROUP BY 1 ORDER BY 1`
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	for _, a := range []attack{
		{name: "UTC hourly", sql: hourly},
		{name: "New York hourly", set: []string{"SET TimeZone = 'America/New_York'"}, sql: hourly},
		{name: "Havana hourly", set: []string{"SET TimeZone = 'America/Havana'"}, sql: hourly},
		{name: "Havana first hour", set: []string{"SET TimeZone = 'America/Havana'"}, sql: daily},
		{name: "New York, instants", set: []string{"SET TimeZone = 'America/New_York'"}, sql: strings.ReplaceAll(hourly, "::timestamp", "::timestamptz")},
		{name: "New York, dates", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT d.d, count(DISTINCT e.u) AS users, count(*) AS n FROM generate_series('2026-03-05'::date, '2026-03-10'::date, interval '1 day') AS d
			LEFT JOIN ev e ON e.ts >= d.d::date AND e.ts < d.d::date + 1 GROUP BY 1 ORDER BY 1`},
		{name: "New York, days", set: []string{"SET TimeZone = 'America/New_York'"}, sql: `SELECT d.d, count(DISTINCT e.u) AS users, count(*) AS n FROM generate_series('2026-03-05'::timestamp, '2026-03-10'::timestamp, interval '1 day') AS d
			LEFT JOIN ev e ON e.ts >= d.d - interval '2 days' AND e.ts < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`},
		{name: "Lord Howe hourly", set: []string{"SET TimeZone = 'Australia/Lord_Howe'"}, sql: strings.ReplaceAll(strings.ReplaceAll(hourly, "2026-03-07 22:00:00", "2026-04-04 22:00:00"), "2026-03-08 05:00:00", "2026-04-05 05:00:00")},
	} {
		runAttack(t, proxied, direct, a)
	}
}

// TestRedteamWindowZones: rolling windows over rollups cut in New York's
// days and hours, across both changes of its offset in 2026, in sessions
// in New York and elsewhere.
func TestRedteamWindowZones(t *testing.T) {
	t.Parallel()
	db, conn := catalogDB(t)
	mustExec(t, conn, `CREATE TABLE events (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, user_id bigint NOT NULL, country text, device text NOT NULL, amount numeric(10,2) NOT NULL)`)
	mustExec(t, conn, `INSERT INTO events SELECT g, '2026-02-20 00:00+00'::timestamptz + g * interval '37 seconds', hashint4(g) & 65535, CASE WHEN g % 3 = 0 THEN 'US' ELSE 'DE' END, 'ios', g % 100
		FROM generate_series(0, 290 * 86400 / 37) g`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('nyd', 'events', 'created_at', grain => 'day', time_zone => 'America/New_York', dimensions => '{country}', distinct_columns => '{user_id}', sum_columns => '{amount}')`)
	mustExec(t, conn, `SELECT pgsketch.create_rollup('nyh', 'events', 'created_at', grain => 'hour', time_zone => 'America/New_York', dimensions => '{country}', distinct_columns => '{user_id}', sum_columns => '{amount}')`)
	refreshRollup(t, conn, "nyd", refresh.Options{})
	refreshRollup(t, conn, "nyh", refresh.Options{})
	p := startProxy(t, server.adminURL, "--approx", "on")
	ny := []string{"SET TimeZone = 'America/New_York'"}
	spring := `'2026-03-05'::timestamp, '2026-03-12'::timestamp, interval '1 day'`
	fall := `'2026-10-29', '2026-11-05', interval '1 day'`
	hours := `'2026-03-08 00:00:00'::timestamp, '2026-03-08 05:00:00'::timestamp, interval '1 hour'`
	fallHours := `'2026-11-01 00:00:00', '2026-11-01 03:00:00', interval '1 hour'`
	hourWin := `e.created_at >= d.d AND e.created_at < d.d + interval '1 hour'`
	proxied, direct := connectSimple(t, p.URL(db.DSN)), connectSimple(t, db.DSN)
	for _, a := range []attack{
		{name: "NY spring, days", set: ny, sql: zwindow(spring, week, "")},
		{name: "NY fall, days, instants", set: ny, sql: zwindow(fall, week, "")},
		{name: "NY fall, 144 hours", set: ny, sql: zwindow(fall, `e.created_at >= d.d - interval '144 hours' AND e.created_at < d.d + interval '24 hours'`, "")},
		{name: "NY spring, hours", set: ny, sql: zwindow(hours, hourWin, "")},
		{name: "NY spring, 2-hour windows", set: ny, sql: zwindow(hours, `e.created_at >= d.d - interval '1 hour' AND e.created_at < d.d + interval '1 hour'`, "")},
		{name: "NY fall, hours, instants", set: ny, sql: zwindow(fallHours, hourWin, "")},
		{name: "NY fall, hours, wall clocks", set: ny, sql: zwindow(strings.ReplaceAll(fallHours, "'2026", "timestamp '2026"), hourWin, "")},
		{name: "UTC session, NY days", sql: zwindow(spring, week, "")},
		{name: "UTC session, bounds in NY", sql: zwindow(spring, `e.created_at >= (d.d - interval '6 days') AT TIME ZONE 'America/New_York' AND e.created_at < (d.d + interval '1 day') AT TIME ZONE 'America/New_York'`, "")},
		{name: "Chicago session, bounds in NY", set: []string{"SET TimeZone = 'America/Chicago'"}, sql: zwindow(spring, `e.created_at >= (d.d - interval '6 days') AT TIME ZONE 'America/New_York' AND e.created_at < (d.d + interval '1 day') AT TIME ZONE 'America/New_York'`, "")},
		{name: "NY, WHERE dimension", set: ny, sql: zwindow(spring, week, ` WHERE e.country = 'US'`)},
	} {
		runAttack(t, proxied, direct, a)
	}
}

// TestRedteamHLLEstimateHostile: pgsketch.hll_estimate over bytes that
// are no valid sketch errs or gives NaN, and returns promptly.
func TestRedteamHLLEstimateHostile(t *testing.T) {
	t.Parallel()
	_, conn := catalogDB(t)
	ctx := context.Background()
	for _, c := range []struct{ name, expr string }{
		{"empty bytes", `'\x'::bytea`},
		{"two bytes", `'\x148b'::bytea`},
		{"undefined", `'\x108b7f'::bytea`},
		{"type 5", `'\x158b7f00'::bytea`},
		{"type 15", `'\x1f8b7f00'::bytea`},
		{"full, truncated", `'\x148b7f'::bytea || decode(repeat('21', 100), 'hex')`},
		{"full, log2m 31", `'\x149f7f'::bytea || decode(repeat('21', 100), 'hex')`},
		{"sparse, huge", `'\x138e7f'::bytea || decode(repeat('ffffffff', 2000000), 'hex')`},
	} {
		start := time.Now()
		var v float64
		err := conn.QueryRow(ctx, `SELECT pgsketch.hll_estimate(`+c.expr+`)`).Scan(&v)
		took := time.Since(start)
		switch {
		case err != nil:
			t.Logf("%s: error %v (%v)", c.name, err, took)
		case math.IsNaN(v):
			t.Logf("%s: NaN (%v)", c.name, took)
		default:
			t.Errorf("%s: a count, %v (%v)", c.name, v, took)
		}
		if took > 30*time.Second {
			t.Errorf("%s: took %v", c.name, took)
		}
	}
}

// zwindow is window without min and max, which the zone tests' rollups do
// not keep.
func zwindow(series, on, extra string) string {
	return strings.Replace(window(series, on, extra), ", min(e.amount) AS lo, max(e.created_at) AS hi", "", 1)
}
