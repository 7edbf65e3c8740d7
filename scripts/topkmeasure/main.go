// Command topkmeasure measures what the frequent-items summary (sketch.Freq)
// and the Count-Min sketch (sketch.CountMin) each contribute to an exact
// top-k over daily rollups: how many candidates the summaries leave for
// an exact recount, whether those provably hold the true top k, how
// tight the bounds are, and what the summaries cost in bytes and merge
// time.
//
// Usage:
//
//	go run ./scripts/topkmeasure
//	go run ./scripts/topkmeasure -days 30 -events 22000 -m 64,1024
//
// Events are drawn like the demo's events table (internal/demodata):
// user_id = floor(users · u³) for uniform u (PCG, seeded by -seed), the
// user id added as 8 big-endian bytes; -events per day over -days days.
// Each day gets one Freq per capacity in -m and one CountMin (-eps,
// -delta), each marshaled. For each window of -windows (the first D days)
// and capacity, the D daily Freqs are decoded and merged, and so are the
// D CountMins, and the result is compared with the exact counts of those
// days:
//
//   - bytes/day: mean size of a marshaled daily summary;
//   - decode, merge: time to decode the D summaries, then to merge them;
//   - MaxError of the merged summary, and N/(m+1) for reference;
//   - cand: Candidates(k), the items whose upper bound reaches the k-th
//     largest lower bound, and whether the list is complete (no untracked
//     item can be in the top k); "top k in" checks that it holds every item
//     of the true top k (ties included). "MG cand" is the same test with
//     the bounds of plain Misra–Gries, lower = upper − MaxError, which the
//     summary's per-item errors improve on;
//   - width: mean and largest upper − lower of the Top(k) items, with Freq
//     alone and with Freq+CM, where the upper bound is min(Freq upper,
//     CountMin estimate) (both are upper bounds, so is the minimum);
//   - cand+CM: candidates under those tightened upper bounds.
//
// The program prints Markdown tables and exits with status 1 if a complete
// candidate list misses an item of the true top k.
package main

import (
	"cmp"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
	"github.com/pgsketch/pgsketch/sketch"
)

type options struct {
	days, k       int
	events, users int64
	seed          uint64
	capacities    []int
	windows       []int
	eps, delta    float64
	cmd           string
	reps          int
}

var errFailed = errors.New("a complete candidate list missed a top-k item")

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err == nil {
		err = run(o, os.Stdout, os.Stderr)
	}
	benchkit.Exit("topkmeasure", err)
}

// run generates the days, measures every window and capacity, and prints
// the tables to out.
func run(o options, out, logw io.Writer) error {
	start := time.Now()
	d, err := generate(o, logw)
	if err != nil {
		return err
	}
	rows, cms, err := measure(o, d)
	if err != nil {
		return err
	}
	fmt.Fprint(out, render(o, d, rows, cms, time.Since(start)))
	for _, r := range rows {
		if r.complete && !r.holdsTop {
			return errFailed
		}
	}
	return nil
}

func parseFlags(args []string, logw io.Writer) (options, error) {
	fs := flag.NewFlagSet("topkmeasure", flag.ContinueOnError)
	fs.SetOutput(logw)
	o := options{cmd: "go run ./scripts/topkmeasure " + strings.Join(args, " ")}
	fs.IntVar(&o.days, "days", 90, "days of events")
	fs.Int64Var(&o.events, "events", 220_000, "events per day")
	fs.Int64Var(&o.users, "users", 2_000_000, "user_id = floor(users · u³)")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed")
	fs.IntVar(&o.k, "k", 10, "the k of top k")
	fs.Float64Var(&o.eps, "eps", 0.001, "Count-Min ε")
	fs.Float64Var(&o.delta, "delta", 0.01, "Count-Min δ")
	fs.IntVar(&o.reps, "reps", 3, "timing repetitions (the fastest is reported)")
	m := fs.String("m", "64,256,1024,4096", "Freq capacities")
	w := fs.String("windows", "7,30,90", "windows: the first D days")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.capacities, err = ints(*m); err != nil {
		return o, err
	}
	if o.windows, err = ints(*w); err != nil {
		return o, err
	}
	for _, d := range o.windows {
		if d < 1 || d > o.days {
			return o, fmt.Errorf("window %d outside [1, %d]", d, o.days)
		}
	}
	if o.k < 1 || o.events < 1 || o.users < 1 || o.reps < 1 {
		return o, errors.New("-k, -events, -users and -reps must be positive")
	}
	return o, nil
}

func ints(s string) ([]int, error) {
	var xs []int
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		xs = append(xs, v)
	}
	return xs, nil
}

// data is what the days produced: the marshaled daily summaries and, for
// each window, the exact top k.
type data struct {
	freqs [][][]byte // [capacity index][day]
	cms   [][]byte   // [day]
	truth map[int]truth
}

// truth is the exact answer over a window: the k-th and (k+1)-th largest
// counts and the items with a count at least the k-th (the top k, ties
// included).
type truth struct {
	kth, next int64
	top       []uint64
	n         int64
}

