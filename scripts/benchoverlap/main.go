// Command benchoverlap measures what Theta sketches cost a rollup and what
// they buy: overlap questions (INTERSECT, EXCEPT, NOT IN) answered by
// pgsketch-proxy from a rollup's Theta sketches, against PostgreSQL
// answering them exactly.
//
// It starts a throwaway PostgreSQL 15 cluster (internal/localpg; --keep DIR
// keeps it and reuses its events table next time), generates the events
// table (internal/demodata; 20 M rows over 90 days from 2026-01-01, up to
// 2 M users) with an index on created_at, and brings the pgsketch catalog
// up to date. Then:
//
//  1. Build cost and storage. A daily rollup by country and device with
//     an HLL of user_id only (distinct_columns, log2m 14, regwidth 5), and
//     one with the same plus a Theta sketch of user_id (theta_columns,
//     lg_k --lgk), each created and fully built by the refresher, timed
//     (--build-rounds rounds, alternating which goes first), and sized
//     with pg_total_relation_size. The difference is what the Theta
//     column costs. The HLL-only rollup is dropped afterwards.
//  2. Queries. "Active in January but not in February" as an EXCEPT and
//     as a NOT IN filter, and week-over-week retention for 12 weeks: for
//     i in 0..11, the users active in week i (7 days from Monday
//     2026-01-05 + 7i) who were also active in week i+1, as an INTERSECT,
//     the 12 queries timed together. Each is timed three ways,
//     interleaved round by round (the order rotates):
//     proxy-cold: a pgsketch-proxy serve --approx on started for this run
//     alone, a new connection through it, its first query (for the
//     retention weeks: its first 12 queries; the start and the connection
//     are not timed);
//     proxy-warm: repeated on one connection through one long-running
//     proxy;
//     exact: the same SQL on a direct connection (fewer runs:
//     --exact-runs, spread evenly over the --runs rounds).
//     Before the rounds, one untimed run of every exact query (its answer
//     checks the others, and it warms PostgreSQL's buffers) and of every
//     proxy query on the warm connection. After them, EXPLAIN (ANALYZE,
//     BUFFERS) of the exact queries shows their plans and how many blocks
//     came from shared buffers; /proc/vmstat's pgpgin over the rounds
//     shows how much came from disk rather than the OS page cache.
//
// The cluster runs with work_mem 256MB (--work-mem): at PostgreSQL's
// default 4MB the 20 M-row NOT IN is planned as an unhashed subplan, which
// rescans February's rows for every January row (the report shows the plan
// it would get).
//
// Every query goes in the simple protocol and is timed from sending it to
// its ReadyForQuery. Each proxy answer's NOTICE tells whether it came from
// the sketches (with an estimate and a 95 % interval; the report counts
// the runs whose interval held the exact answer) or was counted exactly
// because the interval was too wide (pgsketch.max_overlap_error, default
// 10 %).
//
// It prints each round, then a Markdown section for docs/benchmarks.md:
// the command line, the machine, the build cost and storage, medians and
// min–max spreads, the ratios exact / proxy (the goal is at least 50×),
// and per retention week the estimate, its interval and the exact answer.
//
// Run it with scripts/bench-overlap.sh (or make bench-overlap), which builds
// bin/pgsketch-proxy first:
//
//	scripts/bench-overlap.sh [--rows N] [--days N] [--users N] [--keep DIR]
//	                         [--runs N] [--exact-runs N] [--build-rounds N]
//	                         [--lgk N] [--streams N] [--cache-bytes N]
//	                         [--work-mem SIZE] [--skip-build]
//
// A quick check of the setup: scripts/bench-overlap.sh --rows 200000.
package main

