// Command thetaaccuracy measures how well the proxy's Theta-sketch answers
// to count(*) of A INTERSECT B and A EXCEPT B hold up, on generated sets
// with a known overlap, and checks the stated intervals those answers are
// refused by.
//
// Usage:
//
//	go run ./scripts/thetaaccuracy          # or: make accuracy-theta
//	go run ./scripts/thetaaccuracy -trials 100 -jaccard 0.1,0.01
//
// For each operation and each Jaccard index J (-jaccard), every trial
// draws |A ∪ B| (-union) distinct int64 values (SplitMix64, seeded per
// operation, J and trial from -seed), the first J·|A ∪ B| of them in both
// sets and the rest split evenly between A only and B only, so |A| = |B|.
// Each set is added with AddInt64 to one sketch of lg_k -lgk and, as the
// proxy's rollups hold it, to -parts sketches (value i in part i mod
// parts) that ThetaUnion unites. The united sketches are measured: the set
// operation's Estimate, its stated interval [LowerBound(2), UpperBound(2)]
// and its relative error as exec's Overlap.RelErr computes it,
// which the proxy refuses an answer by when it is over
// pgsketch.max_overlap_error (-max-error, default the proxy's).
//
// Per operation and J it prints a Markdown row: the share of trials whose
// exact answer lies in the stated interval (before any refusal; a row
// fails below 93 %), the same for the unsplit sketches, the median and
// 95th percentile of |estimate − exact| / exact, the share answered, and
// the trials where the refusal disagrees with the relative error computed
// here from the stated interval alone (a row fails unless there are none).
// Then, per operation, the lowest J with at least half the trials answered.
// It exits with status 1 if a row fails. Trials run on all CPUs and are
// reduced in trial order, so the output does not depend on the number of
// CPUs.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/exec"
	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/sketch"
)

// minCoverage is the share of trials whose exact answer must lie in the
// stated 2-standard-deviation interval (nominally about 95.4 %).
const minCoverage = 0.93

// answeredShare is the share of trials answered that the summary looks for.
const answeredShare = 0.5

type options struct {
	jaccard  []float64
	trials   int
	seed     uint64
	union    int
	lgK      int
	parts    int
	maxError float64
	workers  int
}

// op is a set operation the proxy answers from Theta sketches.
type op int

const (
	intersect op = iota
	except
)

var ops = []op{intersect, except}

func (o op) String() string {
	if o == intersect {
		return "INTERSECT"
	}
	return "EXCEPT"
}

var errFailed = errors.New("some rows failed")

func main() {
	benchkit.Exit("thetaaccuracy", run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, out, logw io.Writer) error {
	o, err := parseFlags(args, logw)
	if err != nil {
		return err
	}
	start := time.Now()
	rows, err := measure(o, logw)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	cmd := strings.Join(append([]string{"go run ./scripts/thetaaccuracy"}, args...), " ")
	fmt.Fprint(out, render(rows, o, cmd, elapsed))
	for _, r := range rows {
		if !r.pass() {
			return errFailed
		}
	}
	return nil
}

func parseFlags(args []string, logw io.Writer) (options, error) {
	fs := flag.NewFlagSet("thetaaccuracy", flag.ContinueOnError)
	fs.SetOutput(logw)
	jaccard := fs.String("jaccard", "0.5,0.2,0.1,0.05,0.02,0.01,0.005,0.002,0.001", "Jaccard indexes |A ∩ B| / |A ∪ B| to measure, comma-separated")
	trials := fs.Int("trials", 500, "trials per operation and Jaccard index")
	seed := fs.Uint64("seed", 1, "base seed of the generated values")
	union := fs.Int("union", 100_000, "|A ∪ B|")
	lgK := fs.Int("lgk", sketch.DefaultThetaLgK, "lg_k of the sketches")
	parts := fs.Int("parts", 30, "parts each set is split into, one sketch each, united with ThetaUnion")
	maxError := fs.Float64("max-error", exec.DefaultMaxOverlapError, "pgsketch.max_overlap_error: the largest relative error answered")
	workers := fs.Int("workers", runtime.NumCPU(), "parallel workers")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := options{trials: *trials, seed: *seed, union: *union, lgK: *lgK, parts: *parts, maxError: *maxError, workers: max(1, *workers)}
	if _, err := sketch.NewTheta(o.lgK); err != nil {
		return o, fmt.Errorf("-lgk: %w", err)
	}
	if o.trials < 1 || o.parts < 1 || o.maxError <= 0 {
		return o, errors.New("-trials and -parts must be at least 1, -max-error above 0")
	}
	for _, s := range strings.Split(*jaccard, ",") {
		j, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return o, fmt.Errorf("-jaccard: %w", err)
		}
		if common, side := sizes(j, o.union); !(j > 0 && j < 1) || common < 1 || side < 1 {
			return o, fmt.Errorf("-jaccard %v with -union %d: A ∩ B and A \\ B must both be non-empty", j, o.union)
		}
		o.jaccard = append(o.jaccard, j)
	}
	return o, nil
}

