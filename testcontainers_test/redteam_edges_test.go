package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
)

// Red team of the rolling windows bounded by > and <= (rewrite/window.go)
// and of Cube's VALUES-list form (rewrite/windowlist.go). Each
// TestRedteamEdges... test but the last exposes a wrong answer and fails
// on the code it was written against; TestRedteamEdgesHeld keeps the
// attacks that held, as regression tests.

// edgesFixture is TestRollingWindowEdges's table: events from 2026-01-01
// to 2026-04-03, with no row at a UTC midnight or in the millisecond
// before one (so that the edge check lets the rollup answer), a daily UTC
// rollup, and a proxy.
func edgesFixture(t *testing.T) (*testDB, *pgx.Conn, *proxyProc) {
	t.Helper()
	db, conn := rolledUpEvents(t, 200_000, 90, "2026-03-29 12:00", "3 days")
	mustExec(t, conn, `UPDATE events SET created_at = created_at - interval '2 milliseconds'
		WHERE created_at = date_trunc('day', created_at, 'UTC')
		   OR created_at > date_trunc('day', created_at, 'UTC') + interval '1 day' - interval '1 millisecond'`)
	refreshRollup(t, conn, "daily", refresh.Options{})
	return db, conn, startProxy(t, server.adminURL, "--approx", "on")
}

// cubeList is Cube's list of days from..to of 2026 (month m), each row
// written by row(day).
func cubeList(m, from, to int, row func(m, d int) string) string {
	var rows []string
	for d := from; d <= to; d++ {
		rows = append(rows, row(m, d))
	}
	return strings.Join(rows, ", ")
}

func cubeDays(m, d int) string {
	return fmt.Sprintf("('2026-%02d-%02dT00:00:00.000', '2026-%02d-%02dT23:59:59.999')", m, d, m, d)
}

// runAttacksBothProtocols runs every attack in the simple and the
// extended protocol.
func runAttacksBothProtocols(t *testing.T, db *testDB, p *proxyProc, attacks []attack) {
	t.Helper()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe} {
		proxied, direct := connectMode(t, p.URL(db.DSN), mode), connectMode(t, db.DSN, mode)
		for _, a := range attacks {
			a.name = fmt.Sprintf("%v: %s", mode, a.name)
			runAttack(t, proxied, direct, a)
		}
	}
}

// FINDING 1. A VALUES literal cast to date in the list ('2026-02-10
// 23:59:59.999'::date is 2026-02-10, midnight): timeLiteral reads the
// string's time of day and ignores the cast, so the rewrite's series and
// bounds sit 23:59:59.999 later than PostgreSQL's. The windows (Feb 3
// 00:00, Feb 10 00:00] are answered as (Feb 3 23:59:59.999, Feb 10
// 23:59:59.999]: every window a day late.
func TestRedteamEdgesValuesDateCast(t *testing.T) {
	t.Parallel()
	db, _, p := edgesFixture(t)
	list := cubeList(2, 1, 20, func(m, d int) string {
		return fmt.Sprintf("('2026-%02d-%02d'::date, '2026-%02d-%02d 23:59:59.999'::date)", m, d, m, d)
	})
	runAttacksBothProtocols(t, db, p, []attack{{
		name: "a list of dates written with a time of day",
		sql: `SELECT s.date_from AS day, count(DISTINCT b.u) AS users_7d, count(b.u) AS events
			FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + list + `) AS v (date_from, date_to)) AS s
			LEFT JOIN (SELECT e.created_at AT TIME ZONE 'UTC' AS t, e.user_id AS u FROM events e) AS b
			ON b.t > s.date_to - interval '7 days' AND b.t <= s.date_to GROUP BY 1 ORDER BY 1`,
	}})
}

// FINDING 2. A VALUES list with LIMIT or OFFSET: readSeries reads every
// row of the VALUES (valuesItem accepts the subquery whatever it limits),
// so the series has rows PostgreSQL's list does not.
func TestRedteamEdgesValuesLimit(t *testing.T) {
	t.Parallel()
	db, _, p := edgesFixture(t)
	list := cubeList(2, 1, 10, cubeDays)
	q := func(tail string) string {
		return `SELECT s.date_from AS day, count(DISTINCT b.u) AS users_7d
			FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + list + ` ` + tail + `) AS v (date_from, date_to)) AS s
			LEFT JOIN (SELECT e.created_at AT TIME ZONE 'UTC' AS t, e.user_id AS u FROM events e) AS b
			ON b.t > s.date_to - interval '7 days' AND b.t <= s.date_to GROUP BY 1 ORDER BY 1`
	}
	runAttacksBothProtocols(t, db, p, []attack{
		{name: "VALUES ... LIMIT 2", sql: q("LIMIT 2")},
		{name: "VALUES ... OFFSET 7", sql: q("OFFSET 7")},
	})
}

