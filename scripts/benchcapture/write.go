package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/refresh"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/upstream/pgsession"
)

// The write part: the package comment says what it measures.

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

// The values of the one-row INSERTs: one a minute from 2026-04-01 (about
// 7 days for 10000), the countries and devices in turn.
var (
	singleBase = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	countries  = []string{"US", "IN", "DE", "GB", "BR", "FR", "JP", "CA"}
	devices    = []string{"android", "ios", "web"}
)

// writer holds the write part's connections. The server processes' CPU
// time is steadier than the wall time on a shared machine; it can be read
// when the server runs here.
type writer struct {
	ctx context.Context
	db  *pgx.Conn // the bulk INSERTs' and the rest's
	o   options
	// One connection per table for the one-row INSERTs, so that each
	// server process's CPU time is one table's.
	single    [2]*pgx.Conn
	singlePID [2]uint32
}

func writeCost(ctx context.Context, db *pgx.Conn, dsn string, o options) (*writeResult, error) {
	fmt.Printf("write cost: %d-row INSERT ... SELECT and %d one-row INSERTs into %s and %s\n", o.writeRows, o.singleRows, tables[0], tables[1])
	if err := setupWriteTables(ctx, db, o.distribute); err != nil {
		return nil, err
	}
	w := &writer{ctx: ctx, db: db, o: o}
	defer w.close()
	if err := w.connect(dsn); err != nil {
		return nil, err
	}
	fmt.Println("warm-up (one of each, not counted)")
	for _, t := range tables {
		if _, _, err := w.bulk(t); err != nil {
			return nil, err
		}
	}
	if _, _, err := w.singles([]int{0, 1}, min(o.singleRows, 2000)); err != nil {
		return nil, err
	}
	r := &writeResult{}
	for i := range o.rounds {
		if err := w.round(i, r); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if r.sgDirty != int64(o.singleRows) {
		return nil, fmt.Errorf("%d one-row INSERTs logged or copied %d rows (pgsketch.rollup_dirty, the inserted rows)", o.singleRows, r.sgDirty)
	}
	if r.bulkDirty < 1 {
		return nil, fmt.Errorf("the bulk INSERT of %d rows logged nothing in pgsketch.rollup_dirty", o.writeRows)
	}
	if o.distribute != "" {
		return r, nil // Citus cannot EXPLAIN ANALYZE an INSERT ... SELECT through the coordinator
	}
	return r, w.explainBulk(r)
}

// setupWriteTables makes the two tables anew (distributed by Citus by
// column distribute, when set) and the rollup of the capture table, whose
// refresh installs its triggers.
func setupWriteTables(ctx context.Context, db *pgx.Conn, distribute string) error {
	if _, err := db.Exec(ctx, "SELECT pgsketch.drop_rollup('"+writeRollup+"', if_exists => true)"); err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := db.Exec(ctx, fmt.Sprintf(writeTableSQL, t)); err != nil {
			return err
		}
		if distribute != "" {
			if _, err := db.Exec(ctx, "SELECT create_distributed_table($1, $2)", t, distribute); err != nil {
				return err
			}
		}
	}
	if _, err := db.Exec(ctx, `SELECT pgsketch.create_rollup('`+writeRollup+`', '`+tables[1]+`', 'created_at', grain => 'day',
		dimensions => '{country,device}', distinct_columns => '{user_id}', log2m => 14, regwidth => 5)`); err != nil {
		return err
	}
	// The refresh installs the triggers (pgsketch.capture_prepare), as
	// pgsketch-proxy rollup create does.
	if _, err := refresh.Refresh(ctx, pgsession.Conn{C: db.PgConn()}, writeRollup, refresh.Options{Full: true}); err != nil {
		return err
	}
	for i, t := range tables {
		var n int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal", t).Scan(&n); err != nil {
			return err
		}
		if want := i * 4; n != want {
			return fmt.Errorf("%s has %d triggers, want %d", t, n, want)
		}
	}
	return nil
}

