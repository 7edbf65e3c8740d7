package main

import (
	"context"
	"fmt"
)

// The local-zone benchmark (--local-zone): charts cut in New York's days,
// weeks and months over the hourly UTC rollup, exact in PostgreSQL, by hand
// over the rollup (hll_union_agg of its hours grouped by the New York day)
// and through the proxy without and with its cache.

// localZoneCharts are the charts: exact SQL, and the same by hand over the
// hourly rollup's table (%s).
var localZoneCharts = []struct{ name, exact, hll string }{
	{"30 New York days by nothing",
		`SELECT date_trunc('day', created_at AT TIME ZONE 'America/New_York') AS day, count(DISTINCT user_id) AS users FROM events
 WHERE created_at >= '2026-03-01 05:00+00' AND created_at < '2026-03-31 04:00+00' GROUP BY 1 ORDER BY 1`,
		`SELECT date_trunc('day', bucket AT TIME ZONE 'America/New_York') AS day, hll_cardinality(hll_union_agg(distinct_user_id::hll))::bigint AS users FROM %s
 WHERE bucket >= '2026-03-01 05:00+00' AND bucket < '2026-03-31 04:00+00' GROUP BY 1 ORDER BY 1`},
	{"3 New York months by country",
		`SELECT date_trunc('month', created_at AT TIME ZONE 'America/New_York') AS month, country, count(DISTINCT user_id) AS users FROM events
 WHERE created_at >= '2026-01-01 05:00+00' AND created_at < '2026-03-31 04:00+00' GROUP BY 1, 2 ORDER BY 1, 2`,
		`SELECT date_trunc('month', bucket AT TIME ZONE 'America/New_York') AS month, country, hll_cardinality(hll_union_agg(distinct_user_id::hll))::bigint AS users FROM %s
 WHERE bucket >= '2026-01-01 05:00+00' AND bucket < '2026-03-31 04:00+00' GROUP BY 1, 2 ORDER BY 1, 2`},
	{"New York weeks over the 90 days",
		`SELECT date_trunc('week', created_at AT TIME ZONE 'America/New_York') AS week, count(DISTINCT user_id) AS users FROM events GROUP BY 1 ORDER BY 1`,
		`SELECT date_trunc('week', bucket AT TIME ZONE 'America/New_York') AS week, hll_cardinality(hll_union_agg(distinct_user_id::hll))::bigint AS users FROM %s GROUP BY 1 ORDER BY 1`},
}

// runLocalZone times the charts one after the other; the caller made the
// events table and the hourly rollup.
func runLocalZone(ctx context.Context, o options, dsn string) error {
	direct, err := connectUTC(ctx, dsn)
	if err != nil {
		return err
	}
	defer direct.Close(context.Background())
	for _, c := range localZoneCharts {
		fmt.Printf("\n== %s ==\n", c.name)
		if err := timeJoined(ctx, o, dsn, direct, c.exact, c.exact, fmt.Sprintf(c.hll, hourlyName), "from rollup "+hourlyName+" "); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}