// sizes returns |A ∩ B| and |A \ B| = |B \ A| for Jaccard index j and
// |A ∪ B| = union: the intersection is rounded, and made one larger if
// that leaves an odd number to split between A and B.
func sizes(j float64, union int) (common, side int) {
	common = int(math.Round(j * float64(union)))
	if (union-common)%2 != 0 {
		common++
	}
	return common, (union - common) / 2
}

// exact is the true answer of o on sets of these sizes.
func (o op) exact(common, side int) int {
	if o == intersect {
		return common
	}
	return side
}

// outcome is what one trial measured.
type outcome struct {
	exact, est, lower, upper float64
	relErr                   float64 // exec.Overlap.RelErr
	coveredUnsplit           bool
	mismatch                 bool // the refusal disagrees with statedRelErr
}

func (t outcome) covered() bool   { return t.lower <= t.exact && t.exact <= t.upper }
func (t outcome) absErr() float64 { return math.Abs(t.est-t.exact) / t.exact }

// validInterval reports whether the stated interval is finite and holds
// the estimate.
func (t outcome) validInterval() bool {
	return !math.IsNaN(t.lower+t.upper) && !math.IsInf(t.upper, 0) && t.lower <= t.est && t.est <= t.upper
}

// measure runs every trial of every operation and Jaccard index, spread
// over the workers, and summarizes them in rows (operation-major).
func measure(o options, logw io.Writer) ([]row, error) {
	nLevels := len(ops) * len(o.jaccard)
	total := nLevels * o.trials
	results := make([]outcome, total)
	start := time.Now()
	err := benchkit.Parallel(o.workers, total, func() func(int) error {
		var buf []int64
		return func(i int) error {
			lv, t := i/o.trials, i%o.trials
			p, j := ops[lv/len(o.jaccard)], o.jaccard[lv%len(o.jaccard)]
			var err error
			results[i], buf, err = trial(o, p, j, t, buf)
			return err
		}
	}, func(d int) {
		if d%max(1, total/10) == 0 {
			fmt.Fprintf(logw, "%d/%d trials, %v\n", d, total, time.Since(start).Round(100*time.Millisecond))
		}
	})
	if err != nil {
		return nil, err
	}
	rows := make([]row, nLevels)
	for lv := range rows {
		p, j := ops[lv/len(o.jaccard)], o.jaccard[lv%len(o.jaccard)]
		rows[lv] = summarize(p, j, o, results[lv*o.trials:(lv+1)*o.trials])
	}
	return rows, nil
}

// trial generates one pair of sets, sketches them and measures p on the
// united sketches. buf is scratch space for the values, returned for reuse.
func trial(o options, p op, j float64, t int, buf []int64) (outcome, []int64, error) {
	common, side := sizes(j, o.union)
	rng := benchkit.SplitMix64{State: mix(o.seed, uint64(p), math.Float64bits(j), uint64(t))}
	buf = slices.Grow(buf[:0], common+2*side)
	for range common + 2*side {
		buf = append(buf, int64(rng.Next()))
	}
	inter, onlyA, onlyB := buf[:common], buf[common:common+side], buf[common+side:]
	wholeA, unitedA, err := build(o.lgK, o.parts, inter, onlyA)
	if err != nil {
		return outcome{}, buf, err
	}
	wholeB, unitedB, err := build(o.lgK, o.parts, inter, onlyB)
	if err != nil {
		return outcome{}, buf, err
	}
	exact := float64(p.exact(common, side))
	res, err := apply(p, unitedA, unitedB)
	if err != nil {
		return outcome{}, buf, err
	}
	unsplit, err := apply(p, wholeA, wholeB)
	if err != nil {
		return outcome{}, buf, err
	}
	ov := exec.Overlap{Estimate: res.Estimate(), Lower: res.LowerBound(2), Upper: res.UpperBound(2),
		Arms: [2]float64{unitedA.Estimate(), unitedB.Estimate()}}
	r := outcome{exact: exact, est: ov.Estimate, lower: ov.Lower, upper: ov.Upper, relErr: ov.RelErr()}
	refused := r.relErr > o.maxError // as the proxy decides
	r.mismatch = refused != (statedRelErr(r.est, r.lower, r.upper) > o.maxError)
	r.coveredUnsplit = unsplit.LowerBound(2) <= exact && exact <= unsplit.UpperBound(2)
	return r, buf, nil
}

// build adds the values of chunks (in order) to one sketch and to parts
// sketches, value i to part i mod parts, and returns the one sketch and
// the union of the parts.
func build(lgK, parts int, chunks ...[]int64) (whole, united *sketch.CompactTheta, err error) {
	w, err := sketch.NewTheta(lgK)
	if err != nil {
		return nil, nil, err
	}
	ps := make([]*sketch.Theta, parts)
	for k := range ps {
		if ps[k], err = sketch.NewTheta(lgK); err != nil {
			return nil, nil, err
		}
	}
	i := 0
	for _, c := range chunks {
		for _, v := range c {
			w.AddInt64(v)
			ps[i%parts].AddInt64(v)
			i++
		}
	}
	cs := make([]*sketch.CompactTheta, parts)
	for k, s := range ps {
		cs[k] = s.Compact()
	}
	united, err = sketch.ThetaUnion(lgK, cs...)
	return w.Compact(), united, err
}

