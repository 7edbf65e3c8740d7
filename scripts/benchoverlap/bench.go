package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/internal/demodata"
	"github.com/pgsketch/pgsketch/scripts/benchproxy"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

// query is one overlap question; group is the queries timed together.
type query struct{ name, sql string }

type group struct {
	name    string
	queries []query
}

// mode is how a group is run.
type mode int

const (
	cold mode = iota
	warm
	exact
)

var modeNames = [...]string{"proxy-cold", "proxy-warm", "exact"}

const (
	retentionWeeks = 12
	firstMonday    = "2026-01-05"
)

// demodataStart is when the generated events begin.
var demodataStart = demodata.Default.Start

func timeRange(from, to string) string {
	return fmt.Sprintf("created_at >= '%s' AND created_at < '%s'", from, to)
}

func setOpSQL(op, a, b string) string {
	return "SELECT count(*) FROM (SELECT user_id FROM events WHERE " + a + "\n " + op +
		" SELECT user_id FROM events WHERE " + b + ") x"
}

// week is the range of ISO week i of the retention grid.
func week(i int) (from, to string) {
	start, _ := time.Parse(time.DateOnly, firstMonday)
	return start.AddDate(0, 0, 7*i).Format(time.DateOnly), start.AddDate(0, 0, 7*i+7).Format(time.DateOnly)
}

func groups() []group {
	jan, feb := timeRange("2026-01-01", "2026-02-01"), timeRange("2026-02-01", "2026-03-01")
	var weeks []query
	for i := range retentionWeeks {
		a, b := timeRange(week(i)), timeRange(week(i+1))
		weeks = append(weeks, query{fmt.Sprintf("week %d", i), setOpSQL("INTERSECT", a, b)})
	}
	return []group{
		{"Jan not Feb, EXCEPT", []query{{"Jan not Feb, EXCEPT", setOpSQL("EXCEPT", jan, feb)}}},
		{"Jan not Feb, NOT IN", []query{{"Jan not Feb, NOT IN", "SELECT count(DISTINCT user_id) FROM events WHERE " + jan +
			"\n AND user_id NOT IN (SELECT user_id FROM events WHERE " + feb + ")"}}},
		{"retention, 12 weeks", weeks},
	}
}

// outcome is how the proxy answered a query, read from its NOTICE: from
// the sketches, or counted exactly because the stated interval was too
// wide (both state the estimate and interval), or passed through.
type outcome struct {
	how                    string // "sketches", "exactly" or "passed through"
	answer                 float64
	estimated              bool // the NOTICE states an estimate and interval
	estimate, lower, upper float64
	relErr, arms, notice   string
}

var (
	estimateRE = regexp.MustCompile(`estimated from the Theta sketches of rollup \w+: (\d+), 95% interval (\d+) to (\d+) \(relative error ([^;]+); arms (\d+) and (\d+)\)`)
	refusedRE  = regexp.MustCompile(`Theta sketches estimates (\d+) \(95% interval (\d+) to (\d+)\), a relative error of ([^,]+),`)
)

func readOutcome(ans map[string]float64, notices []string) (outcome, error) {
	v, ok := ans[""]
	if !ok || len(ans) != 1 {
		return outcome{}, fmt.Errorf("answer %v: want one row of one column", ans)
	}
	o := outcome{how: "passed through", answer: v}
	for _, n := range notices {
		m := estimateRE.FindStringSubmatch(n)
		switch {
		case m != nil:
			a, _ := strconv.ParseInt(m[5], 10, 64)
			b, _ := strconv.ParseInt(m[6], 10, 64)
			o.how, o.notice, o.arms = "sketches", n, thousands(a)+" and "+thousands(b)
		case strings.Contains(n, "answered exactly by PostgreSQL"):
			o.how, o.notice = "exactly", n
			m = refusedRE.FindStringSubmatch(n)
		}
		if m != nil {
			o.estimated, o.relErr = true, m[4]
			o.estimate, _ = strconv.ParseFloat(m[1], 64)
			o.lower, _ = strconv.ParseFloat(m[2], 64)
			o.upper, _ = strconv.ParseFloat(m[3], 64)
		}
	}
	return o, nil
}