func generate(o options, logw io.Writer) (*data, error) {
	r := rand.New(rand.NewPCG(o.seed, 0x746f706b))
	exact := make([]int64, o.users)
	d := &data{freqs: make([][][]byte, len(o.capacities)), truth: map[int]truth{}}
	for day := 1; day <= o.days; day++ {
		fs, cm, err := oneDay(o, r, exact)
		if err != nil {
			return nil, err
		}
		for i, f := range fs {
			b, err := f.MarshalBinary()
			if err != nil {
				return nil, err
			}
			d.freqs[i] = append(d.freqs[i], b)
		}
		b, err := cm.MarshalBinary()
		if err != nil {
			return nil, err
		}
		d.cms = append(d.cms, b)
		if slices.Contains(o.windows, day) {
			d.truth[day] = topOf(exact, o.k)
		}
		if day%10 == 0 {
			fmt.Fprintf(logw, "day %d/%d\n", day, o.days)
		}
	}
	return d, nil
}

func oneDay(o options, r *rand.Rand, exact []int64) ([]*sketch.Freq, *sketch.CountMin, error) {
	fs := make([]*sketch.Freq, len(o.capacities))
	for i, m := range o.capacities {
		f, err := sketch.NewFreq(m)
		if err != nil {
			return nil, nil, err
		}
		fs[i] = f
	}
	cm, err := sketch.NewCountMin(o.eps, o.delta)
	if err != nil {
		return nil, nil, err
	}
	var key [8]byte
	for range o.events {
		u := r.Float64()
		id := int64(float64(o.users) * u * u * u)
		exact[id]++
		binary.BigEndian.PutUint64(key[:], uint64(id))
		for _, f := range fs {
			if err := f.Add(key[:], 1); err != nil {
				return nil, nil, err
			}
		}
		if err := cm.Add(key[:], 1); err != nil {
			return nil, nil, err
		}
	}
	return fs, cm, nil
}

func topOf(exact []int64, k int) truth {
	counts := slices.Clone(exact)
	slices.SortFunc(counts, func(a, b int64) int { return cmp.Compare(b, a) })
	t := truth{kth: counts[min(k, len(counts))-1]}
	if k < len(counts) {
		t.next = counts[k]
	}
	for id, c := range exact {
		t.n += c
		if c >= t.kth && c > 0 {
			t.top = append(t.top, uint64(id))
		}
	}
	return t
}

// row is one window and capacity.
type row struct {
	days, m              int
	bytesPerDay          float64
	decode, merge        time.Duration
	maxErr, bound        int64
	cand, mgCand, cmCand int
	complete, holdsTop   bool
	width, cmWidth       int64 // mean over the Top(k) items
	widthMax, cmWidthMax int64
}

// cmRow is the merged Count-Min of one window.
type cmRow struct {
	days          int
	bytesPerDay   float64
	decode, merge time.Duration
	epsN          float64
}

func measure(o options, d *data) ([]row, []cmRow, error) {
	var rows []row
	var cms []cmRow
	for _, days := range o.windows {
		cm, cr, err := mergeCountMins(o, d, days)
		if err != nil {
			return nil, nil, err
		}
		cms = append(cms, cr)
		for i, m := range o.capacities {
			r, err := measureFreq(o, d.freqs[i][:days], cm, d.truth[days])
			if err != nil {
				return nil, nil, err
			}
			r.days, r.m = days, m
			r.bytesPerDay = meanLen(d.freqs[i])
			rows = append(rows, r)
		}
	}
	return rows, cms, nil
}

func meanLen(bs [][]byte) float64 {
	total := 0
	for _, b := range bs {
		total += len(b)
	}
	return float64(total) / float64(len(bs))
}

// best runs f reps times and returns the shortest duration and the last
// result.
func best[T any](reps int, f func() (T, error)) (T, time.Duration, error) {
	var v T
	fastest := time.Duration(math.MaxInt64)
	for range reps {
		start := time.Now()
		var err error
		if v, err = f(); err != nil {
			return v, 0, err
		}
		fastest = min(fastest, time.Since(start))
	}
	return v, fastest, nil
}

