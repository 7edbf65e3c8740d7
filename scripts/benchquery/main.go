// Command benchquery measures a dashboard's distinct-count query answered
// by pgsketch-proxy from a daily rollup, against PostgreSQL answering it
// exactly and PostgreSQL merging the same rollup's sketches with the hll
// extension.
//
// It starts a throwaway PostgreSQL 15 cluster (internal/localpg; or uses
// --dsn), generates the events table (internal/demodata; 20 M rows over 90
// days by default) with an index on created_at, builds the daily rollup
// events_daily by country and device with an HLL of user_id (log2m 14,
// regwidth 5) with the refresher, and then times "one month, distinct
// users by country" four ways, interleaved round by round:
//
//	proxy-cold: a pgsketch-proxy serve --approx on started for this run
//	            alone, a new client connection, its first query (the time
//	            of the query only, not of the start or the connection);
//	proxy-warm: the same query repeated on one connection through one
//	            long-running proxy;
//	hll-direct: SELECT country, hll_cardinality(hll_union_agg(distinct_user_id::hll))
//	            FROM events_daily WHERE bucket in the month GROUP BY country,
//	            on one direct connection;
//	exact:      the COUNT(DISTINCT) query on one direct connection (fewer
//	            runs: --exact-runs, spread evenly over the rounds).
//
// Every query goes in the simple protocol (one Query message) and is timed
// from sending it to reading its ReadyForQuery. It prints p50 and p99 of
// each kind and the ratios the targets are about. scripts/bench-query.sh
// runs it; docs/benchmarks.md records its output.
//
// --merge-bench runs the benchmark of the proxy's merge strategies instead
// (merge.go), on the same table with an hourly rollup beside the
// daily one.
package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"
)

const (
	rollupName = "events_daily"
	from, to   = "2026-02-01", "2026-03-01"
)

var (
	exactSQL = `SELECT country, count(DISTINCT user_id) AS users FROM events
 WHERE created_at >= '` + from + `' AND created_at < '` + to + `' GROUP BY country`
	hllSQL = `SELECT country, hll_cardinality(hll_union_agg(distinct_user_id::hll))::bigint AS users FROM ` + rollupName + `
 WHERE bucket >= '` + from + `' AND bucket < '` + to + `' GROUP BY country`
)

func main() { benchkit.Run("bench-query", parseFlags(), run) }

func parseFlags() options {
	var o options
	benchkit.EventFlags(&o.rows, &o.days, &o.users, 20_000_000, "events to generate")
	benchkit.DSNFlag(&o.dsn, "the tables events and events_daily and the pgsketch catalog are created in it")
	benchkit.KeepFlag(&o.keep, ", and reuse its table and rollup on the next run")
	benchkit.ProxyFlag(&o.proxy)
	flag.IntVar(&o.runs, "runs", 50, "timed runs of each of proxy-cold, proxy-warm and hll-direct")
	flag.IntVar(&o.exactRuns, "exact-runs", 20, "timed runs of the exact query (several seconds each), spread over the rounds")
	flag.StringVar(&o.profileDir, "profile", "", "after the timed runs, write a 20-second CPU profile of the proxy answering warm queries "+
		"(proxy-cpu.pprof) and the time of each statement it runs upstream (upstream.txt) to this directory")
	flag.Int64Var(&o.cacheBytes, "cache-bytes", 256<<20, "the proxy's --cache-bytes (decoded rollup rows kept between queries; 0: none)")
	flag.BoolVar(&o.mergeBench, "merge-bench", false, "instead, time the proxy's merge strategies: pgsketch.merge proxy, server and auto "+
		"through one proxy without a cache, against hll_union_agg in PostgreSQL, for four queries (merge.go); --runs rounds, --exact-runs ignored")
	flag.BoolVar(&o.mergeMore, "merge-more", false, "with --merge-bench, four more queries near the boundary of auto's rule "+
		"(by day and device, by week and country, by hour and by day from the hourly rollup)")
	flag.StringVar(&o.levels, "levels", "", "give "+rollupName+" these levels (comma-separated, e.g. month) before the runs, and time "+
		"hll_union_agg on the month level too (hll-level); without it, levels "+rollupName+" has are dropped")
	flag.BoolVar(&o.join, "join", false, "instead, time distinct users by region for one month, the events joined to a 15-row dimension "+
		"table, exact, by hand over the rollup (hll_union_agg) and through the proxy without and with its cache")
	flag.BoolVar(&o.rolling, "rolling", false, "instead, time 7-day active users per day over the table's 90 days (a series of days "+
		"joined to the events on a window per day), exact, by hand over the rollup (hll_union_agg) and through the proxy without and with its cache")
	flag.BoolVar(&o.cube, "cube", false, "with --rolling, ask the proxy (cold and warm) the windows as Cube writes them: a VALUES list of the days "+
		"joined to a subquery of the events; the exact and by-hand kinds stay the series form, which PostgreSQL answers faster than Cube's")
	flag.BoolVar(&o.localZone, "local-zone", false, "instead, time charts cut in New York's days, weeks and months over the hourly UTC rollup "+
		"(built if missing): exact, by hand over the rollup (hll_union_agg) and through the proxy without and with its cache")
	flag.BoolVar(&o.firstSeen, "first-seen", false, "instead, time new users (users by first-seen month and day, the new users of one month) "+
		"answered from the daily rollup's first-seen bookkeeping of user_id against PostgreSQL, print the same by HLL and Theta differences "+
		"with their errors, and what the bookkeeping costs (firstseen.go)")
	flag.BoolVar(&o.matrix, "matrix", false, "instead, time five ranges by three groupings against the rollup rollup create makes "+
		"without tuning flags (matrix.go): cold, warm and new-connection through the proxy, exact, hll_union_agg daily and by a "+
		"monthly table built by hand, over a simple-protocol client and pgx; --runs rounds, --exact-runs exact runs per shape")
	flag.StringVar(&o.distribute, "distribute", "", "with --dsn naming a Citus coordinator: have Citus distribute the generated events table "+
		"by this column (e.g. user_id) before its rows go in")
	flag.Parse()
	o.exactRuns = max(1, min(o.exactRuns, o.runs))
	return o
}

func run(ctx context.Context, o options) error {
	if err := benchkit.NeedProxy(o.proxy); err != nil {
		return err
	}
	dsn, stop, err := benchkit.Database(ctx, o.dsn, o.keep, benchkit.Settings())
	if err != nil {
		return err
	}
	defer stop()
	if err := setup(ctx, dsn, o); err != nil {
		return err
	}
	switch {
	case o.mergeBench:
		return runMerge(ctx, o, dsn)
	case o.matrix:
		return runMatrix(ctx, o, dsn)
	case o.join:
		return runJoin(ctx, o, dsn)
	case o.rolling:
		return runRolling(ctx, o, dsn)
	case o.localZone:
		return runLocalZone(ctx, o, dsn)
	case o.firstSeen:
		return runFirstSeen(ctx, o, dsn)
	}
	return runDashboard(ctx, o, dsn)
}

// compare checks an answer against the exact one as benchproxy.Compare
// does, its error naming kind.
func compare(kind string, ans, exact map[string]float64) error {
	if err := benchproxy.Compare(ans, exact); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}

// options are the command line's flags.
type options struct {
	distribute string
	rows       int64
	days       int
	users      int64
	runs       int
	exactRuns  int
	dsn, keep  string
	proxy      string
	profileDir string
	cacheBytes int64
	mergeBench bool
	mergeMore  bool
	levels     string
	matrix     bool
	join       bool
	rolling    bool
	cube       bool
	localZone  bool
	firstSeen  bool
}