// tally counts how a query's timed proxy runs were answered.
type tally struct {
	how            map[string]int
	estimated      int // runs whose NOTICE states an interval
	inside         int // of those, the runs whose interval holds the exact answer
	wrongExact     int // answered exactly, but not the exact answer
	wrongRow       int // answered from sketches, but not the estimate its NOTICE states
	estMin, estMax float64
}

func (t *tally) add(o outcome, exact float64) {
	if t.how == nil {
		t.how = map[string]int{}
	}
	t.how[o.how]++
	if o.estimated {
		if t.estimated == 0 || o.estimate < t.estMin {
			t.estMin = o.estimate
		}
		t.estMax = max(t.estMax, o.estimate)
		t.estimated++
		if o.lower <= exact && exact <= o.upper {
			t.inside++
		}
	}
	switch {
	case o.how == "sketches" && o.answer != o.estimate:
		t.wrongRow++
	case o.how == "exactly" && o.answer != exact:
		t.wrongExact++
	}
}

// bench holds the connections and what the runs found.
type bench struct {
	o                        options
	dsn                      string
	groups                   []group
	warm                     *benchproxy.Session // a long-running proxy
	direct                   *benchproxy.Conn
	exact                    map[string]float64 // query name → exact answer
	first                    map[string]outcome // query name → the warm-up's outcome
	tallies                  map[string]*tally
	times                    map[string]*[3][]time.Duration // group name → totals per mode
	perQuery                 map[string]*[3][]time.Duration // query name → times per mode
	loadMin, loadMax         float64
	pagedIn                  int64 // bytes paged in from disk during the rounds (-1: unknown)
	exactWarmUp, proxyWarmUp time.Duration
}

func newBench(ctx context.Context, o options, dsn string) (*bench, error) {
	b := &bench{o: o, dsn: dsn, groups: groups(), exact: map[string]float64{}, first: map[string]outcome{},
		tallies: map[string]*tally{}, times: map[string]*[3][]time.Duration{}, perQuery: map[string]*[3][]time.Duration{}}
	var err error
	if b.direct, err = benchproxy.Connect(ctx, dsn); err != nil {
		return nil, err
	}
	if b.warm, err = benchproxy.Open(ctx, o.proxy, dsn, o.cacheBytes, false); err != nil {
		b.close()
		return nil, err
	}
	for _, g := range b.groups {
		b.times[g.name] = &[3][]time.Duration{}
		for _, q := range g.queries {
			b.perQuery[q.name] = &[3][]time.Duration{}
			b.tallies[q.name] = &tally{}
		}
	}
	return b, nil
}

func (b *bench) close() {
	if b.warm != nil {
		b.warm.Close()
	}
	b.direct.Close(context.Background())
}

// warmUp runs every exact query once on the direct connection (their
// answers check the others; PostgreSQL's buffers are warm after it), then
// every query once through the warm proxy.
func (b *bench) warmUp(ctx context.Context) error {
	fmt.Println("\nwarm-up: every exact query, then every query through the warm proxy")
	t0 := time.Now()
	for _, g := range b.groups {
		for _, q := range g.queries {
			ans, d, err := benchproxy.Timed(ctx, b.direct.PgConn, q.sql)
			if err != nil {
				return fmt.Errorf("%s, exact: %w", q.name, err)
			}
			v, ok := ans[""]
			if !ok || len(ans) != 1 {
				return fmt.Errorf("%s, exact: answer %v", q.name, ans)
			}
			b.exact[q.name] = v
			fmt.Printf("  %-22s exact %10.0f  %s\n", q.name, b.exact[q.name], benchkit.Ms(d))
		}
	}
	b.exactWarmUp = time.Since(t0)
	t0 = time.Now()
	for _, g := range b.groups {
		for _, q := range g.queries {
			ans, notices, d, err := b.warm.Conn.Ask(ctx, q.sql)
			if err != nil {
				return fmt.Errorf("%s, through the proxy: %w", q.name, err)
			}
			o, err := readOutcome(ans, notices)
			if err != nil {
				return fmt.Errorf("%s, through the proxy: %w", q.name, err)
			}
			b.first[q.name] = o
			fmt.Printf("  %-22s proxy %10.0f  %s  %s\n", q.name, o.answer, benchkit.Ms(d), describe(o, b.exact[q.name]))
		}
	}
	b.proxyWarmUp = time.Since(t0)
	return nil
}

