package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

// goal is the speed-up over PostgreSQL's exact answer the proxy aims at.
const goal = 50

// machine describes where the benchmark ran.
type machine struct {
	nproc, cpu, mem, goVersion, commit string
}

func readMachine() machine {
	m := machine{nproc: strconv.Itoa(runtime.NumCPU()), goVersion: runtime.Version()}
	if out, err := exec.Command("nproc").Output(); err == nil {
		m.nproc = strings.TrimSpace(string(out))
	}
	m.cpu = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseFloat(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 64); err == nil {
		m.mem = fmt.Sprintf("%.0f GB RAM", kb/(1<<20))
	}
	m.commit = "unknown commit"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.commit += " with uncommitted changes to " + changedFiles(string(st))
		}
	}
	return m
}

// changedFiles lists the paths of git status --porcelain, at most three.
func changedFiles(status string) string {
	var paths []string
	for _, l := range strings.Split(strings.TrimRight(status, "\n"), "\n") {
		if len(l) > 3 {
			paths = append(paths, l[3:])
		}
	}
	if len(paths) > 3 {
		return strings.Join(paths[:3], ", ") + fmt.Sprintf(" and %d more files", len(paths)-3)
	}
	return strings.Join(paths, ", ")
}

// procField is the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// planInfo is what EXPLAIN (ANALYZE, BUFFERS) said about an exact query.
type planInfo struct {
	query      string
	nodes      []string
	buffers    string
	hit, read  int64
	unhashedAt string // set for NOT IN: its subplan at work_mem 4MB
}

var (
	sharedHitRE  = regexp.MustCompile(`shared hit=(\d+)`)
	sharedReadRE = regexp.MustCompile(`shared (?:hit=\d+ )?read=(\d+)`)
)

// explainExact explains the first query of each group, run once more.
func explainExact(ctx context.Context, conn *pgx.Conn, gs []group) ([]planInfo, error) {
	fmt.Println("\nEXPLAIN (ANALYZE, BUFFERS) of the exact queries")
	var out []planInfo
	for _, g := range gs {
		q := g.queries[0]
		lines, err := explain(ctx, conn, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) "+q.sql)
		if err != nil {
			return nil, fmt.Errorf("explain %s: %w", q.name, err)
		}
		p := planInfo{query: q.name, nodes: planNodes(lines)}
		for _, l := range lines {
			if t := strings.TrimSpace(l); strings.HasPrefix(t, "Buffers:") && p.buffers == "" {
				p.buffers = t
			}
		}
		if m := sharedHitRE.FindStringSubmatch(p.buffers); m != nil {
			p.hit, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if m := sharedReadRE.FindStringSubmatch(p.buffers); m != nil {
			p.read, _ = strconv.ParseInt(m[1], 10, 64)
		}
		if strings.Contains(q.sql, "NOT IN") {
			if p.unhashedAt, err = subplanAt4MB(ctx, conn, q.sql); err != nil {
				return nil, err
			}
		}
		fmt.Printf("  %s: %s; %s\n", q.name, strings.Join(p.nodes, " / "), p.buffers)
		out = append(out, p)
	}
	return out, nil
}

func explain(ctx context.Context, conn *pgx.Conn, sql string) ([]string, error) {
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// planNodes are a plan's node names (without costs and row counts) and its
// subplan filters, in order.
func planNodes(lines []string) []string {
	var nodes []string
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case i == 0, strings.HasPrefix(t, "->"):
			t = strings.TrimSpace(strings.TrimPrefix(t, "->"))
			if j := strings.Index(t, "  ("); j >= 0 {
				t = t[:j]
			}
			nodes = append(nodes, t)
		case strings.Contains(t, "SubPlan") && strings.HasPrefix(t, "Filter:"):
			nodes = append(nodes, t)
		}
	}
	return nodes
}

// subplanAt4MB is the filter line of the NOT IN query's plan at
// PostgreSQL's default work_mem (4MB): "hashed SubPlan" or not.
func subplanAt4MB(ctx context.Context, conn *pgx.Conn, sql string) (string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL work_mem = '4MB'"); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	for _, l := range lines {
		if t := strings.TrimSpace(l); strings.Contains(t, "SubPlan") && strings.HasPrefix(t, "Filter:") {
			return t, nil
		}
	}
	return "no SubPlan filter", nil
}

