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
// once, on a new connection per mode, with 0, 1 and 5 changed days in the
// month. Each mode's connection first sends the query once (not timed: a
// new server process's caches), then the rollup is refreshed and that many
// days are made dirty by an UPDATE of a few rows' amount (no refresh after
// it), then the connection sends the query twice: "after write" is the first
// query after the write (the cache token includes the change log's state, so
// the rollup rows are read from PostgreSQL), "repeat" the same query again
// (the rollup rows from the proxy's cache, the changed days again from the
// base table). The exact query, sent straight to PostgreSQL, runs once a
// round; the order of the modes and the exact query rotates. Each answer
// is checked against the exact one, and its NOTICE must count the changed
// buckets expected.
//
// scripts/bench-capture.sh runs it; docs/benchmarks.md records its output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/aggregates/refresh"
	"github.com/pgsketch/pgsketch/internal/demodata"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"
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

// modes are the numbers of dirty days the query is timed with.
var modes = []int{0, 1, 5}

type options struct {
	rows, users            int64
	days                   int
	writeRows, singleRows  int
	rounds                 int
	dsn, keep, proxy, only string
	cacheBytes             int64
	durable                bool
}

func main() {
	var o options
	flag.Int64Var(&o.rows, "rows", 2_000_000, "events to generate for the query part (20000000 for the size of bench-query)")
	flag.IntVar(&o.days, "days", 90, "days the events span, from 2026-01-01")
	flag.Int64Var(&o.users, "users", 2_000_000, "possible distinct users")
	flag.IntVar(&o.writeRows, "write-rows", 1_000_000, "rows of the bulk INSERT ... SELECT of the write part")
	flag.IntVar(&o.singleRows, "single-rows", 10_000, "one-row INSERTs of the write part")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds of each measurement")
	flag.StringVar(&o.dsn, "dsn", "", "use this database (with the hll extension) instead of a throwaway cluster; "+
		"the tables events, bench_w_plain and bench_w_capture, their rollups and the pgsketch catalog are created in it")
	flag.StringVar(&o.keep, "keep", "", "keep the throwaway cluster in this directory, and reuse its events table next time")
	flag.StringVar(&o.proxy, "proxy", "bin/pgsketch-proxy", "the pgsketch-proxy binary")
	flag.Int64Var(&o.cacheBytes, "cache-bytes", -1, "the proxy's --cache-bytes (-1: its default, 256 MiB; 0: no cache)")
	flag.StringVar(&o.only, "only", "", "run only this part: write, query or check (check runs only when named)")
	flag.BoolVar(&o.durable, "durable", false, "run the throwaway server durably (fsync, synchronous_commit and full_page_writes on), "+
		"as a production server runs, instead of the test settings")
	flag.Parse()
	if o.rounds < 1 || (o.only != "" && o.only != "write" && o.only != "query" && o.only != "check") {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-capture:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if _, err := os.Stat(o.proxy); err != nil {
		return fmt.Errorf("the proxy binary: %w (build it with go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy)", err)
	}
	fmt.Printf("load average before: %s\n", benchkit.LoadAvg())
	dsn := o.dsn
	if dsn == "" {
		settings := benchkit.Settings()
		if o.durable {
			settings["fsync"], settings["synchronous_commit"], settings["full_page_writes"] = "on", "on", "on"
		}
		var stop func()
		var err error
		if dsn, stop, err = benchkit.Cluster(ctx, o.keep, settings); err != nil {
			return err
		}
		defer stop()
	}
	if err := benchkit.Prepare(ctx, dsn); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var version, settings string
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
	_ = conn.QueryRow(ctx, `SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings
		WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'work_mem', 'full_page_writes')`).Scan(&settings)
	fmt.Printf("PostgreSQL %s (%s)\n\n", version, settings)

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

// --- write cost ---

const writeTableSQL = `DROP TABLE IF EXISTS %[1]s;
CREATE TABLE %[1]s (
    created_at timestamptz NOT NULL,
    country    text,
    device     text NOT NULL,
    user_id    bigint NOT NULL,
    amount     numeric(10,2) NOT NULL
) WITH (autovacuum_enabled = off);
CREATE INDEX ON %[1]s (created_at)`

// bulkSQL inserts n rows spread evenly over 30 days from 2026-04-01 (30
// buckets of the daily rollup), with values from hashes of the row number.
const bulkSQL = `INSERT INTO %[1]s (created_at, country, device, user_id, amount)
SELECT timestamptz '2026-04-01 00:00:00+00' + (i - 1) * (interval '30 days' / %[2]d),
       (ARRAY['US','IN','DE','GB','BR','FR','JP','CA','MX','ES',NULL])[1 + (hashint8extended(i, 2) & 1023) %% 11],
       (ARRAY['android','ios','web'])[1 + (hashint8extended(i, 3) & 1023) %% 3],
       (hashint8extended(i, 1) & 2097151),
       ((hashint8extended(i, 4) & 65535) / 100.0)::numeric(10,2)
  FROM generate_series(1, %[2]d) AS i`

type writeResult struct {
	bulk, single, txn          [2][]time.Duration // [plain, capture]
	bulkCPU, singleCPU, txnCPU [2][]time.Duration // the server process's CPU time (user + system), when readable
	bulkDirty, sgDirty         int64              // log rows after the capture table's last run
	triggerMS, insertMS        float64            // EXPLAIN ANALYZE of one bulk insert into the capture table
	triggerLines               []string
}

var tables = [2]string{"bench_w_plain", "bench_w_capture"}

// singleBlock is how many one-row INSERTs go to one table before the
// other's turn.
const singleBlock = 500

func writeCost(ctx context.Context, db *pgx.Conn, dsn string, o options) (*writeResult, error) {
	fmt.Printf("write cost: %d-row INSERT ... SELECT and %d one-row INSERTs into %s and %s\n", o.writeRows, o.singleRows, tables[0], tables[1])
	if _, err := db.Exec(ctx, "SELECT pgsketch.drop_rollup('"+writeRollup+"', if_exists => true)"); err != nil {
		return nil, err
	}
	for _, t := range tables {
		if _, err := db.Exec(ctx, fmt.Sprintf(writeTableSQL, t)); err != nil {
			return nil, err
		}
	}
	if _, err := db.Exec(ctx, `SELECT pgsketch.create_rollup('`+writeRollup+`', '`+tables[1]+`', 'created_at', grain => 'day',
		dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5)`); err != nil {
		return nil, err
	}
	// The refresh installs the triggers (pgsketch.capture_prepare), as
	// pgsketch-proxy rollup create does.
	if _, err := refresh.Refresh(ctx, refresh.PgConn{C: db.PgConn()}, writeRollup, refresh.Options{Full: true}); err != nil {
		return nil, err
	}
	for i, t := range tables {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal", t).Scan(&n); err != nil {
			return nil, err
		}
		if want := i * 4; n != want {
			return nil, fmt.Errorf("%s has %d triggers, want %d", t, n, want)
		}
	}

	// One connection per table for the one-row INSERTs, so that each
	// server process's CPU time is one table's.
	var single [2]*pgx.Conn
	var singlePID [2]uint32
	for k, t := range tables {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer c.Close(context.Background())
		if _, err := c.Prepare(ctx, "ins", "INSERT INTO "+t+" (created_at, country, device, user_id, amount) VALUES ($1, $2, $3, $4, $5)"); err != nil {
			return nil, err
		}
		single[k], singlePID[k] = c, c.PgConn().PID()
	}
	reset := func(t string) error {
		// The TRUNCATE fires the capture table's TRUNCATE trigger, whose
		// log rows the second TRUNCATE removes.
		_, err := db.Exec(ctx, "TRUNCATE "+t+"; TRUNCATE pgsketch.rollup_dirty; CHECKPOINT")
		return err
	}
	base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	countries := []string{"US", "IN", "DE", "GB", "BR", "FR", "JP", "CA"}
	devices := []string{"android", "ios", "web"}
	// The server processes' CPU time is steadier than the wall time on a
	// shared machine; it can be read when the server runs here.
	bulkPID := db.PgConn().PID()
	bulk := func(t string) (time.Duration, time.Duration, error) {
		if err := reset(t); err != nil {
			return 0, 0, err
		}
		c0, t0 := benchkit.ProcCPU(bulkPID), time.Now()
		tag, err := db.Exec(ctx, fmt.Sprintf(bulkSQL, t, o.writeRows))
		d, c := time.Since(t0), benchkit.ProcCPU(bulkPID)-c0
		if err == nil && tag.RowsAffected() != int64(o.writeRows) {
			err = fmt.Errorf("%s: %d rows inserted", t, tag.RowsAffected())
		}
		return d, c, err
	}
	// singles inserts n rows one at a time into each table, from empty
	// tables and log, in blocks of singleBlock rows alternating between the
	// tables (the first block of a round in the order given), so that the
	// machine's noise hits both alike; it returns each table's total time
	// and server CPU time.
	singles := func(order []int, n int) (d, c [2]time.Duration, err error) {
		for _, t := range tables {
			if err := reset(t); err != nil {
				return d, c, err
			}
		}
		c0 := [2]time.Duration{benchkit.ProcCPU(singlePID[0]), benchkit.ProcCPU(singlePID[1])}
		for lo := 0; lo < n; lo += singleBlock {
			for _, k := range order {
				t0 := time.Now()
				for i := lo; i < min(n, lo+singleBlock); i++ {
					// One a minute from 2026-04-01: about 7 days for 10000.
					if _, err := single[k].Exec(ctx, "ins", base.Add(time.Duration(i)*time.Minute), countries[i%len(countries)],
						devices[i%len(devices)], int64(i*7919%2_000_000), float64(i%20000)/100); err != nil {
						return d, c, err
					}
				}
				d[k] += time.Since(t0)
			}
			order = []int{order[1], order[0]}
		}
		for k := range c {
			c[k] = benchkit.ProcCPU(singlePID[k]) - c0[k]
		}
		return d, c, nil
	}
	// inTxn inserts n rows one at a time into each table inside one
	// transaction per table, from empty tables and log, in the order given.
	inTxn := func(order []int, n int) (d, c [2]time.Duration, err error) {
		for _, t := range tables {
			if err := reset(t); err != nil {
				return d, c, err
			}
		}
		for _, k := range order {
			c0, t0 := benchkit.ProcCPU(singlePID[k]), time.Now()
			if _, err := single[k].Exec(ctx, "BEGIN"); err != nil {
				return d, c, err
			}
			for i := range n {
				if _, err := single[k].Exec(ctx, "ins", base.Add(time.Duration(i)*time.Minute), countries[i%len(countries)],
					devices[i%len(devices)], int64(i*7919%2_000_000), float64(i%20000)/100); err != nil {
					return d, c, err
				}
			}
			if _, err := single[k].Exec(ctx, "COMMIT"); err != nil {
				return d, c, err
			}
			d[k], c[k] = time.Since(t0), benchkit.ProcCPU(singlePID[k])-c0
		}
		return d, c, nil
	}
	dirty := func() (int64, error) {
		var n int64
		err := db.QueryRow(ctx, "SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = $1", writeRollup).Scan(&n)
		return n, err
	}

	fmt.Println("warm-up (one of each, not counted)")
	for _, t := range tables {
		if _, _, err := bulk(t); err != nil {
			return nil, err
		}
	}
	if _, _, err := singles([]int{0, 1}, min(o.singleRows, 2000)); err != nil {
		return nil, err
	}
	r := &writeResult{}
	for i := range o.rounds {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		var line strings.Builder
		fmt.Fprintf(&line, "round %d", i+1)
		for _, k := range order {
			d, c, err := bulk(tables[k])
			if err != nil {
				return nil, err
			}
			r.bulk[k] = append(r.bulk[k], d)
			r.bulkCPU[k] = append(r.bulkCPU[k], c)
			fmt.Fprintf(&line, "  bulk %s %s", short(k), benchkit.Ms(d))
			if k == 1 {
				if r.bulkDirty, err = dirty(); err != nil {
					return nil, err
				}
			}
		}
		d, c, err := singles(order, o.singleRows)
		if err != nil {
			return nil, err
		}
		for _, k := range order {
			r.single[k] = append(r.single[k], d[k])
			r.singleCPU[k] = append(r.singleCPU[k], c[k])
			fmt.Fprintf(&line, "  single %s %s", short(k), benchkit.Ms(d[k]))
		}
		if r.sgDirty, err = dirty(); err != nil {
			return nil, err
		}
		d, c, err = inTxn(order, o.singleRows)
		if err != nil {
			return nil, err
		}
		for _, k := range order {
			r.txn[k] = append(r.txn[k], d[k])
			r.txnCPU[k] = append(r.txnCPU[k], c[k])
			fmt.Fprintf(&line, "  txn %s %s", short(k), benchkit.Ms(d[k]))
		}
		fmt.Println(line.String())
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if r.sgDirty != int64(o.singleRows) {
		return nil, fmt.Errorf("%d one-row INSERTs logged %d rows in pgsketch.rollup_dirty", o.singleRows, r.sgDirty)
	}
	if r.bulkDirty < 1 {
		return nil, errors.New("the bulk INSERT logged nothing in pgsketch.rollup_dirty")
	}

	// Where the time goes: one more bulk insert into the capture table
	// under EXPLAIN ANALYZE, which reports the triggers' own time apart
	// (the transition table is filled inside the insert).
	if err := reset(tables[1]); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "EXPLAIN (ANALYZE) "+fmt.Sprintf(bulkSQL, tables[1], o.writeRows))
	if err != nil {
		return nil, err
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	trig := regexp.MustCompile(`^Trigger (\S+): time=([0-9.]+) calls=(\d+)`)
	exe := regexp.MustCompile(`^Execution Time: ([0-9.]+) ms`)
	for _, l := range plan {
		l = strings.TrimSpace(l)
		if m := trig.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			r.triggerMS += v
			r.triggerLines = append(r.triggerLines, l)
		}
		if m := exe.FindStringSubmatch(l); m != nil {
			r.insertMS, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	return r, nil
}

func short(k int) string { return [2]string{"plain", "capture"}[k] }

func (r *writeResult) print(o options) {
	fmt.Printf("write cost: median of %d rounds, alternating (the one-row INSERTs in blocks of %d), caches warm (one warm-up of each)\n",
		o.rounds, singleBlock)
	fmt.Printf("%-34s %12s %12s %8s  %-20s %-28s %s\n", "", "no capture", "capture", "ratio", "goal", "per-round ratios (median)", "server CPU ratio")
	row := func(name string, ds, cpu [2][]time.Duration, goal float64) {
		a, b := benchkit.Median(ds[0]), benchkit.Median(ds[1])
		ratio := b.Seconds() / a.Seconds()
		var per []float64
		var perText []string
		for i := range ds[0] {
			per = append(per, ds[1][i].Seconds()/ds[0][i].Seconds())
			perText = append(perText, fmt.Sprintf("%.2f", per[i]))
		}
		cpuRatio := "n/a"
		if ca, cb := benchkit.Median(cpu[0]), benchkit.Median(cpu[1]); ca > 0 {
			cpuRatio = fmt.Sprintf("%.3f (%s / %s)", cb.Seconds()/ca.Seconds(), benchkit.Ms(ca), benchkit.Ms(cb))
		}
		fmt.Printf("%-34s %12s %12s %8.3f  <= %.2f: %-11s %-28s %s\n", name, benchkit.Ms(a), benchkit.Ms(b), ratio, goal, met(ratio <= goal),
			strings.Join(perText, " ")+fmt.Sprintf(" (%.2f)", benchkit.MedianFloat(per)), cpuRatio)
	}
	row(fmt.Sprintf("bulk INSERT ... SELECT, %d rows", o.writeRows), r.bulk, r.bulkCPU, 1.15)
	row(fmt.Sprintf("%d one-row INSERTs", o.singleRows), r.single, r.singleCPU, 1.20)
	row(fmt.Sprintf("%d one-row INSERTs, one transaction", o.singleRows), r.txn, r.txnCPU, 1.20)
	fmt.Printf("  per one-row INSERT: %.1f µs without, %.1f µs with capture (+%.1f µs); server CPU %.1f µs and %.1f µs (+%.1f µs)\n",
		perRow(r.single[0], o.singleRows), perRow(r.single[1], o.singleRows),
		perRow(r.single[1], o.singleRows)-perRow(r.single[0], o.singleRows),
		perRow(r.singleCPU[0], o.singleRows), perRow(r.singleCPU[1], o.singleRows),
		perRow(r.singleCPU[1], o.singleRows)-perRow(r.singleCPU[0], o.singleRows))
	fmt.Printf("  change log after a bulk insert: %d rows; after the one-row inserts: %d rows\n", r.bulkDirty, r.sgDirty)
	fmt.Printf("  EXPLAIN ANALYZE of one bulk insert with capture: execution %.0f ms, of which the capture trigger %.0f ms\n", r.insertMS, r.triggerMS)
	for _, l := range r.triggerLines {
		fmt.Printf("    %s\n", l)
	}
	fmt.Println()
}

func perRow(ds []time.Duration, n int) float64 {
	return float64(benchkit.Median(ds).Nanoseconds()) / 1000 / float64(n)
}

// --- query cost ---

type queryResult struct {
	first, repeat map[int][]time.Duration
	exact         []time.Duration
	cachedRepeat  map[int]int // repeats whose rollup rows came from the cache
	cachedFirst   map[int]int
	rollupRows    int64
	size          string
}

var changedRE = regexp.MustCompile(`; (\d+) changed bucket\(s\) since the last refresh`)

// eventsRollup makes the events table of --rows rows (unless it has as
// many) and its daily rollup, with its capture triggers in place.
func eventsRollup(ctx context.Context, db *pgx.Conn, dsn string, o options) error {
	spec := demodata.Default
	spec.Table, spec.Rows, spec.Days, spec.Users = "events", o.rows, o.days, o.users
	var have int64
	_ = db.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&have)
	if have != o.rows {
		fmt.Printf("generating %d events over %d days...\n", o.rows, o.days)
		t0 := time.Now()
		if _, err := db.Exec(ctx, "SELECT pgsketch.drop_rollup('"+rollupName+"', if_exists => true); DROP TABLE IF EXISTS events; "+
			spec.CreateSQL()+"; CREATE INDEX events_created_at ON events (created_at)"); err != nil {
			return err
		}
		if _, err := db.Exec(ctx, "VACUUM ANALYZE events"); err != nil {
			return err
		}
		fmt.Printf("generated in %s\n", time.Since(t0).Round(time.Second))
	}
	if _, err := db.Exec(ctx, "SELECT pgsketch.drop_rollup('"+rollupName+"', if_exists => true)"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, o.proxy, "rollup", "create", rollupName, "--dsn", dsn, "--table", "public.events",
		"--time", "created_at", "--grain", "day", "--dims", "country,device", "--distinct", "user_id", "--levels", "none")
	out, err := cmd.CombinedOutput()
	fmt.Print(string(out))
	if err != nil {
		return fmt.Errorf("rollup create: %w", err)
	}
	if _, err := db.Exec(ctx, "VACUUM ANALYZE "+rollupName); err != nil {
		return err
	}
	var ntrig int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'events'::regclass AND tgname LIKE 'pgsketch\\_%' AND tgenabled = 'A'").Scan(&ntrig); err != nil {
		return err
	}
	if ntrig != 4 {
		return fmt.Errorf("events has %d capture triggers, want 4", ntrig)
	}
	return nil
}

func queryCost(ctx context.Context, db *pgx.Conn, dsn string, o options) (*queryResult, error) {
	if err := eventsRollup(ctx, db, dsn, o); err != nil {
		return nil, err
	}
	r := &queryResult{first: map[int][]time.Duration{}, repeat: map[int][]time.Duration{},
		cachedRepeat: map[int]int{}, cachedFirst: map[int]int{}}
	_ = db.QueryRow(ctx, "SELECT pg_size_pretty(pg_total_relation_size('events')), (SELECT count(*) FROM "+rollupName+")").Scan(&r.size, &r.rollupRows)
	fmt.Printf("events: %d rows, %s; %s: %d rows\n", o.rows, r.size, rollupName, r.rollupRows)

	p, err := benchproxy.Start(ctx, o.proxy, dsn, o.cacheBytes, false)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	direct, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer direct.Close(context.Background())

	fmt.Println("warm-up: the exact query, the proxy once")
	exactAns, _, err := benchproxy.Timed(ctx, direct, exactSQL)
	if err != nil {
		return nil, fmt.Errorf("exact: %w", err)
	}
	// ask runs the query through the proxy on c and checks the answer and
	// that the NOTICE counts the changed buckets expected.
	ask := func(c *benchproxy.Conn, dirty int) (time.Duration, bool, error) {
		c.ResetNotices()
		ans, d, err := benchproxy.Timed(ctx, c.PgConn, exactSQL)
		if err != nil {
			return d, false, err
		}
		if err := compare(ans, exactAns); err != nil {
			return d, false, err
		}
		notices := c.Notices()
		if len(notices) != 1 || !strings.Contains(notices[0], "rollup "+rollupName) {
			return d, false, fmt.Errorf("not answered from the rollup: notices %q", notices)
		}
		n := 0
		if m := changedRE.FindStringSubmatch(notices[0]); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		if n != dirty {
			return d, false, fmt.Errorf("%d changed bucket(s) in the NOTICE, want %d: %q", n, dirty, notices[0])
		}
		return d, strings.Contains(notices[0], "from the proxy's cache"), nil
	}
	wc, err := benchproxy.Connect(ctx, p.URL(dsn))
	if err != nil {
		return nil, err
	}
	if _, _, err := ask(wc, 0); err != nil {
		return nil, fmt.Errorf("warm-up through the proxy: %w", err)
	}
	wc.Close(context.Background())

	// state refreshes the rollup (draining the log) and makes the first n
	// dirty days dirty.
	state := func(n int) error {
		if _, err := refresh.Refresh(ctx, refresh.PgConn{C: db.PgConn()}, rollupName,
			refresh.Options{Streams: 2, Dial: refresh.DialPgConn(dsn)}); err != nil {
			return err
		}
		for _, day := range dirtyDays[:n] {
			tag, err := db.Exec(ctx, `UPDATE events SET amount = amount
				WHERE created_at >= $1::timestamptz AND created_at < $1::timestamptz + interval '1 day' AND user_id % 1000 = 0`, day+" 00:00:00+00")
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("the UPDATE of %s changed no row", day)
			}
		}
		return nil
	}
	mode := func(n int) (time.Duration, time.Duration, error) {
		// A new connection, warmed by one query before the write: the
		// timed queries do not pay for a new server process's caches.
		c, err := benchproxy.Connect(ctx, p.URL(dsn))
		if err != nil {
			return 0, 0, err
		}
		defer c.Close(context.Background())
		if _, _, err := benchproxy.Timed(ctx, c.PgConn, exactSQL); err != nil {
			return 0, 0, err
		}
		if err := state(n); err != nil {
			return 0, 0, err
		}
		d1, cached1, err := ask(c, n)
		if err != nil {
			return 0, 0, fmt.Errorf("%d dirty, first: %w", n, err)
		}
		d2, cached2, err := ask(c, n)
		if err != nil {
			return 0, 0, fmt.Errorf("%d dirty, repeat: %w", n, err)
		}
		if cached1 {
			r.cachedFirst[n]++
		}
		if cached2 {
			r.cachedRepeat[n]++
		}
		return d1, d2, nil
	}
	fmt.Printf("%d rounds; before each mode a refresh, then the UPDATEs (not timed)\n", o.rounds)
	for i := range o.rounds {
		kinds := []int{0, 1, 5, -1} // -1: exact
		order := make([]int, len(kinds))
		for k := range kinds {
			order[k] = kinds[(i+k)%len(kinds)]
		}
		var line strings.Builder
		fmt.Fprintf(&line, "round %d", i+1)
		for _, k := range order {
			if k < 0 {
				_, d, err := benchproxy.Timed(ctx, direct, exactSQL)
				if err != nil {
					return nil, fmt.Errorf("round %d, exact: %w", i+1, err)
				}
				r.exact = append(r.exact, d)
				fmt.Fprintf(&line, "  exact %s", benchkit.Ms(d))
				continue
			}
			d1, d2, err := mode(k)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", i+1, err)
			}
			r.first[k] = append(r.first[k], d1)
			r.repeat[k] = append(r.repeat[k], d2)
			fmt.Fprintf(&line, "  dirty=%d %s / %s", k, benchkit.Ms(d1), benchkit.Ms(d2))
		}
		fmt.Println(line.String())
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return r, nil
}

