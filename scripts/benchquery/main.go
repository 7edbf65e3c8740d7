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
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/aggregates/refresh"
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

type options struct {
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
}

func main() {
	o := parseFlags()
	benchkit.Run("bench-query", func(ctx context.Context) error { return run(ctx, o) })
}

func parseFlags() options {
	var o options
	flag.Int64Var(&o.rows, "rows", 20_000_000, "events to generate")
	flag.IntVar(&o.days, "days", 90, "days the events span, from 2026-01-01")
	flag.Int64Var(&o.users, "users", 2_000_000, "possible distinct users")
	flag.IntVar(&o.runs, "runs", 50, "timed runs of each of proxy-cold, proxy-warm and hll-direct")
	flag.IntVar(&o.exactRuns, "exact-runs", 20, "timed runs of the exact query (several seconds each), spread over the rounds")
	flag.StringVar(&o.dsn, "dsn", "", "use this database (with the hll extension) instead of a throwaway cluster; "+
		"the tables events and events_daily and the pgsketch catalog are created in it")
	flag.StringVar(&o.keep, "keep", "", "keep the throwaway cluster in this directory, and reuse its table and rollup on the next run")
	flag.StringVar(&o.proxy, "proxy", "bin/pgsketch-proxy", "the pgsketch-proxy binary")
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
	flag.BoolVar(&o.matrix, "matrix", false, "instead, time five ranges by three groupings against the rollup rollup create makes "+
		"without tuning flags (matrix.go): cold, warm and new-connection through the proxy, exact, hll_union_agg daily and by a "+
		"monthly table built by hand, over a simple-protocol client and pgx; --runs rounds, --exact-runs exact runs per shape")
	flag.Parse()
	o.exactRuns = max(1, min(o.exactRuns, o.runs))
	return o
}

func run(ctx context.Context, o options) error {
	if _, err := os.Stat(o.proxy); err != nil {
		return fmt.Errorf("the proxy binary: %w (build it with go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy)", err)
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
	}
	return runDashboard(ctx, o, dsn)
}

// setup makes the catalog, the events table (unless it already has the
// rows asked for), its index and the rollup (unless it is already built
// over that table).
func setup(ctx context.Context, dsn string, o options) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := benchkit.Prepare(ctx, dsn); err != nil {
		return err
	}
	spec := benchkit.Events("events", o.rows, o.days, o.users)
	fresh := !benchkit.HasRows(ctx, conn, "events", o.rows)
	if fresh {
		if _, err := benchkit.Generate(spec, func() error {
			return benchkit.Exec(ctx, conn, "SELECT pgsketch.drop_rollup('"+rollupName+"', if_exists => true); "+
				"SELECT pgsketch.drop_rollup('"+hourlyName+"', if_exists => true); DROP TABLE IF EXISTS events; "+spec.CreateSQL())
		}); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "CREATE INDEX IF NOT EXISTS events_created_at ON events (created_at)"); err != nil {
		return err
	}
	if o.matrix {
		return nil // runMatrix makes its rollup
	}
	if fresh || !benchkit.Built(ctx, conn, rollupName) {
		if err := buildDaily(ctx, conn, dsn); err != nil {
			return err
		}
	}
	if o.mergeBench {
		if err := setupHourly(ctx, conn, dsn, o.proxy, fresh); err != nil {
			return err
		}
	}
	if err := setupLevels(ctx, conn, dsn, o.levels); err != nil {
		return err
	}
	var size, rsize string
	var rrows int64
	_ = conn.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('events')),
		pg_size_pretty(pg_total_relation_size('`+rollupName+`')), (SELECT count(*) FROM `+rollupName+`)`).Scan(&size, &rsize, &rrows)
	var version string
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
	fmt.Printf("PostgreSQL %s; events: %d rows, %s; %s: %d rows, %s\n\n", version, o.rows, size, rollupName, rrows, rsize)
	return nil
}

// buildDaily (re)creates the daily rollup and builds it with a full
// refresh.
func buildDaily(ctx context.Context, conn *pgx.Conn, dsn string) error {
	fmt.Println("building the rollup...")
	t0 := time.Now()
	if _, err := conn.Exec(ctx, `SELECT pgsketch.drop_rollup('`+rollupName+`', if_exists => true);
		SELECT pgsketch.create_rollup('`+rollupName+`', 'events', 'created_at', grain => 'day',
		       dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5)`); err != nil {
		return err
	}
	res, err := refresh.Refresh(ctx, refresh.PgConn{C: conn.PgConn()}, rollupName,
		refresh.Options{Full: true, Streams: 2, Dial: refresh.DialPgConn(dsn)})
	if err != nil {
		return err
	}
	fmt.Printf("built in %s: %s\n", time.Since(t0).Round(time.Second), res)
	_, err = conn.Exec(ctx, "VACUUM ANALYZE "+rollupName)
	return err
}

// setupLevels gives the daily rollup exactly the levels listed (comma-
// separated), building new ones with an incremental refresh.
func setupLevels(ctx context.Context, conn *pgx.Conn, dsn, levels string) error {
	c, err := benchkit.SetLevels(ctx, conn, dsn, rollupName, levels)
	for _, g := range c.Dropped {
		fmt.Printf("dropped the %s level of %s\n", g, rollupName)
	}
	if err != nil || len(c.Added) == 0 {
		return err
	}
	fmt.Printf("levels built in %s: %s\n", c.Took.Round(time.Millisecond), c.Refresh)
	for _, g := range c.Added {
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+rollupName+"_"+g); err != nil {
			return err
		}
	}
	return nil
}

// compare checks an answer against the exact one as benchproxy.Compare
// does, its error naming kind.
func compare(kind string, ans, exact map[string]float64) error {
	if err := benchproxy.Compare(ans, exact); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}
