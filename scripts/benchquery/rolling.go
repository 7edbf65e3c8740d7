package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The rolling-window benchmark (--rolling): 7-day active users per day
// over the table's 90 days, a series of days joined to the events on a
// window of created_at per day, exact in PostgreSQL, by hand over the
// rollup (hll_union_agg of the daily sketches joined to the same series)
// and through the proxy without and with its cache.

var (
	rollingSeries = `generate_series('2026-01-01'::timestamp, '2026-03-31'::timestamp, interval '1 day') AS d`
	rollingSQL    = `SELECT d.d::date AS day, count(DISTINCT e.user_id) AS users FROM ` + rollingSeries + `
 LEFT JOIN events e ON e.created_at >= d.d - interval '6 days' AND e.created_at < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`
	// rollingHLLSQL's %s is the rollup table.
	rollingHLLSQL = `SELECT d.d::date AS day, COALESCE(hll_cardinality(hll_union_agg(r.distinct_user_id::hll)), 0)::bigint AS users
 FROM ` + rollingSeries + ` LEFT JOIN %s r ON r.bucket >= d.d - interval '6 days' AND r.bucket < d.d + interval '1 day' GROUP BY 1 ORDER BY 1`
)

// runRolling times the rolling windows; the caller made the events table
// and the rollup.
func runRolling(ctx context.Context, o options, dsn string) error {
	direct, err := connectUTC(ctx, dsn)
	if err != nil {
		return err
	}
	defer direct.Close(context.Background())
	table, err := rollupTable(ctx, direct)
	if err != nil {
		return err
	}
	if !o.cube {
		return timeJoined(ctx, o, dsn, direct, rollingSQL, rollingSQL, fmt.Sprintf(rollingHLLSQL, table), unitedNotice)
	}
	// The days as timestamps, as Cube returns them, in every kind.
	asTimestamps := func(sql string) string { return strings.Replace(sql, "d.d::date AS day", "d.d AS day", 1) }
	return timeJoined(ctx, o, dsn, direct, asTimestamps(rollingSQL), cubeRollingSQL, asTimestamps(fmt.Sprintf(rollingHLLSQL, table)), unitedNotice)
}

// cubeRollingSQL is rollingSQL as Cube writes it (its parameters written
// in): a VALUES list of the days, each ending a millisecond before
// midnight, joined to a subquery of the events that computes their UTC
// time and keeps the range the windows reach. PostgreSQL answers it far
// more slowly than rollingSQL (it compares every day with every row), so
// --cube times rollingSQL as the exact kind.
var cubeRollingSQL = func() string {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows []string
	for i := range 90 {
		d := start.AddDate(0, 0, i).Format("2006-01-02")
		rows = append(rows, fmt.Sprintf("('%sT00:00:00.000', '%sT23:59:59.999')", d, d))
	}
	return `SELECT q_0.day, users FROM (SELECT s.date_from AS day, count(distinct "users") AS users
 FROM (SELECT date_from::timestamp AS date_from, date_to::timestamp AS date_to FROM (VALUES ` + strings.Join(rows, ",") + `) AS dates (date_from, date_to)) AS s
 LEFT JOIN (SELECT (e.created_at::timestamptz AT TIME ZONE 'UTC') AS "day", e.user_id AS "users" FROM events AS e
  WHERE (e.created_at::timestamptz AT TIME ZONE 'UTC') > '2026-01-01T00:00:00.000'::timestamp - interval '7 days'
    AND (e.created_at::timestamptz AT TIME ZONE 'UTC') <= '2026-03-31T23:59:59.999'::timestamp) AS b
 ON b."day" > s.date_to - interval '7 days' AND b."day" <= s.date_to GROUP BY 1) AS q_0 ORDER BY 1`
}()

// connectUTC connects to dsn in a session whose TimeZone is UTC.
func connectUTC(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	direct, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := direct.Exec(ctx, "SET TimeZone = 'UTC'").Close(); err != nil {
		direct.Close(context.Background())
		return nil, err
	}
	return direct, nil
}
