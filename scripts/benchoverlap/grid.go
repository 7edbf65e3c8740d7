package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/scripts/benchproxy"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

// gridSQL is the week-over-week retention grid as an analyst writes it:
// the 12 pairs of consecutive weeks from Monday 2026-01-05, in one
// statement answered from per-week sketches.
const gridSQL = `WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events
                WHERE created_at >= '2026-01-05' AND created_at < '2026-04-06')
SELECT a.week AS cohort, b.week, count(*) AS retained
  FROM act a JOIN act b ON a.user_id = b.user_id AND b.week = a.week + interval '1 week'
 GROUP BY 1, 2 ORDER BY 1, 2`

var gridNoticeRE = regexp.MustCompile(`(\d+) cell\(s\) estimated(?: \(largest relative error ([^ ]+) at 95%\))?, (\d+) counted exactly`)

// gridResult is what the grid's runs measured.
type gridResult struct {
	times              [3][]time.Duration
	cells              int
	estimated, counted string
	maxRelErr          string
	worst, median      float64 // |estimate − exact| / exact over the estimated cells
	sameCells          bool
}

// runGrid times the grid exactly, through a fresh proxy (cold) and
// through the warm one, interleaved, and compares the cells.
func (b *bench) runGrid(ctx context.Context, rounds, exactRuns int) (*gridResult, error) {
	fmt.Println("\nretention grid: one statement, 12 pairs of consecutive weeks")
	exactAns, d, err := benchproxy.Timed(ctx, b.direct.PgConn, gridSQL) // untimed warm-up
	if err != nil {
		return nil, fmt.Errorf("grid, exact: %w", err)
	}
	fmt.Printf("  exact warm-up %s, %d cells\n", benchkit.Ms(d), len(exactAns))
	g := &gridResult{cells: len(exactAns)}
	check := func(ans map[string]float64, notices []string) error {
		if len(notices) != 1 {
			return fmt.Errorf("grid: notices %q", notices)
		}
		m := gridNoticeRE.FindStringSubmatch(notices[0])
		if m == nil {
			return fmt.Errorf("grid: not answered from sketches: %q", notices[0])
		}
		g.estimated, g.maxRelErr, g.counted = m[1], m[2], m[3]
		g.sameCells = len(ans) == len(exactAns)
		var errs []float64
		for k, x := range exactAns {
			e, ok := ans[k]
			if !ok {
				g.sameCells = false
				continue
			}
			errs = append(errs, math.Abs(e-x)/x)
		}
		slices.Sort(errs)
		if len(errs) > 0 {
			g.worst, g.median = errs[len(errs)-1], errs[len(errs)/2]
		}
		return nil
	}
	every := max(1, rounds/max(1, exactRuns))
	for i := range rounds {
		steps := []mode{cold, warm}
		if i%every == 0 && len(g.times[exact]) < exactRuns {
			steps = append(steps, exact)
		}
		k := i % len(steps)
		for _, m := range append(steps[k:], steps[:k]...) {
			d, err := b.gridRun(ctx, m, check)
			if err != nil {
				return nil, err
			}
			g.times[m] = append(g.times[m], d)
			fmt.Printf("  round %d %-10s %s\n", i+1, modeNames[m], benchkit.Ms(d))
		}
	}
	return g, nil
}

// gridRun runs the grid once in mode m.
func (b *bench) gridRun(ctx context.Context, m mode, check func(map[string]float64, []string) error) (time.Duration, error) {
	c := b.warm.Conn
	switch m {
	case exact:
		_, d, err := benchproxy.Timed(ctx, b.direct.PgConn, gridSQL)
		return d, err
	case cold:
		s, err := benchproxy.Open(ctx, b.o.proxy, b.dsn, b.o.cacheBytes, false)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		c = s.Conn
	}
	ans, notices, d, err := c.Ask(ctx, gridSQL)
	if err != nil {
		return 0, fmt.Errorf("grid, %s: %w", modeNames[m], err)
	}
	return d, check(ans, notices)
}

// print writes the grid's section of the report.
func (g *gridResult) print(w io.Writer) {
	if g == nil {
		return
	}
	fmt.Fprintf(w, "\n### Week-over-week retention as one statement\n\n```sql\n%s;\n```\n\n", gridSQL)
	fmt.Fprintf(w, "The same runs, interleaved: a fresh proxy per cold run, the warm proxy, and PostgreSQL (%d runs, after one untimed run).\n\n", len(g.times[exact]))
	fmt.Fprintln(w, "| proxy-cold | proxy-warm | exact | exact / cold | exact / warm |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	spread := func(ds []time.Duration) string {
		s := slices.Clone(ds)
		slices.Sort(s)
		return benchkit.Ms(med(ds)) + " (" + benchkit.Ms(s[0]) + "–" + benchkit.Ms(s[len(s)-1]) + ")"
	}
	ec, ew := float64(med(g.times[exact]))/float64(med(g.times[cold])), float64(med(g.times[exact]))/float64(med(g.times[warm]))
	fmt.Fprintf(w, "| %s | %s | %s | %.1f× | %.0f× |\n\n", spread(g.times[cold]), spread(g.times[warm]), spread(g.times[exact]), ec, ew)
	same := "the same cells as PostgreSQL's answer"
	if !g.sameCells {
		same = "NOT the same cells as PostgreSQL's answer"
	}
	largest := ""
	if g.maxRelErr != "" {
		largest = " (largest stated relative error " + g.maxRelErr + " at 95 %)"
	}
	fmt.Fprintf(w, "%d cells: %s cell(s) estimated%s, %s counted exactly by PostgreSQL, as the NOTICE says; %s; the answers are %s (median) and %s (worst) from the exact counts.\n",
		g.cells, g.estimated, largest, g.counted, same, percentOf(g.median), percentOf(g.worst))
}

func percentOf(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", 100*f), "0"), ".") + " %"
}