func decodeFreqs(bs [][]byte) ([]*sketch.Freq, error) {
	fs := make([]*sketch.Freq, len(bs))
	for i, b := range bs {
		fs[i] = new(sketch.Freq)
		if err := fs[i].UnmarshalBinary(b); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

func mergeFreqs(fs []*sketch.Freq) (*sketch.Freq, error) {
	acc, err := sketch.NewFreq(fs[0].Capacity())
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if err := acc.Merge(f); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

func measureFreq(o options, daily [][]byte, cm *sketch.CountMin, t truth) (row, error) {
	var r row
	fs, decode, err := best(o.reps, func() ([]*sketch.Freq, error) { return decodeFreqs(daily) })
	if err != nil {
		return r, err
	}
	f, merge, err := best(o.reps, func() (*sketch.Freq, error) { return mergeFreqs(fs) })
	if err != nil {
		return r, err
	}
	r.decode, r.merge = decode, merge
	r.maxErr, r.bound = f.MaxError(), f.N()/int64(f.Capacity()+1)
	cands, complete := f.Candidates(o.k)
	r.cand, r.complete = len(cands), complete
	r.holdsTop = holds(cands, t.top)
	items := f.Items()
	r.mgCand = candidates(items, o.k, func(it sketch.FreqItem) (int64, int64) {
		return it.Upper - r.maxErr, it.Upper
	})
	withCM := func(it sketch.FreqItem) (int64, int64) { return it.Lower, min(it.Upper, estimate(cm, it)) }
	r.cmCand = candidates(items, o.k, withCM)
	top := items[:min(o.k, len(items))]
	r.width, r.widthMax = widths(top, func(it sketch.FreqItem) (int64, int64) { return it.Lower, it.Upper })
	r.cmWidth, r.cmWidthMax = widths(top, withCM)
	return r, nil
}

func estimate(cm *sketch.CountMin, it sketch.FreqItem) int64 {
	if it.Null {
		return cm.EstimateNull()
	}
	return cm.Estimate(it.Item)
}

// candidates counts the items whose upper bound reaches the k-th largest
// lower bound, under the bounds that bounds gives.
func candidates(items []sketch.FreqItem, k int, bounds func(sketch.FreqItem) (int64, int64)) int {
	lowers := make([]int64, len(items))
	for i, it := range items {
		lowers[i], _ = bounds(it)
	}
	if len(lowers) < k {
		return len(items)
	}
	slices.SortFunc(lowers, func(a, b int64) int { return cmp.Compare(b, a) })
	l, n := lowers[k-1], 0
	for _, it := range items {
		if _, upper := bounds(it); upper >= l {
			n++
		}
	}
	return n
}

func widths(items []sketch.FreqItem, bounds func(sketch.FreqItem) (int64, int64)) (mean, largest int64) {
	if len(items) == 0 {
		return 0, 0
	}
	var sum int64
	for _, it := range items {
		lo, hi := bounds(it)
		sum += hi - lo
		largest = max(largest, hi-lo)
	}
	return sum / int64(len(items)), largest
}

func holds(cands []sketch.FreqItem, top []uint64) bool {
	in := map[uint64]bool{}
	for _, c := range cands {
		if !c.Null && len(c.Item) == 8 {
			in[binary.BigEndian.Uint64(c.Item)] = true
		}
	}
	for _, id := range top {
		if !in[id] {
			return false
		}
	}
	return true
}

func mergeCountMins(o options, d *data, days int) (*sketch.CountMin, cmRow, error) {
	cr := cmRow{days: days, bytesPerDay: meanLen(d.cms)}
	cs, decode, err := best(o.reps, func() ([]*sketch.CountMin, error) {
		cs := make([]*sketch.CountMin, days)
		for i, b := range d.cms[:days] {
			cs[i] = new(sketch.CountMin)
			if err := cs[i].UnmarshalBinary(b); err != nil {
				return nil, err
			}
		}
		return cs, nil
	})
	if err != nil {
		return nil, cr, err
	}
	cm, merge, err := best(o.reps, func() (*sketch.CountMin, error) {
		acc := cs[0].Clone()
		for _, c := range cs[1:] {
			if err := acc.Merge(c); err != nil {
				return nil, err
			}
		}
		return acc, nil
	})
	if err != nil {
		return nil, cr, err
	}
	cr.decode, cr.merge, cr.epsN = decode, merge, cm.Epsilon()*float64(cm.N())
	return cm, cr, nil
}

func render(o options, d *data, rows []row, cms []cmRow, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` (%d days × %d events, %d users, k = %d; %s)\n\n",
		strings.TrimSpace(o.cmd), o.days, o.events, o.users, o.k, elapsed.Round(time.Second))
	b.WriteString("| days | true k-th / (k+1)-th | m | bytes/day | decode ms | merge ms | MaxError | N/(m+1) |" +
		" MG cand | cand | complete | top k in | width mean/max | +CM width mean/max | cand+CM |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|---:|---:|---:|\n")
	for _, r := range rows {
		t := d.truth[r.days]
		fmt.Fprintf(&b, "| %d | %d / %d | %d | %.0f | %.2f | %.2f | %d | %d | %d | %d | %s | %s | %d / %d | %d / %d | %d |\n",
			r.days, t.kth, t.next, r.m, r.bytesPerDay, ms(r.decode), ms(r.merge), r.maxErr, r.bound,
			r.mgCand, r.cand, yesNo(r.complete), yesNo(r.holdsTop), r.width, r.widthMax, r.cmWidth, r.cmWidthMax, r.cmCand)
	}
	fmt.Fprintf(&b, "\nCount-Min ε = %v, δ = %v (%s):\n\n", o.eps, o.delta, cmShape(o))
	b.WriteString("| days | bytes/day | decode ms | merge ms | ε·N |\n|---:|---:|---:|---:|---:|\n")
	for _, c := range cms {
		fmt.Fprintf(&b, "| %d | %.0f | %.2f | %.2f | %.0f |\n", c.days, c.bytesPerDay, ms(c.decode), ms(c.merge), c.epsN)
	}
	return b.String()
}

func cmShape(o options) string {
	cm, err := sketch.NewCountMin(o.eps, o.delta)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d × %d cells", cm.Width(), cm.Depth())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