import (
	"context"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

func main() { benchkit.Run("bench-overlap", parseFlags(), run) }

func parseFlags() options {
	var o options
	benchkit.EventFlags(&o.rows, &o.days, &o.users, 20_000_000, "events to generate")
	benchkit.ProxyFlag(&o.proxy)
	benchkit.KeepFlag(&o.keep, ", and reuse its events table on the next run")
	flag.IntVar(&o.runs, "runs", 20, "timed runs of each proxy kind (proxy-cold, proxy-warm), one per round")
	flag.IntVar(&o.exactRuns, "exact-runs", 5, "timed runs of each exact query (seconds each), spread over the rounds")
	flag.IntVar(&o.buildRounds, "build-rounds", 3, "builds of each rollup, alternating which goes first")
	flag.IntVar(&o.lgK, "lgk", 12, "theta_lgk of the Theta rollup")
	flag.IntVar(&o.streams, "streams", 4, "readers of each full build (the refresher's Streams; the CLI's default is 4)")
	flag.Int64Var(&o.cacheBytes, "cache-bytes", -1, "the proxies' --cache-bytes (-1: the proxy's default)")
	flag.StringVar(&o.workMem, "work-mem", "256MB", "the cluster's work_mem (at 4MB PostgreSQL runs the 20 M-row NOT IN as an unhashed subplan)")
	flag.BoolVar(&o.skipBuild, "skip-build", false, "reuse the Theta rollup if it is built (with --keep), without measuring the builds")
	flag.StringVar(&o.levels, "levels", "", "give the Theta rollup these levels (comma-separated: week, month) before the queries; "+
		"a level's Theta sketches are the unions of its days'")
	flag.IntVar(&o.gridRuns, "grid-runs", 10, "timed runs of the retention grid through each proxy kind")
	flag.IntVar(&o.gridExactRuns, "grid-exact-runs", 3, "timed runs of the retention grid in PostgreSQL")
	flag.Parse()
	o.runs = max(1, o.runs)
	o.exactRuns = max(1, min(o.exactRuns, o.runs))
	o.buildRounds = max(1, o.buildRounds)
	return o
}

// commandLine is the wrapper's command line with the flags given.
func commandLine() string {
	parts := []string{"scripts/bench-overlap.sh"}
	flag.Visit(func(f *flag.Flag) {
		switch bf, ok := f.Value.(interface{ IsBoolFlag() bool }); {
		case f.Name == "proxy":
		case ok && bf.IsBoolFlag():
			parts = append(parts, "--"+f.Name+"="+f.Value.String())
		default:
			parts = append(parts, "--"+f.Name+" "+f.Value.String())
		}
	})
	return strings.Join(parts, " ")
}

func run(ctx context.Context, o options) error {
	if err := benchkit.NeedProxy(o.proxy); err != nil {
		return err
	}
	started := time.Now()
	settings := benchkit.Settings()
	settings["work_mem"] = o.workMem
	db, err := benchkit.Open(ctx, "", o.keep, settings)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, dsn := db.Conn, db.DSN
	r := &report{cmd: commandLine(), started: started, opts: o, machine: readMachine()}
	if r.data, err = setup(ctx, conn, dsn, o); err != nil {
		return err
	}
	if r.builds, err = buildRollups(ctx, conn, dsn, o); err != nil {
		return err
	}
	if err := setupLevels(ctx, conn, dsn, o.levels); err != nil {
		return err
	}
	b, err := newBench(ctx, o, dsn)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.warmUp(ctx); err != nil {
		return err
	}
	if err := b.rounds(ctx); err != nil {
		return err
	}
	grid, err := b.runGrid(ctx, o.gridRuns, o.gridExactRuns)
	if err != nil {
		return err
	}
	if r.plans, err = explainExact(ctx, conn, b.groups); err != nil {
		return err
	}
	if r.reads, err = measureReads(ctx, conn); err != nil {
		return err
	}
	r.bench, r.wall = b, time.Since(started)
	r.print(os.Stdout)
	grid.print(os.Stdout)
	return nil
}

// options are the command line's flags.
type options struct {
	rows          int64
	days          int
	users         int64
	keep          string
	proxy         string
	runs          int
	exactRuns     int
	buildRounds   int
	lgK           int
	streams       int
	cacheBytes    int64
	workMem       string
	skipBuild     bool
	levels        string
	gridRuns      int
	gridExactRuns int
}