// report is everything the Markdown section says.
type report struct {
	cmd     string
	started time.Time
	wall    time.Duration
	opts    options
	machine machine
	data    dataInfo
	builds  *buildInfo
	bench   *bench
	plans   []planInfo
	// reads are the Theta rollup rows the January/February queries and
	// the retention weeks read.
	reads [2]sketchRead
}

// sketchRead is how many rollup rows, and bytes of Theta sketches, a time
// range of the Theta rollup holds.
type sketchRead struct{ rows, bytes int64 }

// measureReads sizes what the queries read of the Theta rollup.
func measureReads(ctx context.Context, conn *pgx.Conn) ([2]sketchRead, error) {
	var out [2]sketchRead
	_, end := week(retentionWeeks)
	for i, rg := range [][2]string{{"2026-01-01", "2026-03-01"}, {firstMonday, end}} {
		if err := conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(octet_length(theta_user_id)), 0) FROM "+thetaRollup+
			" WHERE bucket >= $1::timestamptz AND bucket < $2::timestamptz", rg[0], rg[1]).Scan(&out[i].rows, &out[i].bytes); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n---- Markdown for docs/benchmarks.md ----\n\n")
	r.printHeader(w)
	r.printBuilds(w)
	r.printQueries(w)
	r.printRetention(w)
	r.printPlans(w)
	r.printOdd(w)
	fmt.Fprintf(w, "---- end (wall time %s) ----\n", r.wall.Round(time.Second))
}

func (r *report) printHeader(w io.Writer) {
	o, m, d := r.opts, r.machine, r.data
	fmt.Fprintf(w, "## overlaps from Theta sketches\n\n")
	fmt.Fprintf(w, "`%s` (also `make bench-overlap`), %s UTC, at %s; wall time %s.\n",
		r.cmd, r.started.UTC().Format("2006-01-02 15:04"), m.commit, r.wall.Round(time.Second))
	fmt.Fprintf(w, "Machine: %s CPUs (`nproc`), %s, %s; %s. Load average (1 min) %.1f–%.1f during the timed rounds.\n",
		m.nproc, m.cpu, m.mem, m.goVersion, r.bench.loadMin, r.bench.loadMax)
	fmt.Fprintf(w, "A throwaway PostgreSQL %s cluster (`internal/localpg`; `shared_buffers` %s, `work_mem` %s, JIT on as by default), "+
		"the `internal/demodata` events table: %s rows over %d days from 2026-01-01, up to %s users, %s with its indexes "+
		"(primary key, `created_at`).\n\n",
		d.pgVersion, d.sharedBufs, d.workMem, thousands(o.rows), o.days, thousands(o.users), mb(d.eventsBytes))
}

