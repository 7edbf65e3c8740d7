package main

// The merge-strategy benchmark, run by --merge-bench:
// where the rollup rows of a group are merged when the proxy answers from a
// rollup without its cache, in four queries:
//
//	total-90d:   count(DISTINCT user_id) over the whole data range (90 days
//	             by default), answered from the hourly rollup events_hourly
//	             (no dimensions): one output group merging 24 × days rollup
//	             rows (2160);
//	day-ctry-dev: one month by day, country and device from events_daily:
//	             one rollup row per output group (1680 groups);
//	day-ctry:    the month by day and country from events_daily: 3 rows
//	             (devices) per group, 560 groups; near the boundary of
//	             auto's rule (beyond the first six queries);
//	month-ctry:  the month by country (the query of the main benchmark)
//	             from events_daily: 28 days × 3 devices = 84 rows per group.
//
// Each is timed four ways, in the simple protocol, interleaved round by
// round with the order of the queries and of the kinds rotating:
//
//	proxy:      through a pgsketch-proxy serve --approx on --cache-bytes 0,
//	            on a connection with SET pgsketch.merge = 'proxy' (every
//	            rollup row's sketches travel, the proxy merges them);
//	server:     the same proxy, a connection with pgsketch.merge = 'server'
//	            (PostgreSQL merges per group with hll_union_agg);
//	auto:       the same proxy, pgsketch.merge = 'auto';
//	hll-direct: hll_cardinality(hll_union_agg(distinct_user_id::hll)) over
//	            the same rollup table, on a direct connection.
//
// Every answer is checked against the exact one (computed once per query
// at the start): the same groups, each estimate within 5 standard errors;
// the proxy's NOTICE must name the rollup and the strategy asked for, and
// for auto it is recorded which one it picked (the rule: server from an
// estimated 10 rollup rows per group; at 2f7ddc8, from 2).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsketch/pgsketch/scripts/benchproxy"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

const hourlyName = "events_hourly"

// The endings of the proxy's NOTICE naming where the rollup rows were merged.
var strategySuffix = map[string]string{
	"server": "; rollup rows merged in PostgreSQL (hll_union_agg)",
	"proxy":  "; rollup rows merged in the proxy",
	"cache":  "; rollup rows from the proxy's cache",
}

// mergeQuery is one query of the benchmark.
type mergeQuery struct {
	name   string
	rollup string
	sql    string // through the proxy, and exactly on the direct connection
	hll    string // hll_union_agg over the rollup, direct
	keys   string // the rollup's columns the groups are, for the statistics
	lo, hi string // the range of buckets read

	exact      map[string]float64
	rows       int64 // rollup rows read
	bytes      int64 // their sketches' bytes
	groups     int64
	maxPer     int64  // most rollup rows merged into one group
	autoRule   string // the strategy auto should pick
	autoPicked map[string]int
}

var mergeKinds = []string{"proxy", "server", "auto", "hll-direct"}

func between(col, a, b string) string {
	return col + " >= '" + a + "' AND " + col + " < '" + b + "'"
}

// grouped is the query of distinct users in [a, b) by date_trunc(unit,
// created_at) (none when unit is "") and dims, answered from rollup, and
// its hll_union_agg form over the rollup's rows (grouped by the bucket, or
// by date_trunc(unit, bucket) when unit is coarser than the rollup's grain).
func grouped(name, rollup, unit, dims string, a, b string) *mergeQuery {
	var sel, hsel, grp, hgrp []string
	if unit != "" {
		t := "date_trunc('" + unit + "', created_at)"
		bt := "bucket"
		if (rollup == rollupName && unit != "day") || (rollup == hourlyName && unit != "hour") {
			bt = "date_trunc('" + unit + "', bucket)"
		}
		sel, grp, hsel, hgrp = append(sel, t+" AS "+unit), append(grp, t), append(hsel, bt), append(hgrp, bt)
	}
	if dims != "" {
		sel, grp, hsel, hgrp = append(sel, dims), append(grp, dims), append(hsel, dims), append(hgrp, dims)
	}
	q := &mergeQuery{name: name, rollup: rollup, lo: a, hi: b, keys: "()",
		sql: "SELECT " + strings.Join(append(sel, "count(DISTINCT user_id) AS users"), ", ") +
			" FROM events WHERE " + between("created_at", a, b),
		hll: "SELECT " + strings.Join(append(hsel, "hll_cardinality(hll_union_agg(distinct_user_id::hll))::bigint AS users"), ", ") +
			" FROM " + rollup + " WHERE " + between("bucket", a, b),
	}
	if len(grp) > 0 {
		q.sql += " GROUP BY " + strings.Join(grp, ", ")
		q.hll += " GROUP BY " + strings.Join(hgrp, ", ")
		q.keys = strings.Join(hgrp, ", ")
	}
	return q
}