func (r *queryResult) print(o options) {
	cache := "its default --cache-bytes (256 MiB)"
	if o.cacheBytes >= 0 {
		cache = fmt.Sprintf("--cache-bytes %d", o.cacheBytes)
	}
	fmt.Printf("query cost: one month, distinct users by country; %d events (%s), %s with %d rows; proxy with %s;\n"+
		"median of %d rounds, caches warm; after write = first query after the refresh and UPDATEs, repeat = the same again\n",
		o.rows, r.size, rollupName, r.rollupRows, cache, o.rounds)
	fmt.Printf("%-14s %12s %8s %10s %12s %8s %10s  %s\n", "changed days", "after write", "÷ clean", "exact ÷", "repeat", "÷ clean", "exact ÷",
		"rollup rows from the cache (after write, repeat)")
	c1, c2 := benchkit.Median(r.first[0]), benchkit.Median(r.repeat[0])
	ex := benchkit.Median(r.exact)
	for _, k := range modes {
		a, b := benchkit.Median(r.first[k]), benchkit.Median(r.repeat[k])
		fmt.Printf("%-14d %12s %8.2f %9.0fx %12s %8.2f %9.0fx  %d/%d, %d/%d\n", k, benchkit.Ms(a), a.Seconds()/c1.Seconds(), ex.Seconds()/a.Seconds(),
			benchkit.Ms(b), b.Seconds()/c2.Seconds(), ex.Seconds()/b.Seconds(),
			r.cachedFirst[k], len(r.first[k]), r.cachedRepeat[k], len(r.repeat[k]))
	}
	fmt.Printf("%-14s %12s\n", "exact (direct)", benchkit.Ms(ex))
	ratio := benchkit.Median(r.first[1]).Seconds() / c1.Seconds()
	fmt.Printf("goal: 1 changed day <= 2x the clean answer: after write %.2fx: %s", ratio, met(ratio <= 2))
	ratio2 := benchkit.Median(r.repeat[1]).Seconds() / c2.Seconds()
	fmt.Printf("; repeat %.2fx: %s\n", ratio2, met(ratio2 <= 2))
}

// --- helpers ---

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// compare checks an answer against the exact one: the same groups, and
// every estimate within 5 standard errors (log2m 14: 1.04/128) of the exact
// count.
func compare(ans, exact map[string]float64) error {
	if len(ans) != len(exact) {
		return fmt.Errorf("%d groups, the exact answer has %d", len(ans), len(exact))
	}
	for k, v := range ans {
		e, ok := exact[k]
		if !ok {
			return fmt.Errorf("group %q is not in the exact answer", k)
		}
		if se := math.Abs(v-e) / (e * 1.04 / 128); se > 5 {
			return fmt.Errorf("group %q: %v, exact %v (%.1f standard errors)", k, v, e, se)
		}
	}
	return nil
}