func apply(p op, a, b *sketch.CompactTheta) (*sketch.CompactTheta, error) {
	if p == intersect {
		return sketch.ThetaIntersect(a, b)
	}
	return sketch.ThetaANotB(a, b)
}

// statedRelErr is the relative error of an answer as its stated interval
// gives it, written out here independently of exec.Overlap.RelErr: the
// wider side of [lower, upper] around est, over est; 0 for an interval of
// one point, +Inf for an estimate of 0 with a wider interval.
func statedRelErr(est, lower, upper float64) float64 {
	w := math.Max(upper-est, est-lower)
	switch {
	case upper == lower && lower == est:
		return 0
	case est == 0:
		return math.Inf(1)
	}
	return w / est
}

// mix folds words into one seed.
func mix(words ...uint64) uint64 {
	var r benchkit.SplitMix64
	for _, w := range words {
		r.State ^= w
		r.State = r.Next()
	}
	return r.State
}

// row is the summary of one operation at one Jaccard index.
type row struct {
	op                      op
	jaccard                 float64
	setSize, exact          int
	trials                  int
	covered, coveredUnsplit int
	answered                int
	mismatches, badInterval int
	medianErr, p95Err       float64 // |est − exact| / exact
	medianRelErr            float64 // stated
}

func summarize(p op, j float64, o options, rs []outcome) row {
	common, side := sizes(j, o.union)
	r := row{op: p, jaccard: j, setSize: common + side, exact: p.exact(common, side), trials: len(rs)}
	errs := make([]float64, len(rs))
	rel := make([]float64, len(rs))
	for i, t := range rs {
		errs[i], rel[i] = t.absErr(), t.relErr
		r.covered += b2i(t.covered())
		r.coveredUnsplit += b2i(t.coveredUnsplit)
		r.answered += b2i(t.relErr <= o.maxError)
		r.mismatches += b2i(t.mismatch)
		r.badInterval += b2i(!t.validInterval())
	}
	r.medianErr, r.p95Err = benchkit.Percentile(errs, 50), benchkit.Percentile(errs, 95)
	r.medianRelErr = benchkit.Percentile(rel, 50)
	return r
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (r row) share(n int) float64 { return float64(n) / float64(r.trials) }

func (r row) pass() bool {
	return r.share(r.covered) >= minCoverage && r.mismatches == 0 && r.badInterval == 0
}

func render(rows []row, o options, cmd string, elapsed time.Duration) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Theta set-operation accuracy\n\n")
	p("Generated by `%s` in %v with %d workers (%d CPUs): %d trials per row, |A ∪ B| = %d, lg_k %d, each set's sketch the ThetaUnion of %d parts, max_overlap_error %.2f, base seed %d.\n\n",
		cmd, elapsed.Round(100*time.Millisecond), o.workers, runtime.NumCPU(), o.trials, o.union, o.lgK, o.parts, o.maxError, o.seed)
	p("| op | Jaccard | \\|A\\| = \\|B\\| | exact | in 2-SD interval | unsplit: in interval | median \\|err\\| | p95 \\|err\\| | median stated rel. err | answered (≤ %.2f) | refusal mismatches | result |\n", o.maxError)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		verdict := "PASS"
		if !r.pass() {
			verdict = "**FAIL**"
		}
		if r.badInterval > 0 {
			verdict += fmt.Sprintf(" (%d invalid intervals)", r.badInterval)
		}
		p("| %s | %g | %d | %d | %.1f %% | %.1f %% | %.2f %% | %.2f %% | %.2f %% | %.1f %% | %d | %s |\n",
			r.op, r.jaccard, r.setSize, r.exact, 100*r.share(r.covered), 100*r.share(r.coveredUnsplit),
			100*r.medianErr, 100*r.p95Err, 100*r.medianRelErr, 100*r.share(r.answered), r.mismatches, verdict)
	}
	p("\n")
	for _, op := range ops {
		p("- %s: %s\n", op, lowestAnswered(rows, op))
	}
	return b.String()
}

// lowestAnswered describes the lowest Jaccard index at which op's answer
// is given in at least answeredShare of the trials.
func lowestAnswered(rows []row, op op) string {
	best := math.Inf(1)
	for _, r := range rows {
		if r.op == op && r.share(r.answered) >= answeredShare {
			best = min(best, r.jaccard)
		}
	}
	if math.IsInf(best, 1) {
		return fmt.Sprintf("no Jaccard index measured has at least %.0f %% of trials answered", 100*answeredShare)
	}
	return fmt.Sprintf("lowest Jaccard index with at least %.0f %% of trials answered: %g", 100*answeredShare, best)
}