func runMerge(ctx context.Context, o options, dsn string) error {
	direct, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer direct.Close(context.Background())
	lo, hi, err := eventsRange(ctx, direct)
	if err != nil {
		return err
	}
	qs := mergeQueries(o.mergeMore, lo, hi)
	if err := checkNoLevels(ctx, direct); err != nil {
		return err
	}
	if lo != "2026-01-01" || hi != "2026-04-01" {
		fmt.Printf("note: the events span %s to %s (the defaults give 2026-01-01 to 2026-04-01)\n", lo, hi)
	}
	fmt.Printf("commit %s; load average at start: %s\n", commit(), benchkit.LoadAvg())
	fmt.Println("exact answers (once each, also warming the table's pages):")
	for _, q := range qs {
		if err := q.measure(ctx, direct); err != nil {
			return err
		}
	}
	m, err := openMerge(ctx, o, dsn, direct)
	if err != nil {
		return err
	}
	defer m.close()
	if err := m.warmUp(qs); err != nil {
		return err
	}
	r, err := m.rounds(qs, o.runs)
	if err != nil {
		return err
	}
	r.print(qs)
	return nil
}

// eventsRange is the data's range in whole UTC days, for the 90-day
// query; the server must run in UTC.
func eventsRange(ctx context.Context, direct *pgconn.PgConn) (lo, hi string, err error) {
	res, err := direct.Exec(ctx, `SELECT to_char(date_trunc('day', min(created_at), 'UTC'), 'YYYY-MM-DD'),
		to_char(date_trunc('day', max(created_at), 'UTC') + interval '1 day', 'YYYY-MM-DD'), current_setting('TimeZone') FROM events`).ReadAll()
	if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Rows) != 1 {
		return "", "", fmt.Errorf("the range of events: %v %v", err, res)
	}
	lo, hi, tz := string(res[0].Rows[0][0]), string(res[0].Rows[0][1]), string(res[0].Rows[0][2])
	if tz != "UTC" && tz != "Etc/UTC" {
		return "", "", fmt.Errorf("the server's TimeZone is %s: the queries' date literals and date_trunc('day', ...) assume UTC, the rollups' zone", tz)
	}
	return lo, hi, nil
}

// mergeQueries are the benchmark's queries, the data spanning [lo, hi);
// more adds those near the boundary of auto's rule.
func mergeQueries(more bool, lo, hi string) []*mergeQuery {
	qs := []*mergeQuery{
		grouped("total-90d", hourlyName, "", "", lo, hi),
		grouped("day-ctry-dev", rollupName, "day", "country, device", from, to),
		grouped("day-ctry", rollupName, "day", "country", from, to),
		{
			name:   "month-ctry",
			rollup: rollupName,
			sql:    exactSQL,
			hll:    hllSQL,
			keys:   "country", lo: from, hi: to,
		},
	}
	if more {
		// Weeks from the first Monday of the month, to its last.
		qs = append(qs,
			grouped("day-dev", rollupName, "day", "device", from, to),
			grouped("week-ctry", rollupName, "week", "country", "2026-02-02", "2026-03-02"),
			grouped("h-hour", hourlyName, "hour", "", from, to),
			grouped("h-day", hourlyName, "day", "", from, to))
	}
	return qs
}

// checkNoLevels fails if the rollups have levels (pre-merged coarser
// copies of a rollup), which would change what the queries read: the
// benchmark is about merging the rollup's own rows.
func checkNoLevels(ctx context.Context, direct *pgconn.PgConn) error {
	res, err := direct.Exec(ctx, `SELECT string_agg(rollup || ' ' || grain, ', ') FROM pgsketch.rollup_levels
		WHERE rollup IN ('`+rollupName+`', '`+hourlyName+`')`).ReadAll()
	switch {
	case err != nil && strings.Contains(err.Error(), "42P01"): // a catalog without levels
	case err != nil:
		return fmt.Errorf("the rollups' levels: %w", err)
	case len(res) == 1 && len(res[0].Rows) == 1 && res[0].Rows[0][0] != nil:
		return fmt.Errorf("the rollups have levels (%s), which queries would read instead of the rollup rows: "+
			"drop them (pgsketch.drop_rollup_level) or use another cluster", res[0].Rows[0][0])
	}
	return nil
}

