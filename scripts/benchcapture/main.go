// Command benchcapture measures what change capture (sql/capture_v1.sql)
// costs: the writes to a rolled-up table, which fire the capture triggers,
// and the queries answered from a rollup while some of its buckets have
// changed since the last refresh.
//
// It starts a throwaway PostgreSQL 15 cluster (internal/localpg; or uses
// --dsn) and measures, in one run, --rounds rounds of each, interleaved, with
// medians:
//
// Write cost. Two tables of the same shape (created_at timestamptz, country,
// device, user_id bigint, amount numeric; an index on created_at; autovacuum
// off, as each round truncates them): bench_w_capture, which a daily rollup
// by country and device with an HLL of user_id covers (so its four capture
// triggers are in place), and bench_w_plain, which none does. Every round
// times, on both tables in alternating order, starting each from an empty
// table, an empty pgsketch.rollup_dirty and a CHECKPOINT:
//
//	bulk:   one INSERT ... SELECT ... FROM generate_series of --write-rows rows
//	        (spread over 30 days);
//	single: --single-rows one-row INSERTs, each its own statement and
//	        autocommit transaction, a prepared statement on one connection
//	        per table, in blocks of 500 alternating between the two tables;
//	txn:    --single-rows one-row INSERTs inside one transaction per table
//	        (each statement fires the triggers, whose error trap is a
//	        subtransaction), the tables one after the other.
//
// Query cost. The events table of internal/demodata (--rows over 90 days, an
// index on created_at) and its daily rollup events_daily by country and
// device with an HLL of user_id, made with pgsketch-proxy rollup create.
// "One month, distinct users by country" is sent through one pgsketch-proxy
// serve --approx on (the proxy's default cache unless --cache-bytes), warmed
// once, on a new connection per mode: clean, and 1 and 5 changed days in the
// month, changed by inserts (1 % of a day's rows each, one statement per
// day: the rows are copied into the rollup's inserted rows) and by updates.
// Each mode's connection first sends the query once (not timed: a new
// server process's caches), then the rollup is refreshed and that many
// days are changed (no refresh after it), then the connection sends the
// query twice: "after write" is the first query after the write (for an
// UPDATE the cache token includes the change log's state, so the rollup
// rows are read from PostgreSQL), "repeat" the same query again (the
// rollup rows from the proxy's cache, the updated days again from
// PostgreSQL, and of the inserted rows only those inserted since the first
// query). In an inserted mode the connection then sends it three more
// times, each after one more row inserted into the first changed day
// ("ingest", as under continuous ingest; compared with the clean mode's
// after-write answer, the clean cold one, and its repeat). The exact query, sent straight to PostgreSQL, runs once a
// round; the order of the modes and the exact query rotates. Each answer
// is checked against the exact one, and its NOTICE must count the changed
// buckets expected.
//
// scripts/bench-capture.sh runs it; docs/benchmarks.md records its output.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

const (
	rollupName  = "events_daily"
	writeRollup = "bench_w_daily"
	from, to    = "2026-02-01", "2026-03-01"
)

var exactSQL = `SELECT country, count(DISTINCT user_id) FROM events
 WHERE created_at >= '` + from + `' AND created_at < '` + to + `' GROUP BY country`

// dirtyDays are the days of the month made dirty: the first one alone, or
// all five.
var dirtyDays = []string{"2026-02-14", "2026-02-03", "2026-02-09", "2026-02-20", "2026-02-26"}

// mode is the state the query is timed in: days of the month changed
// since the refresh, by an INSERT of 1 % of a day's rows each (copied into
// the rollup's inserted rows, which the answer adds to the rollup rows) or
// by an UPDATE of a few rows (logged: the day is read from the base table).
type mode struct {
	days   int
	insert bool
}

func (m mode) String() string {
	switch {
	case m.days == 0:
		return "clean"
	case m.insert:
		return fmt.Sprintf("%d inserted", m.days)
	}
	return fmt.Sprintf("%d updated", m.days)
}

