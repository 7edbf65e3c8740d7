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
	"runtime/pprof"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

func main() {
	var o options
	benchkit.EventFlags(&o.rows, &o.days, &o.users, 20_000_000, "events to generate")
	benchkit.DSNFlag(&o.dsn, "the table events_bench is created in it")
	benchkit.KeepFlag(&o.keep, ", and reuse its table on the next run")
	flag.IntVar(&o.rounds, "rounds", 3, "builds of each kind, alternating")
	flag.IntVar(&o.streams, "streams", refresh.DefaultStreams, "parallel readers of pgsketch's build (as rollup create --streams)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&o.withSum, "sum", true, "both builds also keep sum(amount) (a numeric(10,2) column)")
	flag.Parse()
	benchkit.Run("bench-rollup", o, run)
}

// startProfile starts a CPU profile of the run into file path, if one is
// asked for, and returns the function that ends it.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	return pprof.StopCPUProfile, err
}

func run(ctx context.Context, o options) error {
	stopProfile, err := startProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	db, err := benchkit.Open(ctx, o.dsn, o.keep, benchkit.Settings())
	if err != nil {
		return err
	}
	defer db.Close()
	// The current catalog: a kept cluster may hold an older one (and other
	// benchmarks' rollups, which a migration down would refuse to drop).
	if err := benchkit.Prepare(ctx, db.DSN); err != nil {
		return err
	}
	if err := setup(ctx, db.Conn, o); err != nil {
		return err
	}
	b := builder{ctx: ctx, conn: db.Conn, dsn: db.DSN, o: o}
	// One warm-up of each reads the table into the page cache.
	fmt.Println("warm-up")
	for k := range builders {
		if _, _, err := b.build(k); err != nil {
			return err
		}
	}
	var times [2][]time.Duration
	for i := range o.rounds {
		for _, k := range benchkit.Rotation(i, 2) {
			d, n, err := b.build(k)
			if err != nil {
				return fmt.Errorf("%s: %w", builders[k], err)
			}
			fmt.Printf("round %d  %-10s  %8.2f s  %d rollup rows\n", i+1, builders[k], d.Seconds(), n)
			times[k] = append(times[k], d)
		}
	}
	mo, mt := benchkit.Median(times[0]), benchkit.Median(times[1])
	fmt.Printf("\nmedian over %d rounds: pgsketch %.2f s, postgresql (hll_add_agg) %.2f s: pgsketch is %.2fx as fast (%.0f rows/s)\n",
		o.rounds, mo.Seconds(), mt.Seconds(), mt.Seconds()/mo.Seconds(), float64(o.rows)/mo.Seconds())
	return nil
}

// setup makes the events table (unless it holds the rows asked for) and
// pgsketch's rollup of it, not built.
func setup(ctx context.Context, conn *pgx.Conn, o options) error {
	spec := benchkit.Events("events_bench", o.rows, o.days, o.users)
	if !benchkit.HasRows(ctx, conn, "events_bench", o.rows) {
		if _, err := benchkit.Generate(spec, func() error {
			return benchkit.Exec(ctx, conn, "DROP TABLE IF EXISTS events_bench; "+spec.CreateSQL())
		}); err != nil {
			return err
		}
	}
	sums := "'{}'"
	if o.withSum {
		sums = "'{amount}'"
	}
	if _, err := conn.Exec(ctx, `SELECT pgsketch.drop_rollup('bench_daily', if_exists => true);
		SELECT pgsketch.create_rollup('bench_daily', 'events_bench', 'created_at', grain => 'day',
		       dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5,
		       sum_columns => `+sums+`)`); err != nil {
		return err
	}
	var size string
	_ = conn.QueryRow(ctx, "SELECT pg_size_pretty(pg_total_relation_size('events_bench'))").Scan(&size)
	fmt.Printf("events_bench: %d rows, %s\n\n", o.rows, size)
	return nil
}

// builders name the two builds, in the order build knows them.
var builders = [2]string{"pgsketch", "postgresql"}

// builder builds the rollup either way.
type builder struct {
	ctx  context.Context
	conn *pgx.Conn
	dsn  string
	o    options
}

// build times build k and returns the rollup rows it wrote.
func (b builder) build(k int) (time.Duration, int64, error) {
	if k == 0 {
		t0 := time.Now()
		res, err := refresh.Refresh(b.ctx, pgsession.Conn{C: b.conn.PgConn()}, "bench_daily",
			refresh.Options{Full: true, Streams: b.o.streams, Dial: pgsession.Dial(b.dsn)})
		return time.Since(t0), res.Written, err
	}
	pgSum := ""
	if b.o.withSum {
		pgSum = ", sum(amount) AS sum_amount"
	}
	if _, err := b.conn.Exec(b.ctx, "DROP TABLE IF EXISTS bench_daily_pg"); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	tag, err := b.conn.Exec(b.ctx, `CREATE TABLE bench_daily_pg AS
		SELECT date_trunc('day', created_at, 'UTC') AS bucket, country, device, count(*) AS row_count`+pgSum+`,
		       hll_add_agg(hll_hash_bigint(user_id), 14, 5) AS users
		  FROM events_bench GROUP BY 1, 2, 3`)
	return time.Since(t0), tag.RowsAffected(), err
}

// options are the command line's flags.
type options struct {
	rows, users     int64
	days            int
	rounds, streams int
	dsn, keep       string
	cpuProfile      string
	withSum         bool
}
