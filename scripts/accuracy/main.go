// Command accuracy measures the bias and relative standard error of the
// sketch package's estimator (Ertl's improved raw estimator) and of the
// postgresql-hll extension's classic estimator on the same sketches, for
// cardinalities from 1 to 10^7, and writes docs/accuracy.md and
// docs/accuracy.png.
//
// Usage:
//
//	go run ./scripts/accuracy            # full run, writes docs/
//	go run ./scripts/accuracy -quick     # smoke run, writes a temp dir
//
// Each trial adds distinct pseudo-random 64-bit hashes (SplitMix64, seeded
// per configuration and trial) one by one to one sketch and measures both
// estimators at every checkpoint, so a trial costs one pass to the largest
// cardinality. Trials run in parallel on all CPUs; results are reduced in
// trial order, so the output does not depend on the number of CPUs.
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/sketch"
)

// config is one sketch configuration and its targets.
type config struct {
	log2m, regwidth int
	trials          int
	maxBias         float64 // |bias| target, relative
}

// Targets shared by every configuration.
const (
	rseFactor = 1.08 // RSE must be at most rseFactor · 1.04/√m
	perDecade = 10   // log-spaced checkpoints per decade
)

func main() {
	benchkit.Exit("accuracy", run(os.Args[1:], os.Stderr))
}

var errTargets = errors.New("targets missed")

