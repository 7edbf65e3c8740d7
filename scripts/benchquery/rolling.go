package main

import (
	"context"
	"fmt"

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
	return timeJoined(ctx, o, dsn, direct, rollingSQL, fmt.Sprintf(rollingHLLSQL, table), unitedNotice)
}

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
