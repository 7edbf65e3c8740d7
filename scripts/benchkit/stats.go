package benchkit

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Median is the median of ds (the mean of the two middle values for an
// even count), 0 for none.
func Median(ds []time.Duration) time.Duration { return median(ds) }

// MedianFloat is Median of floats, 0 for none.
func MedianFloat(xs []float64) float64 { return median(xs) }

func median[T time.Duration | float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// Percentile is the pct-th percentile of xs (pct from 0 to 100) by
// nearest rank, 0 for none; xs is left as it is.
func Percentile[T time.Duration | float64](xs []T, pct float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(math.Ceil(pct/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Ms prints d in milliseconds (seconds from one second on), with three
// significant digits or so.
func Ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000)
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	default:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
}

// Spread prints timed runs as "median (min–max)" with Ms: one run alone,
// "—" for none.
func Spread(ds []time.Duration) string {
	switch len(ds) {
	case 0:
		return "—"
	case 1:
		return Ms(ds[0])
	}
	return fmt.Sprintf("%s (%s–%s)", Ms(Median(ds)), Ms(slices.Min(ds)), Ms(slices.Max(ds)))
}

// Met says whether a goal was met: "met" or "NOT met".
func Met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// Rotation is round i's order of n things measured in turn: 0 to n-1,
// starting at i mod n, so that each goes first in turn (for two: 0, 1 in
// even rounds and 1, 0 in odd ones).
func Rotation(i, n int) []int {
	order := make([]int, n)
	for k := range order {
		order[k] = (i + k) % n
	}
	return order
}

// Spacing spreads runs of a slower measurement evenly over rounds: Take
// says whether a round gets one of them.
type Spacing struct {
	every, next float64
	left        int
}

// NewSpacing spreads runs over rounds rounds.
func NewSpacing(rounds, runs int) *Spacing {
	return &Spacing{every: float64(rounds) / float64(runs), left: runs}
}

// Take reports whether round i (counted from 0, each asked once in order)
// gets a run.
func (s *Spacing) Take(i int) bool {
	if float64(i) < s.next || s.left == 0 {
		return false
	}
	s.next += s.every
	s.left--
	return true
}