func run(args []string, logw io.Writer) error {
	o, err := parseFlags(args, logw)
	if err != nil {
		return err
	}
	configs := []config{
		{log2m: 10, regwidth: 5, trials: o.trials[0], maxBias: 0.005},
		{log2m: 12, regwidth: 5, trials: o.trials[1], maxBias: 0.0025},
		{log2m: 14, regwidth: 5, trials: o.trials[2], maxBias: 0.0025},
	}
	start := time.Now()
	var results []*result
	for _, c := range configs {
		r, err := simulate(c, o, logw)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	if err := writeReport(results, o, args, time.Since(start), logw); err != nil {
		return err
	}
	for _, r := range results {
		if !r.pass() {
			if o.quick {
				fmt.Fprintln(logw, "some targets missed; expected with the few trials of -quick")
				return nil
			}
			return errTargets
		}
	}
	return nil
}

// proxySections heads the part of accuracy.md that this program keeps
// from the file it replaces.
const proxySections = "## Through the proxy"

// writeReport writes accuracy.md and accuracy.png to the output directory.
func writeReport(results []*result, o options, args []string, elapsed time.Duration, logw io.Writer) error {
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	cmd := "go run ./scripts/accuracy"
	if len(args) > 0 {
		cmd += " " + strings.Join(args, " ")
	}
	md := renderMarkdown(results, o, cmd, elapsed)
	// The sections measured through the proxy (by a test, not by this
	// program) stay as they are.
	if old, err := os.ReadFile(filepath.Join(o.outDir, "accuracy.md")); err == nil {
		if i := strings.Index(string(old), "\n"+proxySections); i >= 0 {
			md = strings.TrimRight(md, "\n") + "\n" + string(old[i:])
		}
	}
	if err := os.WriteFile(filepath.Join(o.outDir, "accuracy.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if err := writePlot(filepath.Join(o.outDir, "accuracy.png"), results); err != nil {
		return err
	}
	fmt.Fprintf(logw, "wrote %s and %s in %v\n", filepath.Join(o.outDir, "accuracy.md"), filepath.Join(o.outDir, "accuracy.png"), elapsed.Round(time.Second))
	return nil
}

// checkpoints returns the cardinalities at which a trial is measured:
// round(10^(k/perDecade)) up to maxN, deduplicated, plus both sides of the
// EXPLICIT cutoff.
func checkpoints(maxN, explicitLimit int) []int {
	var ns []int
	for k := 0; ; k++ {
		n := int(math.Round(math.Pow(10, float64(k)/perDecade)))
		if n > maxN {
			break
		}
		ns = append(ns, n)
	}
	if explicitLimit+1 <= maxN {
		ns = append(ns, explicitLimit, explicitLimit+1)
	}
	if ns[len(ns)-1] != maxN {
		ns = append(ns, maxN)
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

func trialSeed(base uint64, log2m, trial int) uint64 {
	r := benchkit.SplitMix64{State: base ^ uint64(log2m)<<48 ^ uint64(trial)}
	return r.Next()
}

// result holds the relative errors of every trial at every checkpoint.
type result struct {
	cfg      config
	ns       []int
	limit    int       // EXPLICIT cutoff
	ours     []float64 // [trial*len(ns)+k] = estimate/n - 1
	classic  []float64
	explicit []bool // per checkpoint: the sketch was EXPLICIT (same in every trial)
	inexact  []int  // per checkpoint: trials where an EXPLICIT estimate was not n
	stats    []rowStats
}

type rowStats struct {
	oursBias, oursRSE, classicBias, classicRSE float64
}

func explicitLimit(log2m, regwidth int) int {
	return ((regwidth << log2m) + 7) / 8 / 8
}

// simulate runs configuration c's trials on o.workers goroutines and
// computes the statistics of every checkpoint.
func simulate(c config, o options, logw io.Writer) (*result, error) {
	r := &result{cfg: c, limit: explicitLimit(c.log2m, c.regwidth)}
	r.ns = checkpoints(o.maxN, r.limit)
	K := len(r.ns)
	r.ours = make([]float64, c.trials*K)
	r.classic = make([]float64, c.trials*K)
	r.explicit = make([]bool, K)
	counts := &trialCounts{inexact: make([]atomic.Int64, K)}
	start := time.Now()
	step := max(1, c.trials/10)
	err := benchkit.Parallel(o.workers, c.trials, func() func(int) error {
		s := &scratch{regs: make([]uint8, 1<<c.log2m)}
		return func(trial int) error { return r.trial(trial, o.seed, s, counts) }
	}, func(d int) {
		if d%step == 0 || d == c.trials {
			fmt.Fprintf(logw, "log2m %d: %d/%d trials, %v\n", c.log2m, d, c.trials, time.Since(start).Round(100*time.Millisecond))
		}
	})
	if err != nil {
		return nil, err
	}
	if counts.typeMismatch.Load() {
		return nil, fmt.Errorf("log2m %d: a sketch was EXPLICIT where the cutoff %d says it should not be, or the reverse", c.log2m, r.limit)
	}
	r.inexact = make([]int, K)
	for k := range counts.inexact {
		r.inexact[k] = int(counts.inexact[k].Load())
	}
	r.summarize()
	return r, nil
}

// scratch is a worker's space, reused from trial to trial.
type scratch struct {
	buf  []byte
	regs []uint8 // 2^log2m registers
}

// trialCounts is what the workers count together.
type trialCounts struct {
	inexact      []atomic.Int64 // per checkpoint: trials where an EXPLICIT estimate was not n
	typeMismatch atomic.Bool    // a sketch was EXPLICIT on the wrong side of the cutoff
}

// trial adds trial's distinct hashes one by one to one sketch and
// measures both estimators at every checkpoint.
func (r *result) trial(trial int, seed uint64, s *scratch, counts *trialCounts) error {
	c, K := r.cfg, len(r.ns)
	h, err := sketch.NewHLL(c.log2m, c.regwidth)
	if err != nil {
		return err
	}
	rng := benchkit.SplitMix64{State: trialSeed(seed, c.log2m, trial)}
	added := 0
	for k, n := range r.ns {
		for ; added < n; added++ {
			h.AddHash(rng.Next())
		}
		if s.buf, err = h.AppendBinary(s.buf[:0]); err != nil {
			return err
		}
		est := h.Estimate()
		cl, isExplicit, err := classicEstimate(s.buf, s.regs)
		if err != nil {
			return err
		}
		if isExplicit != (n <= r.limit) {
			counts.typeMismatch.Store(true)
		}
		if isExplicit && est != float64(n) {
			counts.inexact[k].Add(1)
		}
		if trial == 0 {
			r.explicit[k] = isExplicit
		}
		r.ours[trial*K+k] = est/float64(n) - 1
		r.classic[trial*K+k] = cl/float64(n) - 1
	}
	return nil
}

// summarize computes the bias and RSE of both estimators at every
// checkpoint, reducing the trials in order.
func (r *result) summarize() {
	K := len(r.ns)
	r.stats = make([]rowStats, K)
	for k := range r.ns {
		var so, so2, sc, sc2 float64
		for t := range r.cfg.trials {
			e := r.ours[t*K+k]
			so += e
			so2 += e * e
			e = r.classic[t*K+k]
			sc += e
			sc2 += e * e
		}
		nt := float64(r.cfg.trials)
		r.stats[k] = rowStats{oursBias: so / nt, oursRSE: math.Sqrt(so2 / nt), classicBias: sc / nt, classicRSE: math.Sqrt(sc2 / nt)}
	}
}

// stdErr is the nominal relative standard error 1.04/√m.
func (r *result) stdErr() float64 { return 1.04 / math.Sqrt(float64(int(1)<<r.cfg.log2m)) }

// rowPass reports whether checkpoint k meets the targets, and why not.
func (r *result) rowPass(k int) (bool, string) {
	var why []string
	s := r.stats[k]
	if r.explicit[k] {
		if r.inexact[k] > 0 {
			why = append(why, fmt.Sprintf("EXPLICIT inexact in %d trials", r.inexact[k]))
		}
	} else {
		if s.oursRSE > rseFactor*r.stdErr() {
			why = append(why, "RSE")
		}
		if math.Abs(s.oursBias) > r.cfg.maxBias {
			why = append(why, "bias")
		}
	}
	return len(why) == 0, strings.Join(why, ", ")
}

func (r *result) pass() bool {
	for k := range r.ns {
		if ok, _ := r.rowPass(k); !ok {
			return false
		}
	}
	return true
}

// worst returns the largest RSE ratio and |bias| of an estimator over the
// checkpoints where the sketch uses registers, with the cardinality where
// each occurs.
func (r *result) worst(classic bool) (ratio float64, ratioN int, bias float64, biasN int) {
	for k, n := range r.ns {
		if r.explicit[k] {
			continue
		}
		s := r.stats[k]
		rse, b := s.oursRSE, s.oursBias
		if classic {
			rse, b = s.classicRSE, s.classicBias
		}
		if q := rse / r.stdErr(); q > ratio {
			ratio, ratioN = q, n
		}
		if math.Abs(b) > math.Abs(bias) {
			bias, biasN = b, n
		}
	}
	return
}

// classicEstimate decodes serialized sketch bytes (independently of the
// sketch package) and applies the extension's multiset_card: the HyperLogLog
// raw estimate with the alpha·m² constant, linear counting while the raw
// estimate is below 5m/2 and a register is zero, and the large-range
// correction above 2^L/30 with L = 2^regwidth − 2 + log2m. regs is scratch
// space of 2^log2m bytes.
func classicEstimate(b []byte, regs []uint8) (est float64, isExplicit bool, err error) {
	if len(b) < 3 || b[0]>>4 != 1 {
		return 0, false, fmt.Errorf("bad sketch header %x", b[:min(3, len(b))])
	}
	regwidth := int(b[1]>>5) + 1
	log2m := int(b[1] & 0x1f)
	m := 1 << log2m
	if len(regs) != m {
		return 0, false, fmt.Errorf("scratch of %d registers for log2m %d", len(regs), log2m)
	}
	data := b[3:]
	switch b[0] & 0x0f {
	case 1:
		return 0, false, nil
	case 2:
		return float64(len(data) / 8), true, nil
	case 3:
		clear(regs)
		br := bitReader{data: data}
		chunk := log2m + regwidth
		for range 8 * len(data) / chunk {
			w := br.read(chunk)
			if w == 0 {
				break // a real word has a value >= 1: this is padding
			}
			regs[w>>regwidth] = uint8(w & (1<<regwidth - 1))
		}
	case 4:
		br := bitReader{data: data}
		for i := range regs {
			regs[i] = uint8(br.read(regwidth))
		}
	default:
		return 0, false, fmt.Errorf("unexpected sketch type %d", b[0]&0x0f)
	}

	var sum float64
	zeros := 0
	for _, r := range regs {
		sum += 1 / float64(uint64(1)<<r)
		if r == 0 {
			zeros++
		}
	}
	mf := float64(m)
	var alphaMM float64
	switch m {
	case 16:
		alphaMM = 0.673 * mf * mf
	case 32:
		alphaMM = 0.697 * mf * mf
	case 64:
		alphaMM = 0.709 * mf * mf
	default:
		alphaMM = 0.7213 / (1 + 1.079/mf) * mf * mf
	}
	raw := alphaMM / sum
	twoToL := math.Ldexp(1, (1<<regwidth)-2+log2m)
	switch {
	case zeros != 0 && raw < 5*mf/2:
		return mf * math.Log(mf/float64(zeros)), false, nil
	case raw <= twoToL/30:
		return raw, false, nil
	default:
		return -twoToL * math.Log(1-raw/twoToL), false, nil
	}
}

// bitReader reads MSB-first bit fields of up to 32 bits.
type bitReader struct {
	data  []byte
	pos   int
	acc   uint64
	nbits int
}

func (r *bitReader) read(n int) uint64 {
	for r.nbits < n {
		r.acc = r.acc<<8 | uint64(r.data[r.pos])
		r.pos++
		r.nbits += 8
	}
	r.nbits -= n
	return r.acc >> r.nbits & (1<<n - 1)
}

func renderMarkdown(results []*result, o options, cmd string, elapsed time.Duration) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Estimator accuracy\n\n")
	p("Generated by `%s`", cmd)
	if cmd == "go run ./scripts/accuracy" {
		p(" (`make accuracy`)")
	}
	p(" in %v with %d workers (%s/%s, %d CPUs). ", elapsed.Round(time.Second), o.workers, runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	p("Re-running it reproduces the numbers exactly: the hash streams are seeded (base seed %d) and results are reduced in trial order.\n\n", o.seed)
	if o.quick {
		p("**This is a -quick smoke run: too few trials and too small a range for the targets to be meaningful.**\n\n")
	}
	p("![RSE and bias against n](accuracy.png)\n\n")

	p("## Method\n\n")
	p("- Sketches: `sketch.NewHLL(log2m, 5)` (automatic EXPLICIT cutoff, sparse on), as pgsketch writes them.\n")
	p("- Each trial adds distinct pseudo-random 64-bit hashes (SplitMix64, a bijection of a non-repeating state, so the true count n is the number added) one at a time to one sketch, and measures at each checkpoint n: %d log-spaced values per decade from 1 to %d, plus both sides of the EXPLICIT cutoff.\n", perDecade, o.maxN)
	p("- **Ours**: `HLL.Estimate`, Otmar Ertl's improved raw estimator (2017) with q = 2^regwidth − 2, no bias tables, no linear-counting switch; exact count while EXPLICIT.\n")
	p("- **Classic**: the postgresql-hll extension's `multiset_card` (src/hll.c) on the same sketch bytes: α·m²/Σ2^−r, linear counting m·ln(m/V) while that is below 5m/2 and V > 0 registers are zero, large-range correction −2^L·ln(1 − E/2^L) above 2^L/30 with L = 2^regwidth − 2 + log2m; exact count while EXPLICIT. Decoded from the serialized bytes by this program, independently of the sketch package.\n")
	p("- Relative error e = estimate/n − 1. **Bias** = mean of e. **RSE** = √(mean of e²), the relative root-mean-square error (it includes the bias).\n")
	p("- Targets at every n: RSE ≤ %.2f·1.04/√m; |bias| ≤ 0.5 %% at log2m 10 and ≤ 0.25 %% at log2m 12 and 14; zero error while EXPLICIT. Only our estimator is held to them; the classic one is shown for comparison.\n", rseFactor)
	p("- The sampling error of these statistics is about RSE/√trials for the bias and RSE/√(2·trials) for the RSE.\n\n")

	p("## Summary\n\n")
	p("| log2m | m | trials | 1.04/√m | EXPLICIT up to | ours: worst RSE / (1.04/√m) | ours: worst \\|bias\\| | classic: worst RSE / (1.04/√m) | classic: worst \\|bias\\| | targets |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range results {
		ratio, ratioN, bias, biasN := r.worst(false)
		cratio, cratioN, cbias, cbiasN := r.worst(true)
		verdict := "pass"
		if !r.pass() {
			verdict = "**FAIL**"
		}
		p("| %d | %d | %d | %.3f %% | %d | %.3f (n = %d) | %.3f %% (n = %d) | %.3f (n = %d) | %.3f %% (n = %d) | %s |\n",
			r.cfg.log2m, 1<<r.cfg.log2m, r.cfg.trials, 100*r.stdErr(), r.limit,
			ratio, ratioN, 100*math.Abs(bias), biasN, cratio, cratioN, 100*math.Abs(cbias), cbiasN, verdict)
	}
	p("\n")

	for _, r := range results {
		p("## log2m %d (m = %d, regwidth %d, %d trials)\n\n", r.cfg.log2m, 1<<r.cfg.log2m, r.cfg.regwidth, r.cfg.trials)
		p("Targets: RSE ≤ %.3f %%, |bias| ≤ %.2f %%.\n\n", 100*rseFactor*r.stdErr(), 100*r.cfg.maxBias)
		p("| n | state | ours bias | ours RSE | ours RSE / (1.04/√m) | classic bias | classic RSE | classic RSE / (1.04/√m) | targets |\n")
		p("|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
		for k, n := range r.ns {
			s := r.stats[k]
			state := "registers"
			if r.explicit[k] {
				state = "EXPLICIT"
			}
			ok, why := r.rowPass(k)
			verdict := "pass"
			if !ok {
				verdict = "**FAIL**: " + why
			}
			p("| %d | %s | %+.3f %% | %.3f %% | %.3f | %+.3f %% | %.3f %% | %.3f | %s |\n",
				n, state, 100*s.oursBias, 100*s.oursRSE, s.oursRSE/r.stdErr(),
				100*s.classicBias, 100*s.classicRSE, s.classicRSE/r.stdErr(), verdict)
		}
		p("\n")
	}
	return b.String()
}