// measure counts what q reads of its rollup, decides what auto's rule
// should pick, and computes q's exact answer, printing them.
func (q *mergeQuery) measure(ctx context.Context, direct *pgconn.PgConn) error {
	res, err := direct.Exec(ctx, fmt.Sprintf(`SELECT sum(n), sum(b), count(*), max(n) FROM (
		SELECT count(*) AS n, sum(length(distinct_user_id)) AS b FROM %s WHERE %s GROUP BY %s) g`,
		q.rollup, between("bucket", q.lo, q.hi), q.keys)).ReadAll()
	if err != nil || len(res) != 1 || res[0].Err != nil || len(res[0].Rows) != 1 {
		return fmt.Errorf("%s: rollup statistics: %v %v", q.name, err, res)
	}
	for i, p := range []*int64{&q.rows, &q.bytes, &q.groups, &q.maxPer} {
		if _, err := fmt.Sscan(string(res[0].Rows[0][i]), p); err != nil {
			return fmt.Errorf("%s: rollup statistics: %w", q.name, err)
		}
	}
	// The rule (rewrite.ServerMergeRows): server from 10 rollup rows
	// per group on average (the proxy estimates them from statistics;
	// here they are counted).
	q.autoRule = "proxy"
	if q.groups > 0 && q.rows >= 10*q.groups {
		q.autoRule = "server"
	}
	q.autoPicked = map[string]int{}
	var d time.Duration
	q.exact, d, err = benchproxy.Timed(ctx, direct, q.sql)
	if err != nil {
		return fmt.Errorf("%s: exact: %w", q.name, err)
	}
	if int64(len(q.exact)) != q.groups {
		return fmt.Errorf("%s: the exact answer has %d groups, the rollup %d", q.name, len(q.exact), q.groups)
	}
	fmt.Printf("  %-12s %s: %d rollup rows (%.1f MB of sketches) into %d groups, at most %d per group; exact in %s; auto should pick %s\n",
		q.name, q.rollup, q.rows, float64(q.bytes)/1e6, q.groups, q.maxPer, benchkit.Ms(d), q.autoRule)
	fmt.Printf("  %12s %s\n", "", q.sql)
	return nil
}

// mergeBench is one proxy without a cache, a connection through it per
// strategy, and the direct connection.
type mergeBench struct {
	ctx    context.Context
	direct *pgconn.PgConn
	proxy  *benchproxy.Proxy
	conns  map[string]*benchproxy.Conn
	// The PostgreSQL backend serving each kind, whose CPU time is read
	// around every query (as is the proxy's).
	backend map[string]uint32
}

func openMerge(ctx context.Context, o options, dsn string, direct *pgconn.PgConn) (*mergeBench, error) {
	p, err := benchproxy.Start(ctx, o.proxy, dsn, 0, false)
	if err != nil {
		return nil, err
	}
	m := &mergeBench{ctx: ctx, direct: direct, proxy: p, conns: map[string]*benchproxy.Conn{},
		backend: map[string]uint32{"hll-direct": direct.PID()}}
	for _, k := range mergeKinds[:3] {
		if err := m.connect(k, p.URL(dsn)); err != nil {
			m.close()
			return nil, err
		}
	}
	return m, nil
}

// connect opens the connection of strategy k and reads its backend's pid.
func (m *mergeBench) connect(k, url string) error {
	c, err := benchproxy.Connect(m.ctx, url)
	if err != nil {
		return err
	}
	m.conns[k] = c
	if _, err := c.Exec(m.ctx, "SET pgsketch.merge = '"+k+"'").ReadAll(); err != nil {
		return fmt.Errorf("SET pgsketch.merge = '%s' through the proxy: %w", k, err)
	}
	res, err := c.Exec(m.ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
		return fmt.Errorf("pg_backend_pid() through the proxy: %v", err)
	}
	pid, err := strconv.ParseUint(string(res[0].Rows[0][0]), 10, 32)
	m.backend[k] = uint32(pid)
	return err
}

func (m *mergeBench) close() {
	for _, c := range m.conns {
		c.Close(context.Background())
	}
	m.proxy.Stop()
}

