package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/scripts/benchproxy"
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
	direct, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer direct.Close(context.Background())
	if err := direct.Exec(ctx, "SET TimeZone = 'UTC'").Close(); err != nil {
		return err
	}
	res := direct.ExecParams(ctx, "SELECT format('%I.%I', rollup_schema, rollup_table) FROM pgsketch.rollup_defs WHERE name = $1",
		[][]byte{[]byte(rollupName)}, nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 {
		return fmt.Errorf("the rollup %s: %v", rollupName, res.Err)
	}
	hllSQL := fmt.Sprintf(rollingHLLSQL, string(res.Rows[0][0]))
	cold, err := benchproxy.Open(ctx, o.proxy, dsn, 0, false) // no cache: every answer reads and merges its rollup rows
	if err != nil {
		return err
	}
	defer cold.Close()
	warm, err := benchproxy.Open(ctx, o.proxy, dsn, o.cacheBytes, false)
	if err != nil {
		return err
	}
	defer warm.Close()
	fmt.Println("warm-up: the exact answer, then each kind once, checked against it")
	exact, d, err := benchproxy.Timed(ctx, direct, rollingSQL)
	if err != nil {
		return fmt.Errorf("exact: %w", err)
	}
	fmt.Printf("exact: %d days in %s\n", len(exact), d.Round(time.Millisecond))
	dc := &benchproxy.Conn{PgConn: direct}
	kinds := []timedKind{joinKind(ctx, "proxy-cold", cold.Conn, rollingSQL, exact), joinKind(ctx, "proxy-warm", warm.Conn, rollingSQL, exact),
		joinKind(ctx, "hll-by-hand", dc, hllSQL, exact), joinKind(ctx, "exact", dc, rollingSQL, exact)}
	for _, k := range kinds[:3] {
		if _, err := k.run(); err != nil {
			return err
		}
	}
	times, err := interleave(ctx, o, kinds, []int{0, 1, 2}, 3)
	if err != nil {
		return err
	}
	printJoin(kinds, times)
	return nil
}