func (r *report) printBuilds(w io.Writer) {
	bi := r.builds
	fmt.Fprintf(w, "### Build cost and storage\n\n")
	if bi.skipped {
		fmt.Fprintf(w, "Not measured (`--skip-build`): the rollup `%s` was reused, %d rows, %s; "+
			"avg `octet_length(theta_user_id)` %.0f bytes.\n\n", thetaRollup, bi.rows[1], mb(bi.bytes[1]), bi.avgLen[1])
		return
	}
	n := len(bi.builds[0])
	fmt.Fprintf(w, "Two daily rollups by country and device, each made by `pgsketch.create_rollup` and a full build by the "+
		"refresher (%d readers), %d build(s) each (alternating which goes first; a CHECKPOINT before each, "+
		"the table's pages warmed by one sequential scan first), median and min–max:\n\n", bi.streams, n)
	fmt.Fprintf(w, "| rollup | measures | build | rows | `pg_total_relation_size` |\n|---|---|---:|---:|---:|\n")
	for k, kind := range bi.kinds {
		fmt.Fprintf(w, "| `%s` | %s | %s | %d | %s |\n", kind.name, kind.measures, benchkit.Spread(bi.builds[k]), bi.rows[k], mb(bi.bytes[k]))
	}
	dt := benchkit.Median(bi.builds[1]) - benchkit.Median(bi.builds[0])
	db := bi.bytes[1] - bi.bytes[0]
	fmt.Fprintf(w, "\nThe Theta column adds %s to the build (%+.0f %%) and %s to the storage (%+.0f %%): %s bytes per rollup row. "+
		"Average `octet_length(theta_user_id)` %s bytes (stored, `pg_column_size`: %s), against %s (%s) for the HLL `distinct_user_id`. "+
		"The HLL-only rollup is dropped before the queries.\n\n",
		benchkit.Ms(dt), pct(dt.Seconds(), benchkit.Median(bi.builds[0]).Seconds()), mb(db), pct(float64(db), float64(bi.bytes[0])),
		thousands(int64(float64(db)/float64(max(1, bi.rows[1])))),
		thousands(int64(bi.avgLen[1])), thousands(int64(bi.avgStored[1])), thousands(int64(bi.avgLen[0])), thousands(int64(bi.avgStored[0])))
}

func (r *report) printQueries(w io.Writer) {
	b := r.bench
	fmt.Fprintf(w, "### Queries\n\n")
	fmt.Fprintf(w, "Through `pgsketch-proxy serve --approx on` (`pgsketch.max_overlap_error` at its default, 10 %%) from `%s`, "+
		"against the same SQL on a direct connection, each in the simple protocol from sending the Query to its ReadyForQuery, "+
		"interleaved round by round (the order rotating):\n\n", thetaRollup)
	fmt.Fprintf(w, "- **proxy-cold**: a proxy started for this run alone, a new connection, its first query (for the retention weeks its "+
		"first 12; the start and the connection not timed); %s;\n", runs(len(b.times[b.groups[0].name][cold])))
	fmt.Fprintf(w, "- **proxy-warm**: repeated on one connection through one long-running proxy (its rollup cache warm); %s;\n",
		runs(len(b.times[b.groups[0].name][warm])))
	fmt.Fprintf(w, "- **exact**: PostgreSQL, %s spread over the %d rounds. **PostgreSQL's buffers were warm**: one untimed run of "+
		"every exact query before the rounds (%s for all of them); see the buffer counts below.\n\n",
		runs(len(b.times[b.groups[0].name][exact])), r.opts.runs, benchkit.Ms(b.exactWarmUp))
	r.printPagedIn(w)
	fmt.Fprintf(w, "What a cold proxy reads of `%s`: for the January/February queries %s rollup rows, %s of Theta sketches; "+
		"for the 12 retention weeks (13 distinct weeks) %s rows, %s.\n\n", thetaRollup,
		thousands(r.reads[0].rows), mb(r.reads[0].bytes), thousands(r.reads[1].rows), mb(r.reads[1].bytes))
	r.printSQL(w)
	fmt.Fprintf(w, "| query | proxy-cold | proxy-warm | exact | exact / cold | exact / warm |\n|---|---:|---:|---:|---:|---:|\n")
	for _, g := range b.groups {
		t := b.times[g.name]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", g.name, benchkit.Spread(t[cold]), benchkit.Spread(t[warm]), benchkit.Spread(t[exact]),
			ratio(t[exact], t[cold]), ratio(t[exact], t[warm]))
	}
	fmt.Fprintf(w, "\nMedian (min–max); the ratios are of medians, **bold** where they meet the goal of %d×.\n\n", goal)
	fmt.Fprintf(w, "\"answered\": how the timed proxy runs (cold and warm) were answered; the estimate, its interval and relative error "+
		"as the warm-up run's NOTICE states them (also when the proxy refused them and counted exactly); \"exact inside\": in how many "+
		"timed runs the stated interval held the exact answer; \"arms\": the two sets' estimates.\n\n")
	fmt.Fprintf(w, "| query | answered | estimate | 95 %% interval | relative error | arms | exact | exact inside |\n|---|---|---:|---|---:|---|---:|---|\n")
	for _, g := range b.groups[:2] {
		fmt.Fprint(w, row(append([]string{g.name}, r.answerCells(g.queries[0])...)...))
	}
	fmt.Fprintln(w)
}