// FINDING 3. ORDER BY an output column's name that is also a column of
// the list: PostgreSQL sorts by the output column (here the count of
// events), the rewrite replaces the name by the list's column
// (s.date_from + 86399999 ms) and sorts by day, so LIMIT keeps other days.
func TestRedteamEdgesOrderByOutputName(t *testing.T) {
	t.Parallel()
	db, _, p := edgesFixture(t)
	// Windows running past the data's end (2026-04-03): counts fall with the day.
	list := cubeList(3, 20, 31, cubeDays) + ", " + cubeList(4, 1, 8, cubeDays)
	runAttacksBothProtocols(t, db, p, []attack{{
		name: "ORDER BY an output name shadowing the list's date_to",
		sql: `SELECT s.date_from AS day, count(DISTINCT b.u) AS users_7d, count(*) AS date_to
			FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + list + `) AS v (date_from, date_to)) AS s
			LEFT JOIN (SELECT e.created_at AT TIME ZONE 'UTC' AS t, e.user_id AS u FROM events e) AS b
			ON b.t > s.date_to - interval '7 days' AND b.t <= s.date_to GROUP BY 1 ORDER BY date_to DESC, 1 LIMIT 3`,
	}})
}

// FINDING 4. List values with more than microsecond precision: PostgreSQL
// rounds '...00:00:00.0000006' to 00:00:00.000001; timeLiteral keeps
// 600 ns and timestampCast prints the series' start truncated to
// microseconds (00:00:00), so the list's column comes back a microsecond
// early in every row (the bounds' microsecond is covered by the edge
// check; the column read in the select list is not).
func TestRedteamEdgesSubMicrosecondList(t *testing.T) {
	t.Parallel()
	db, _, p := edgesFixture(t)
	list := cubeList(2, 1, 10, func(m, d int) string {
		return fmt.Sprintf("('2026-%02d-%02d 00:00:00.0000006', '2026-%02d-%02d 23:59:59.9990006')", m, d, m, d)
	})
	runAttacksBothProtocols(t, db, p, []attack{{
		name: "list values with seven fractional digits",
		sql: `SELECT s.date_from AS day, count(DISTINCT b.u) AS users_7d
			FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + list + `) AS v (date_from, date_to)) AS s
			LEFT JOIN (SELECT e.created_at AT TIME ZONE 'UTC' AS t, e.user_id AS u FROM events e) AS b
			ON b.t > s.date_to - interval '7 days' AND b.t <= s.date_to GROUP BY 1 ORDER BY 1`,
	}})
}