// modes are the states the query is timed in, clean first.
var modes = []mode{{0, false}, {1, true}, {5, true}, {1, false}, {5, false}}

func main() { benchkit.Run("bench-capture", parseFlags(), run) }

func parseFlags() options {
	var o options
	benchkit.EventFlags(&o.rows, &o.days, &o.users, 2_000_000, "events to generate for the query part (20000000 for the size of bench-query)")
	flag.IntVar(&o.writeRows, "write-rows", 1_000_000, "rows of the bulk INSERT ... SELECT of the write part")
	flag.IntVar(&o.singleRows, "single-rows", 10_000, "one-row INSERTs of the write part")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds of each measurement")
	benchkit.DSNFlag(&o.dsn, "the tables events, bench_w_plain and bench_w_capture, their rollups and the pgsketch catalog are created in it")
	benchkit.KeepFlag(&o.keep, ", and reuse its events table next time")
	benchkit.ProxyFlag(&o.proxy)
	flag.Int64Var(&o.cacheBytes, "cache-bytes", -1, "the proxy's --cache-bytes (-1: its default, 256 MiB; 0: no cache)")
	flag.StringVar(&o.distribute, "distribute", "", "with --dsn naming a Citus coordinator: have Citus distribute the write part's two "+
		"tables by this column (user_id) before anything is written to them")
	flag.StringVar(&o.only, "only", "", "run only this part: write, query or check (check runs only when named)")
	flag.BoolVar(&o.durable, "durable", false, "run the throwaway server durably (fsync, synchronous_commit and full_page_writes on), "+
		"as a production server runs, instead of the test settings")
	flag.Parse()
	if o.rounds < 1 || (o.only != "" && o.only != "write" && o.only != "query" && o.only != "check") {
		flag.Usage()
		os.Exit(2)
	}
	return o
}

func run(ctx context.Context, o options) error {
	if err := benchkit.NeedProxy(o.proxy); err != nil {
		return err
	}
	fmt.Printf("load average before: %s\n", benchkit.LoadAvg())
	settings := benchkit.Settings()
	if o.durable {
		settings["fsync"], settings["synchronous_commit"], settings["full_page_writes"] = "on", "on", "on"
	}
	db, err := benchkit.Open(ctx, o.dsn, o.keep, settings)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := benchkit.Prepare(ctx, db.DSN); err != nil {
		return err
	}
	conn, dsn := db.Conn, db.DSN
	printServer(ctx, conn)

	var w *writeResult
	if o.only == "" || o.only == "write" {
		if w, err = writeCost(ctx, conn, dsn, o); err != nil {
			return fmt.Errorf("write cost: %w", err)
		}
	}
	var ck *checkResult
	if o.only == "check" {
		if ck, err = checkCost(ctx, conn, dsn, o); err != nil {
			return fmt.Errorf("check cost: %w", err)
		}
	}
	var q *queryResult
	if o.only == "" || o.only == "query" {
		if q, err = queryCost(ctx, conn, dsn, o); err != nil {
			return fmt.Errorf("query cost: %w", err)
		}
	}
	fmt.Printf("\nload average after: %s\n", benchkit.LoadAvg())
	fmt.Println()
	if w != nil {
		w.print(o)
	}
	if q != nil {
		q.print(o)
	}
	if ck != nil {
		ck.print(o)
	}
	return nil
}

// printServer prints the server's version and the settings that matter to
// the writes.
func printServer(ctx context.Context, conn *pgx.Conn) {
	var version, settings string
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
	_ = conn.QueryRow(ctx, `SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings
		WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'work_mem', 'full_page_writes')`).Scan(&settings)
	fmt.Printf("PostgreSQL %s (%s)\n\n", version, settings)
}

// options are the command line's flags.
type options struct {
	distribute             string
	rows, users            int64
	days                   int
	writeRows, singleRows  int
	rounds                 int
	dsn, keep, proxy, only string
	cacheBytes             int64
	durable                bool
}