// describe says in a few words how an answer was made and how it compares.
func describe(o outcome, exact float64) string {
	var s string
	switch o.how {
	case "sketches":
		s = "from sketches"
	case "exactly":
		s = "counted exactly, refused"
	default:
		return "PASSED THROUGH without a NOTICE"
	}
	if !o.estimated {
		return s
	}
	in := "exact inside"
	if exact < o.lower || exact > o.upper {
		in = "EXACT OUTSIDE"
	}
	return fmt.Sprintf("%s: %.0f [%.0f, %.0f], relative error %s, %s, off by %+.2f%%",
		s, o.estimate, o.lower, o.upper, o.relErr, in, 100*(o.estimate-exact)/exact)
}

// runGroup runs a group's queries in order on c, checks each answer, and
// returns their total time.
func (b *bench) runGroup(ctx context.Context, c *benchproxy.Conn, g group, m mode) (time.Duration, error) {
	var total time.Duration
	for _, q := range g.queries {
		ans, notices, d, err := c.Ask(ctx, q.sql)
		if err != nil {
			return 0, fmt.Errorf("%s, %s: %w", q.name, modeNames[m], err)
		}
		if m == exact {
			if v := ans[""]; len(ans) != 1 || v != b.exact[q.name] {
				return 0, fmt.Errorf("%s, exact: answer %v, the warm-up's %v", q.name, ans, b.exact[q.name])
			}
		} else {
			o, err := readOutcome(ans, notices)
			if err != nil {
				return 0, fmt.Errorf("%s, %s: %w", q.name, modeNames[m], err)
			}
			b.tallies[q.name].add(o, b.exact[q.name])
		}
		b.perQuery[q.name][m] = append(b.perQuery[q.name][m], d)
		total += d
	}
	b.times[g.name][m] = append(b.times[g.name][m], total)
	return total, nil
}

// runCold runs a group on a new connection through a proxy started for it.
func (b *bench) runCold(ctx context.Context, g group) (time.Duration, error) {
	s, err := benchproxy.Open(ctx, b.o.proxy, b.dsn, b.o.cacheBytes, false)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return b.runGroup(ctx, s.Conn, g, cold)
}

// step is one timed run of one group in one mode.
type step struct {
	g group
	m mode
}

func (b *bench) run(ctx context.Context, s step) (time.Duration, error) {
	switch s.m {
	case cold:
		return b.runCold(ctx, s.g)
	case warm:
		return b.runGroup(ctx, b.warm.Conn, s.g, warm)
	}
	return b.runGroup(ctx, b.direct, s.g, exact)
}

// roundOrder is round i's steps: every proxy kind, and in the rounds the
// exact runs are spread over every exact kind too, rotated by i.
func (b *bench) roundOrder(i int, withExact bool) []step {
	var steps []step
	for _, m := range []mode{cold, warm, exact} {
		if m == exact && !withExact {
			continue
		}
		for _, g := range b.groups {
			steps = append(steps, step{g, m})
		}
	}
	k := i % len(steps)
	return append(steps[k:], steps[:k]...)
}

// rounds runs the timed rounds, interleaved, printing one line per step.
func (b *bench) rounds(ctx context.Context) error {
	fmt.Printf("\n%d rounds; the exact queries in %d of them\n", b.o.runs, b.o.exactRuns)
	spacing := benchkit.NewSpacing(b.o.runs, b.o.exactRuns)
	b.loadMin, b.loadMax = loadAvg(), loadAvg()
	in0 := pagedIn()
	for i := range b.o.runs {
		withExact := spacing.Take(i)
		fmt.Printf("round %d\n", i+1)
		for _, s := range b.roundOrder(i, withExact) {
			d, err := b.run(ctx, s)
			if err != nil {
				return fmt.Errorf("round %d: %w", i+1, err)
			}
			fmt.Printf("  %-22s %-10s %s\n", s.g.name, modeNames[s.m], benchkit.Ms(d))
		}
		l := loadAvg()
		b.loadMin, b.loadMax = min(b.loadMin, l), max(b.loadMax, l)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	b.pagedIn = -1
	if in0 >= 0 {
		b.pagedIn = pagedIn() - in0
	}
	return nil
}

// pagedIn is what the machine has paged in from disk since it booted, in
// bytes (/proc/vmstat pgpgin; -1 if unknown).
func pagedIn() int64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "pgpgin "); ok {
			kb, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// loadAvg is the 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