// printPagedIn compares what the machine paged in from disk during the
// rounds with what the timed exact runs read from outside shared buffers,
// as the EXPLAIN counts of one run of each exact query (week 0 for the 12
// weeks) estimate it.
func (r *report) printPagedIn(w io.Writer) {
	b := r.bench
	if b.pagedIn < 0 || len(r.plans) != len(b.groups) {
		return
	}
	var outside int64
	for i, g := range b.groups {
		outside += r.plans[i].read * 8192 * int64(len(g.queries)) * int64(len(b.times[g.name][exact]))
	}
	fmt.Fprintf(w, "During the timed rounds the machine paged in %s from disk (`/proc/vmstat` pgpgin), while the timed exact runs "+
		"read about %s from outside shared buffers (the EXPLAIN counts below times the runs)", mb(b.pagedIn), mb(outside))
	if outside > 0 && b.pagedIn*10 < outside {
		fmt.Fprintf(w, ": nearly all of that came from the OS page cache")
	}
	fmt.Fprintf(w, ".\n\n")
}

func (r *report) printSQL(w io.Writer) {
	fmt.Fprintf(w, "```sql\n")
	for _, g := range r.bench.groups {
		q := g.queries[0]
		fmt.Fprintf(w, "-- %s\n%s;\n", q.name, q.sql)
	}
	fmt.Fprintf(w, "-- weeks 1..11 likewise, 7 days each from Monday %s + 7i against the next 7 days\n```\n\n", firstMonday)
}

// answerCells are a query's cells: how the timed proxy runs answered it,
// the warm-up's estimate, interval and relative error (stated also when
// the proxy refused them), the exact answer, and whether the timed runs'
// intervals held it.
func (r *report) answerCells(q query) []string {
	b := r.bench
	o, e, t := b.first[q.name], b.exact[q.name], b.tallies[q.name]
	est, iv, rel, inside, arms := "—", "—", "—", "—", "—"
	if o.arms != "" {
		arms = o.arms
	}
	if o.estimated {
		est = fmt.Sprintf("%s (%+.2f %%)", thousands(int64(o.estimate)), 100*(o.estimate-e)/e)
		iv = thousands(int64(o.lower)) + " to " + thousands(int64(o.upper))
		rel = o.relErr
	}
	if t.estimated > 0 {
		inside = fmt.Sprintf("yes, %d of %d runs", t.inside, t.estimated)
		if t.inside < t.estimated {
			inside = fmt.Sprintf("**no** in %d of %d runs", t.estimated-t.inside, t.estimated)
		}
	}
	return []string{answered(t), est, iv, rel, arms, thousands(int64(e)), inside}
}

func row(cells ...string) string {
	return "| " + strings.Join(cells, " | ") + " |\n"
}

// answered says how a query's timed proxy runs were answered.
func answered(t *tally) string {
	var parts []string
	total := 0
	for _, n := range t.how {
		total += n
	}
	for _, how := range []string{"sketches", "exactly", "passed through"} {
		if n := t.how[how]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", map[string]string{"sketches": "from sketches",
				"exactly": "**counted exactly**", "passed through": "**passed through**"}[how], n, total))
		}
	}
	return strings.Join(parts, ", ")
}

func (r *report) printRetention(w io.Writer) {
	b := r.bench
	g := b.groups[2]
	fmt.Fprintf(w, "### Week-over-week retention\n\n")
	fmt.Fprintf(w, "Users active in week i (7 days from Monday %s + 7i) who were also active in week i+1, as an INTERSECT; "+
		"the estimate and interval from the warm-up run (the answers of the timed runs: see \"exact inside\"); per-week medians:\n\n", firstMonday)
	fmt.Fprintf(w, "| week i | A | answered | estimate | 95 %% interval | relative error | arms | exact | exact inside | proxy-warm | exact time |\n")
	fmt.Fprintf(w, "|---|---|---|---:|---|---:|---|---:|---|---:|---:|\n")
	for i, q := range g.queries {
		from, _ := week(i)
		t := b.perQuery[q.name]
		cells := append([]string{strconv.Itoa(i), from}, r.answerCells(q)...)
		fmt.Fprint(w, row(append(cells, benchkit.Ms(benchkit.Median(t[warm])), benchkit.Ms(benchkit.Median(t[exact])))...))
	}
	fmt.Fprintln(w)
	r.printDataEnd(w)
}