// connect opens the one-row INSERTs' connections, each with its INSERT
// prepared.
func (w *writer) connect(dsn string) error {
	for k, t := range tables {
		c, err := pgx.Connect(w.ctx, dsn)
		if err != nil {
			return err
		}
		w.single[k], w.singlePID[k] = c, c.PgConn().PID()
		if _, err := c.Prepare(w.ctx, "ins", "INSERT INTO "+t+" (created_at, country, device, user_id, amount) VALUES ($1, $2, $3, $4, $5)"); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) close() {
	for _, c := range w.single {
		if c != nil {
			c.Close(context.Background())
		}
	}
}

// reset empties tables and the change log. The TRUNCATE of the capture
// table fires its TRUNCATE trigger, whose log rows the second TRUNCATE
// removes.
func (w *writer) reset(tables ...string) error {
	for _, t := range tables {
		if _, err := w.db.Exec(w.ctx, "TRUNCATE "+t+"; TRUNCATE pgsketch.rollup_dirty; "+
			"DO $$ BEGIN IF to_regclass('pgsketch.inserts_"+writeRollup+"') IS NOT NULL THEN TRUNCATE pgsketch.inserts_"+writeRollup+"; END IF; "+
			"IF to_regclass('pgsketch.log_"+writeRollup+"') IS NOT NULL THEN TRUNCATE pgsketch.log_"+writeRollup+"; END IF; END $$; CHECKPOINT"); err != nil {
			return err
		}
	}
	return nil
}

// bulk times one bulk INSERT into table t, from an empty table and log,
// and the server's CPU time for it.
func (w *writer) bulk(t string) (time.Duration, time.Duration, error) {
	if err := w.reset(t); err != nil {
		return 0, 0, err
	}
	pid := w.db.PgConn().PID()
	c0, t0 := benchkit.ProcCPU(pid), time.Now()
	tag, err := w.db.Exec(w.ctx, fmt.Sprintf(bulkSQL, t, w.o.writeRows))
	d, c := time.Since(t0), benchkit.ProcCPU(pid)-c0
	if err == nil && tag.RowsAffected() != int64(w.o.writeRows) {
		err = fmt.Errorf("%s: %d rows inserted", t, tag.RowsAffected())
	}
	return d, c, err
}

// insert inserts one-row INSERT number i into table k.
func (w *writer) insert(k, i int) error {
	_, err := w.single[k].Exec(w.ctx, "ins", singleBase.Add(time.Duration(i)*time.Minute), countries[i%len(countries)],
		devices[i%len(devices)], int64(i*7919%2_000_000), float64(i%20000)/100)
	return err
}

// singles inserts n rows one at a time into each table, from empty tables
// and log, in blocks of singleBlock rows alternating between the tables
// (the first block of a round in the order given), so that the machine's
// noise hits both alike; it returns each table's total time and server
// CPU time.
func (w *writer) singles(order []int, n int) (d, c [2]time.Duration, err error) {
	if err := w.reset(tables[:]...); err != nil {
		return d, c, err
	}
	c0 := [2]time.Duration{benchkit.ProcCPU(w.singlePID[0]), benchkit.ProcCPU(w.singlePID[1])}
	for lo := 0; lo < n; lo += singleBlock {
		for _, k := range order {
			t0 := time.Now()
			for i := lo; i < min(n, lo+singleBlock); i++ {
				if err := w.insert(k, i); err != nil {
					return d, c, err
				}
			}
			d[k] += time.Since(t0)
		}
		order = []int{order[1], order[0]}
	}
	for k := range c {
		c[k] = benchkit.ProcCPU(w.singlePID[k]) - c0[k]
	}
	return d, c, nil
}

// inTxn inserts n rows one at a time into each table inside one
// transaction per table, from empty tables and log, in the order given.
func (w *writer) inTxn(order []int, n int) (d, c [2]time.Duration, err error) {
	if err := w.reset(tables[:]...); err != nil {
		return d, c, err
	}
	for _, k := range order {
		c0, t0 := benchkit.ProcCPU(w.singlePID[k]), time.Now()
		if _, err := w.single[k].Exec(w.ctx, "BEGIN"); err != nil {
			return d, c, err
		}
		for i := range n {
			if err := w.insert(k, i); err != nil {
				return d, c, err
			}
		}
		if _, err := w.single[k].Exec(w.ctx, "COMMIT"); err != nil {
			return d, c, err
		}
		d[k], c[k] = time.Since(t0), benchkit.ProcCPU(w.singlePID[k])-c0
	}
	return d, c, nil
}

// dirty is the number of the capture table's rows in the change log and,
// where the catalog has them, its inserted rows (a small insert's rows are
// copied there instead of logged).
func (w *writer) dirty() (int64, error) {
	var n int64
	err := w.db.QueryRow(w.ctx, `SELECT (SELECT count(*) FROM pgsketch.rollup_dirty WHERE rollup = $1)
		+ CASE WHEN to_regclass('pgsketch.inserts_' || $1) IS NULL THEN 0
		       ELSE (xpath('/row/n/text()', query_to_xml('SELECT count(*) AS n FROM pgsketch.inserts_' || $1, false, true, '')))[1]::text::bigint END
		+ CASE WHEN to_regclass('pgsketch.log_' || $1) IS NULL THEN 0
		       ELSE (xpath('/row/n/text()', query_to_xml('SELECT count(*) AS n FROM pgsketch.log_' || $1, false, true, '')))[1]::text::bigint END`,
		writeRollup).Scan(&n)
	return n, err
}

// round runs round i: the bulk INSERTs, the one-row INSERTs and those in
// one transaction, the tables' order alternating from round to round.
func (w *writer) round(i int, r *writeResult) error {
	order := benchkit.Rotation(i, 2)
	var line strings.Builder
	fmt.Fprintf(&line, "round %d", i+1)
	for _, k := range order {
		d, c, err := w.bulk(tables[k])
		if err != nil {
			return err
		}
		r.bulk[k] = append(r.bulk[k], d)
		r.bulkCPU[k] = append(r.bulkCPU[k], c)
		fmt.Fprintf(&line, "  bulk %s %s", short(k), benchkit.Ms(d))
		if k == 1 {
			if r.bulkDirty, err = w.dirty(); err != nil {
				return err
			}
		}
	}
	d, c, err := w.singles(order, w.o.singleRows)
	if err != nil {
		return err
	}
	record(&line, "single", order, d, c, &r.single, &r.singleCPU)
	if r.sgDirty, err = w.dirty(); err != nil {
		return err
	}
	if d, c, err = w.inTxn(order, w.o.singleRows); err != nil {
		return err
	}
	record(&line, "txn", order, d, c, &r.txn, &r.txnCPU)
	fmt.Println(line.String())
	return nil
}

// record keeps one round's times of the two tables, in the order they
// ran, and adds them to the round's line.
func record(line *strings.Builder, what string, order []int, d, c [2]time.Duration, ds, cpu *[2][]time.Duration) {
	for _, k := range order {
		ds[k] = append(ds[k], d[k])
		cpu[k] = append(cpu[k], c[k])
		fmt.Fprintf(line, "  %s %s %s", what, short(k), benchkit.Ms(d[k]))
	}
}

// explainBulk finds where the time goes: one more bulk insert into the
// capture table under EXPLAIN ANALYZE, which reports the triggers' own
// time apart (the transition table is filled inside the insert).
func (w *writer) explainBulk(r *writeResult) error {
	if err := w.reset(tables[1]); err != nil {
		return err
	}
	plan, err := benchkit.Strings(w.ctx, w.db, "EXPLAIN (ANALYZE) "+fmt.Sprintf(bulkSQL, tables[1], w.o.writeRows))
	if err != nil {
		return err
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
	return nil
}

func short(k int) string { return [2]string{"plain", "capture"}[k] }

func (r *writeResult) print(o options) {
	fmt.Printf("write cost: median of %d rounds, alternating (the one-row INSERTs in blocks of %d), caches warm (one warm-up of each)\n",
		o.rounds, singleBlock)
	fmt.Printf("%-34s %12s %12s %8s  %-20s %-28s %s\n", "", "no capture", "capture", "ratio", "goal", "per-round ratios (median)", "server CPU ratio")
	printWriteRow(fmt.Sprintf("bulk INSERT ... SELECT, %d rows", o.writeRows), r.bulk, r.bulkCPU, 1.20)
	printWriteRow(fmt.Sprintf("%d one-row INSERTs", o.singleRows), r.single, r.singleCPU, 1.30)
	printWriteRow(fmt.Sprintf("%d one-row INSERTs, one transaction", o.singleRows), r.txn, r.txnCPU, 1.30)
	fmt.Printf("  per one-row INSERT: %.1f µs without, %.1f µs with capture (+%.1f µs); server CPU %.1f µs and %.1f µs (+%.1f µs)\n",
		perRow(r.single[0], o.singleRows), perRow(r.single[1], o.singleRows),
		perRow(r.single[1], o.singleRows)-perRow(r.single[0], o.singleRows),
		perRow(r.singleCPU[0], o.singleRows), perRow(r.singleCPU[1], o.singleRows),
		perRow(r.singleCPU[1], o.singleRows)-perRow(r.singleCPU[0], o.singleRows))
	fmt.Printf("  change log after a bulk insert: %d rows; after the one-row inserts, log and inserted rows: %d rows\n", r.bulkDirty, r.sgDirty)
	fmt.Printf("  EXPLAIN ANALYZE of one bulk insert with capture: execution %.0f ms, of which the capture trigger %.0f ms\n", r.insertMS, r.triggerMS)
	for _, l := range r.triggerLines {
		fmt.Printf("    %s\n", l)
	}
	fmt.Println()
}

// printWriteRow prints one measurement's row: the medians without and with
// capture, their ratio against the goal, the per-round ratios and the
// server's CPU time.
func printWriteRow(name string, ds, cpu [2][]time.Duration, goal float64) {
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
	fmt.Printf("%-34s %12s %12s %8.3f  <= %.2f: %-11s %-28s %s\n", name, benchkit.Ms(a), benchkit.Ms(b), ratio, goal, benchkit.Met(ratio <= goal),
		strings.Join(perText, " ")+fmt.Sprintf(" (%.2f)", benchkit.MedianFloat(per)), cpuRatio)
}

func perRow(ds []time.Duration, n int) float64 {
	return float64(benchkit.Median(ds).Nanoseconds()) / 1000 / float64(n)
}