// run times one query one way and checks its answer.
func (m *mergeBench) run(q *mergeQuery, kind string) (time.Duration, error) {
	if kind == "hll-direct" {
		ans, d, err := benchproxy.Timed(m.ctx, m.direct, q.hll)
		if err == nil {
			err = compare(kind, ans, q.exact)
		}
		return d, err
	}
	ans, notices, d, err := m.conns[kind].Ask(m.ctx, q.sql)
	if err != nil {
		return d, err
	}
	if err := compare(kind, ans, q.exact); err != nil {
		return d, err
	}
	if !benchproxy.FromRollup(notices, q.rollup) {
		return d, fmt.Errorf("%s: notices %q, expected one naming rollup %s", kind, notices, q.rollup)
	}
	return d, q.merged(kind, notices[0])
}

// merged checks where the NOTICE says the rollup rows were merged: where
// kind asked for, or for auto in the proxy or in PostgreSQL, which it
// counts.
func (q *mergeQuery) merged(kind, notice string) error {
	got := "unknown"
	for s, suffix := range strategySuffix {
		if strings.HasSuffix(notice, suffix) {
			got = s
		}
	}
	switch {
	case kind == "auto" && (got == "proxy" || got == "server"):
		if got != q.autoRule && q.autoPicked[got] == 0 {
			fmt.Printf("  note: %s: auto merged in the %s, its rule says %s\n", q.name, got, q.autoRule)
		}
		q.autoPicked[got]++
	case got != kind:
		return fmt.Errorf("%s: the NOTICE says the rows were merged by %q: %q", kind, got, notice)
	}
	return nil
}

func (m *mergeBench) warmUp(qs []*mergeQuery) error {
	fmt.Println("warm-up: each query each way once")
	for _, q := range qs {
		for _, k := range mergeKinds {
			if _, err := m.run(q, k); err != nil {
				return fmt.Errorf("warm-up, %s, %s: %w", q.name, k, err)
			}
		}
		clear(q.autoPicked)
	}
	return nil
}

// mergeRounds is what the rounds measured, by query and kind.
type mergeRounds struct {
	times              map[string]map[string][]time.Duration
	cpu                map[string]map[string]*[2]time.Duration // the proxy's, the backend's
	startLoad, endLoad string
}

// rounds runs the timed rounds: every query each way, the order of the
// queries and of the kinds rotating.
func (m *mergeBench) rounds(qs []*mergeQuery, runs int) (*mergeRounds, error) {
	r := &mergeRounds{times: map[string]map[string][]time.Duration{}, cpu: map[string]map[string]*[2]time.Duration{}}
	for _, q := range qs {
		r.times[q.name] = map[string][]time.Duration{}
		r.cpu[q.name] = map[string]*[2]time.Duration{}
		for _, k := range mergeKinds {
			r.cpu[q.name][k] = &[2]time.Duration{}
		}
	}
	r.startLoad = benchkit.LoadAvg()
	fmt.Printf("%d rounds (%s, each %s, in rotating order); times in ms; load average at the start of the rounds: %s\n",
		runs, names(qs), strings.Join(mergeKinds, " "), r.startLoad)
	for i := range runs {
		var line strings.Builder
		fmt.Fprintf(&line, "round %3d  load %s  proxy rss %s", i+1, strings.Fields(benchkit.LoadAvg())[0], rss(m.proxy.Pid()))
		for j := range qs {
			q := qs[(i+j)%len(qs)]
			if err := m.round(i, len(qs), q, r, &line); err != nil {
				return nil, err
			}
		}
		fmt.Println(line.String())
		if m.ctx.Err() != nil {
			return nil, m.ctx.Err()
		}
	}
	r.endLoad = benchkit.LoadAvg()
	return r, nil
}

// round runs query q each way in round i of rounds over n queries,
// recording the times and CPU times and adding them to the round's line.
func (m *mergeBench) round(i, n int, q *mergeQuery, r *mergeRounds, line *strings.Builder) error {
	proxyPid := uint32(m.proxy.Pid())
	d := map[string]time.Duration{}
	for k := range mergeKinds {
		// The kinds' order rotates too, shifted every n rounds so that it
		// does not follow the query's place in the round.
		kind := mergeKinds[(i+i/n+k)%len(mergeKinds)]
		p0, b0 := benchkit.ProcCPU(proxyPid), benchkit.ProcCPU(m.backend[kind])
		t, err := m.run(q, kind)
		if err != nil {
			return fmt.Errorf("round %d, %s, %s: %w", i+1, q.name, kind, err)
		}
		c := r.cpu[q.name][kind]
		c[0] += benchkit.ProcCPU(proxyPid) - p0
		c[1] += benchkit.ProcCPU(m.backend[kind]) - b0
		d[kind] = t
		r.times[q.name][kind] = append(r.times[q.name][kind], t)
	}
	fmt.Fprintf(line, " | %s", q.name)
	for _, kind := range mergeKinds {
		fmt.Fprintf(line, " %.1f", float64(d[kind].Microseconds())/1000)
	}
	return nil
}