// printDataEnd says when the last week i+1 runs past the generated data.
func (r *report) printDataEnd(w io.Writer) {
	from, to := week(retentionWeeks)
	end := demodataStart.AddDate(0, 0, r.opts.days).Format(time.DateOnly)
	if end < to {
		fmt.Fprintf(w, "The events end before %s, so week %d (%s to %s, B of week %d) holds fewer than 7 days.\n\n",
			end, retentionWeeks, from, to, retentionWeeks-1)
	}
}

func (r *report) printPlans(w io.Writer) {
	fmt.Fprintf(w, "PostgreSQL's plans and buffers (`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF)` after the rounds; the table is %s, "+
		"`shared_buffers` %s, so blocks \"read\" come from the OS page cache or the disk):\n\n", mb(r.data.eventsBytes), r.data.sharedBufs)
	for _, p := range r.plans {
		share := 0.0
		if p.hit+p.read > 0 {
			share = 100 * float64(p.hit) / float64(p.hit+p.read)
		}
		fmt.Fprintf(w, "- %s: %s; `%s` (%.0f %% of blocks from shared buffers)", p.query, strings.Join(p.nodes, " › "), p.buffers, share)
		if p.unhashedAt != "" {
			fmt.Fprintf(w, "; at `work_mem` 4MB its filter would be `%s`", p.unhashedAt)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// printOdd lists what did not go as expected, if anything.
func (r *report) printOdd(w io.Writer) {
	b := r.bench
	var odd []string
	for _, g := range b.groups {
		for _, q := range g.queries {
			t := b.tallies[q.name]
			if len(t.how) > 1 || t.how["passed through"] > 0 || t.how["exactly"] > 0 {
				odd = append(odd, fmt.Sprintf("%s: %s", q.name, answered(t)))
			}
			if t.inside < t.estimated {
				odd = append(odd, fmt.Sprintf("%s: the exact answer outside the stated interval in %d of %d runs", q.name, t.estimated-t.inside, t.estimated))
			}
			if t.estMax > t.estMin {
				odd = append(odd, fmt.Sprintf("%s: the estimate varied between runs, %.0f to %.0f", q.name, t.estMin, t.estMax))
			}
			if t.wrongExact > 0 || t.wrongRow > 0 {
				odd = append(odd, fmt.Sprintf("%s: %d exactly counted answers differ from PostgreSQL's, %d rows differ from their NOTICE's estimate",
					q.name, t.wrongExact, t.wrongRow))
			}
		}
	}
	if len(odd) == 0 {
		fmt.Fprintf(w, "Every proxy run of every query was answered from the sketches, with the exact answer inside the stated interval.\n\n")
		return
	}
	fmt.Fprintf(w, "Worth noting:\n\n")
	for _, s := range odd {
		fmt.Fprintf(w, "- %s\n", s)
	}
	fmt.Fprintln(w)
}

// ratio is slow's median over fast's, bold when it meets the goal.
func ratio(slow, fast []time.Duration) string {
	f := benchkit.Median(fast).Seconds()
	if f == 0 {
		return "—"
	}
	x := benchkit.Median(slow).Seconds() / f
	s := fmt.Sprintf("%.3g×", x)
	if x >= 100 {
		s = fmt.Sprintf("%.0f×", x)
	}
	if x >= goal {
		return "**" + s + "**"
	}
	return s
}

func runs(n int) string {
	if n == 1 {
		return "1 run"
	}
	return strconv.Itoa(n) + " runs"
}

func pct(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}

// thousands writes n with thin spaces between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(" ")
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