// HELD (regression). Attacks that the code answered right, from the
// rollup or by PostgreSQL: rows at 23:59:59.999 itself and at
// 23:59:59.9999, a session TimeZone other than UTC with an hourly rollup
// in New York's days across the March DST change, a range parameter that
// is NULL, narrower or text, an inner JOIN with a filter in the outer
// WHERE, a condition on the list alone in a LEFT JOIN's ON, unqualified
// names, count(*) and sum beside the distinct count, a one-row list.
func TestRedteamEdgesHeld(t *testing.T) {
	t.Parallel()
	db, conn, p := edgesFixture(t)
	createRollup(t, conn, "hourly", hourlyRollupArgs)
	refreshRollup(t, conn, "hourly", refresh.Options{})
	feb := cubeList(2, 1, 20, cubeDays)
	cube := func(zone, list, where string) string {
		return `SELECT s.date_from AS day, count(DISTINCT b.u) AS users_7d, count(*) AS n, sum(b.a) AS amount
			FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + list + `) AS v (date_from, date_to)) AS s
			LEFT JOIN (SELECT e.created_at AT TIME ZONE '` + zone + `' AS t, e.user_id AS u, e.amount AS a FROM events e
			           WHERE e.created_at AT TIME ZONE '` + zone + `' > $1::timestamp - interval '7 days' AND e.created_at AT TIME ZONE '` + zone + `' <= $2::timestamp` + where + `) AS b
			ON b.t > s.date_to - interval '7 days' AND b.t <= s.date_to GROUP BY 1 ORDER BY 1`
	}
	series := `SELECT d.d AS day, count(DISTINCT e.user_id) AS users_7d, count(*) AS n FROM generate_series('2026-02-01 23:59:59.999'::timestamp, '2026-02-20 23:59:59.999'::timestamp, interval '1 day') AS d
		LEFT JOIN events e ON e.created_at > d.d - interval '7 days' AND e.created_at <= d.d GROUP BY 1 ORDER BY 1`
	mar := cubeList(3, 1, 14, cubeDays)
	attacks := []attack{
		{name: "Cube's form", sql: cube("UTC", feb, ""), args: []any{"2026-02-01T00:00:00.000", "2026-02-20T23:59:59.999"}},
		{name: "NULL upper range", sql: cube("UTC", feb, ""), args: []any{"2026-02-01T00:00:00.000", nil}},
		{name: "narrower range", sql: cube("UTC", feb, ""), args: []any{"2026-02-02T00:00:00.000", "2026-02-20T23:59:59.999"}},
		{name: "wider range", sql: cube("UTC", feb, ""), args: []any{"2025-12-01", "2026-12-31"}},
		{name: "a dimension filter in the subquery", sql: cube("UTC", feb, " AND e.country = 'DE'"), args: []any{"2026-02-01", "2026-02-20T23:59:59.999"}},
		{name: "New York's days across the DST change", sql: cube("America/New_York", mar, ""), args: []any{"2026-03-01", "2026-03-14T23:59:59.999"}},
		{name: "New York's days, session zone Tokyo", set: []string{"SET TimeZone = 'Asia/Tokyo'"}, sql: cube("America/New_York", mar, ""), args: []any{"2026-03-01", "2026-03-14T23:59:59.999"}},
		{name: "Havana's days across its midnight change", sql: cube("America/Havana", mar, ""), args: []any{"2026-03-01", "2026-03-14T23:59:59.999"}},
		{name: "Santiago's days", sql: cube("America/Santiago", cubeList(4, 1, 10, cubeDays), ""), args: []any{"2026-04-01", "2026-04-10T23:59:59.999"}},
		{name: "one-row list", sql: cube("UTC", cubeDays(2, 14), ""), args: []any{"2026-02-14", "2026-02-14T23:59:59.999"}},
		{name: "inner join, outer filter, unqualified names",
			sql: `SELECT date_from AS day, count(DISTINCT u) AS users_7d FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + feb + `) AS v (date_from, date_to)) AS s
			JOIN (SELECT e.created_at AT TIME ZONE 'UTC' AS t, e.user_id AS u, e.country AS c FROM events e) AS b ON t > date_to - interval '7 days' AND t <= date_to
			WHERE c IN ('DE', 'FR') GROUP BY 1 ORDER BY 1`},
		{name: "a condition on the list alone in the LEFT JOIN's ON",
			sql: `SELECT s.date_from AS day, count(DISTINCT b.u) AS users_7d, count(*) AS n FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + feb + `) AS v (date_from, date_to)) AS s
			LEFT JOIN (SELECT e.created_at AT TIME ZONE 'UTC' AS t, e.user_id AS u FROM events e) AS b ON b.t > s.date_to - interval '7 days' AND b.t <= s.date_to AND s.date_from >= '2026-02-10'::timestamp
			GROUP BY 1 ORDER BY 1`},
		{name: "GROUP BY the list's other column",
			sql: `SELECT s.date_to AS day, count(DISTINCT b.u) AS users_7d FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + feb + `) AS v (date_from, date_to)) AS s
			LEFT JOIN (SELECT e.created_at AT TIME ZONE 'UTC' AS t, e.user_id AS u FROM events e) AS b ON b.t > s.date_to - interval '7 days' AND b.t <= s.date_to GROUP BY s.date_to ORDER BY 1`},
		{name: "series at 23:59:59.999", sql: series},
		{name: "series at 23:59:59.999, session zone New York (hourly rollup)", set: []string{"SET TimeZone = 'America/New_York'"}, sql: series},
	}
	runAttacksBothProtocols(t, db, p, attacks)

	// A row at 23:59:59.999 itself: inside the window ending there, in
	// that day's bucket, so the rollup's answer stays right.
	mustExec(t, conn, `INSERT INTO events VALUES (900000011, '2026-02-10 23:59:59.999+00', 900000011, 'DE', 'ios', 1)`)
	runAttacksBothProtocols(t, db, p, []attack{
		{name: "a row at 23:59:59.999, Cube's form", sql: cube("UTC", feb, ""), args: []any{"2026-02-01", "2026-02-20T23:59:59.999"}},
		{name: "a row at 23:59:59.999, series", sql: series},
	})
	mustExec(t, conn, `DELETE FROM events WHERE id = 900000011`)
	// A row at 23:59:59.9999: between the bound and the next bucket, which
	// the edge check finds; PostgreSQL answers.
	mustExec(t, conn, `INSERT INTO events VALUES (900000012, '2026-02-10 23:59:59.9999+00', 900000012, 'DE', 'ios', 1)`)
	runAttacksBothProtocols(t, db, p, []attack{
		{name: "a row at 23:59:59.9999, Cube's form", sql: cube("UTC", feb, ""), args: []any{"2026-02-01", "2026-02-20T23:59:59.999"}},
		{name: "a row at 23:59:59.9999, series", sql: series},
	})
}