func (r *mergeRounds) print(qs []*mergeQuery) {
	fmt.Printf("\nload average (1, 5, 15 min): %s at the start of the rounds, %s at the end\n", r.startLoad, r.endLoad)
	fmt.Printf("\n%-12s %-10s %5s %10s %10s\n", "query", "kind", "runs", "p50", "p99")
	for _, q := range qs {
		for _, k := range mergeKinds {
			t := r.times[q.name][k]
			fmt.Printf("%-12s %-10s %5d %10s %10s\n", q.name, k, len(t), benchkit.Ms(benchkit.Percentile(t, 50)), benchkit.Ms(benchkit.Percentile(t, 99)))
		}
	}
	fmt.Printf("\nCPU time per query, mean over the rounds (/proc/PID/stat, user + system, counted in 10 ms ticks):\n%-12s %-10s %12s %12s\n",
		"query", "kind", "proxy", "PostgreSQL")
	for _, q := range qs {
		for _, k := range mergeKinds {
			c, n := r.cpu[q.name][k], time.Duration(max(1, len(r.times[q.name][k])))
			fmt.Printf("%-12s %-10s %12s %12s\n", q.name, k, benchkit.Ms(c[0]/n), benchkit.Ms(c[1]/n))
		}
	}
	fmt.Println()
	failed := false
	for _, q := range qs {
		if !r.verdict(q) {
			failed = true
		}
	}
	if failed {
		fmt.Println("\nauto is NOT within 10 % of the better strategy at p50 in every query")
	}
}

// verdict prints how auto fared in q against the faster of proxy and
// server, and reports whether it was within 10 % of it at p50.
func (r *mergeRounds) verdict(q *mergeQuery) bool {
	times := r.times[q.name]
	pc := func(kind string, pct float64) float64 { return benchkit.Percentile(times[kind], pct).Seconds() }
	best, other := "proxy", "server"
	if pc("server", 50) < pc("proxy", 50) {
		best, other = "server", "proxy"
	}
	r50 := pc("auto", 50) / pc(best, 50)
	r99 := pc("auto", 99) / min(pc("proxy", 99), pc("server", 99))
	verdict := "PASS"
	if r50 > 1.10 {
		verdict = "FAIL"
	}
	var picks []string
	for _, s := range []string{"server", "proxy"} {
		if n := q.autoPicked[s]; n > 0 {
			picks = append(picks, fmt.Sprintf("%s %d/%d", s, n, len(times["auto"])))
		}
	}
	fmt.Printf("%-12s %d rows/group at most; faster at p50: %s (%s / %s %.2fx); auto picked %s (rule: %s)\n",
		q.name, q.maxPer, best, other, best, pc(other, 50)/pc(best, 50), strings.Join(picks, ", "), q.autoRule)
	// The same ratio taken within each round (the kinds of a query run
	// back to back, under about the same load), then its median.
	var paired []float64
	for i, a := range times["auto"] {
		paired = append(paired, a.Seconds()/times[best][i].Seconds())
	}
	slices.Sort(paired)
	fmt.Printf("%-12s auto / min(proxy, server): p50 %.3f, p99 %.3f -> %s (<= 1.10 at p50); median of the rounds' auto / %s %.3f; hll-direct / %s p50 %.2fx\n",
		"", r50, r99, verdict, best, paired[len(paired)/2], best, pc("hll-direct", 50)/pc(best, 50))
	return r50 <= 1.10
}

func names(qs []*mergeQuery) string {
	var s []string
	for _, q := range qs {
		s = append(s, q.name)
	}
	return strings.Join(s, ", ")
}

// rss is the resident memory of process pid (VmRSS), in MB.
func rss(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return fmt.Sprintf("%d MB", kb>>10)
			}
		}
	}
	return "?"
}

// commit names the tree's commit, and the files that differ from it
// outside the benchmark's own (scripts/, docs/).
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	c := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil {
		return c
	}
	var changed []string
	for _, l := range strings.Split(string(st), "\n") {
		if len(l) > 3 && !strings.HasPrefix(l[3:], "scripts/") && !strings.HasPrefix(l[3:], "docs/") {
			changed = append(changed, l[3:])
		}
	}
	if len(changed) > 0 {
		c += " with changes to " + strings.Join(changed, ", ")
	}
	return c
}
