// Command benchrollup measures building a daily sketch rollup with
// pgsketch-proxy's refresher against building the same rollup inside
// PostgreSQL with the hll extension, in the same run on the same data.
//
// It starts a throwaway PostgreSQL 15 cluster (internal/localpg; or uses
// --dsn), generates the events table (internal/demodata; 20 M rows over 90
// days by default), then alternates the two builds --rounds times:
//
//	pgsketch:   pgsketch-proxy's full refresh of a rollup with dimensions
//	            country, device, the row count and an HLL of user_id
//	            (log2m 14, regwidth 5): COPY out, sketch in Go, COPY in.
//	postgresql: CREATE TABLE AS SELECT date_trunc('day', created_at, 'UTC'),
//	            country, device, count(*), hll_add_agg(hll_hash_bigint(user_id), 14, 5)
//	            FROM events GROUP BY 1, 2, 3
//
// and prints each run, the medians and their ratio. scripts/bench-rollup.sh
// runs it; docs/benchmarks.md records its output.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/aggregates/refresh"
	"github.com/pgsketch/pgsketch/internal/demodata"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

var streams int

func main() {
	rows := flag.Int64("rows", 20_000_000, "events to generate")
	days := flag.Int("days", 90, "days the events span")
	users := flag.Int64("users", 2_000_000, "possible distinct users")
	rounds := flag.Int("rounds", 3, "builds of each kind, alternating")
	flag.IntVar(&streams, "streams", refresh.DefaultStreams, "parallel readers of pgsketch's build (as rollup create --streams)")
	dsn := flag.String("dsn", "", "use this database (with the hll extension) instead of a throwaway cluster; the table events_bench is created in it")
	keep := flag.String("keep", "", "keep the throwaway cluster in this directory, and reuse its table on the next run")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	withSum := flag.Bool("sum", true, "both builds also keep sum(amount) (a numeric(10,2) column)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-rollup:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *rows, *days, *users, *rounds, *dsn, *keep, *withSum); err != nil {
		fmt.Fprintln(os.Stderr, "bench-rollup:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(ctx context.Context, rows int64, days int, users int64, rounds int, dsn, keep string, withSum bool) error {
	if dsn == "" {
		var stop func()
		var err error
		if dsn, stop, err = benchkit.Cluster(ctx, keep, benchkit.Settings()); err != nil {
			return err
		}
		defer stop()
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// The current catalog: a kept cluster may hold an older one (and other
	// benchmarks' rollups, which a migration down would refuse to drop).
	if err := benchkit.Prepare(ctx, dsn); err != nil {
		return err
	}

	spec := demodata.Default
	spec.Table, spec.Rows, spec.Days, spec.Users = "events_bench", rows, days, users
	var have int64
	_ = conn.QueryRow(ctx, "SELECT count(*) FROM events_bench").Scan(&have)
	if have != rows {
		fmt.Printf("generating %d events over %d days...\n", rows, days)
		t0 := time.Now()
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS events_bench; "+spec.CreateSQL()); err != nil {
			return err
		}
		fmt.Printf("generated in %s\n", time.Since(t0).Round(time.Second))
	}
	sums, pgSum := "'{}'", ""
	if withSum {
		sums, pgSum = "'{amount}'", ", sum(amount) AS sum_amount"
	}
	if _, err := conn.Exec(ctx, `SELECT pgsketch.drop_rollup('bench_daily', if_exists => true);
		SELECT pgsketch.create_rollup('bench_daily', 'events_bench', 'created_at', grain => 'day',
		       dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5,
		       sum_columns => `+sums+`)`); err != nil {
		return err
	}
	var size string
	_ = conn.QueryRow(ctx, "SELECT pg_size_pretty(pg_total_relation_size('events_bench'))").Scan(&size)
	fmt.Printf("events_bench: %d rows, %s\n\n", rows, size)

	pgsketch := func() (time.Duration, int64, error) {
		t0 := time.Now()
		res, err := refresh.Refresh(ctx, refresh.PgConn{C: conn.PgConn()}, "bench_daily",
			refresh.Options{Full: true, Streams: streams, Dial: refresh.DialPgConn(dsn)})
		return time.Since(t0), res.Written, err
	}
	postgres := func() (time.Duration, int64, error) {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS bench_daily_pg"); err != nil {
			return 0, 0, err
		}
		t0 := time.Now()
		tag, err := conn.Exec(ctx, `CREATE TABLE bench_daily_pg AS
			SELECT date_trunc('day', created_at, 'UTC') AS bucket, country, device, count(*) AS row_count`+pgSum+`,
			       hll_add_agg(hll_hash_bigint(user_id), 14, 5) AS users
			  FROM events_bench GROUP BY 1, 2, 3`)
		return time.Since(t0), tag.RowsAffected(), err
	}
	// One warm-up of each reads the table into the page cache.
	fmt.Println("warm-up")
	for _, b := range []func() (time.Duration, int64, error){pgsketch, postgres} {
		if _, _, err := b(); err != nil {
			return err
		}
	}
	var ours, theirs []time.Duration
	for i := range rounds {
		order := []string{"pgsketch", "postgresql"}
		if i%2 == 1 {
			order = []string{"postgresql", "pgsketch"}
		}
		for _, which := range order {
			f := pgsketch
			if which == "postgresql" {
				f = postgres
			}
			d, n, err := f()
			if err != nil {
				return fmt.Errorf("%s: %w", which, err)
			}
			fmt.Printf("round %d  %-10s  %8.2f s  %d rollup rows\n", i+1, which, d.Seconds(), n)
			if which == "pgsketch" {
				ours = append(ours, d)
			} else {
				theirs = append(theirs, d)
			}
		}
	}
	mo, mt := benchkit.Median(ours), benchkit.Median(theirs)
	fmt.Printf("\nmedian over %d rounds: pgsketch %.2f s, postgresql (hll_add_agg) %.2f s: pgsketch is %.2fx as fast (%.0f rows/s)\n",
		rounds, mo.Seconds(), mt.Seconds(), mt.Seconds()/mo.Seconds(), float64(rows)/mo.Seconds())
	return nil
}
