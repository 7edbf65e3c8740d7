package benchkit

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{{nil, 0}, {ms(5), 5 * time.Millisecond}, {ms(3, 1, 2), 2 * time.Millisecond}, {ms(4, 1, 3, 2), 2500 * time.Microsecond}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := MedianFloat([]float64{1, 4, 2, 3}); got != 2.5 {
		t.Errorf("MedianFloat = %v, want 2.5", got)
	}
}

// TestPercentile checks the nearest rank against its definition: the
// smallest value with at least pct % of the values at or below it.
func TestPercentile(t *testing.T) {
	xs := []float64{9, 1, 8, 2, 7, 3, 6, 4, 5, 10, 11}
	orig := slices.Clone(xs)
	sorted := slices.Sorted(slices.Values(xs))
	for _, pct := range []float64{1, 10, 50, 90, 95, 99, 100} {
		var want float64
		for k := len(sorted) - 1; k >= 0 && float64(k+1) >= pct/100*float64(len(sorted)); k-- {
			want = sorted[k]
		}
		if got := Percentile(xs, pct); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", pct, got, want)
		}
	}
	if !slices.Equal(xs, orig) {
		t.Errorf("Percentile changed its input: %v", xs)
	}
	if got := Percentile([]time.Duration(nil), 50); got != 0 {
		t.Errorf("Percentile of none = %v", got)
	}
}

func TestRotation(t *testing.T) {
	for i, want := range [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}} {
		if got := Rotation(i, 3); !slices.Equal(got, want) {
			t.Errorf("Rotation(%d, 3) = %v, want %v", i, got, want)
		}
	}
	if got := Rotation(3, 2); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("Rotation(3, 2) = %v", got)
	}
}

// TestSpacing checks that Spacing chooses the rounds the benchmarks chose
// before it: a run whenever the round reaches the next multiple of
// rounds/runs, until there have been runs of them.
func TestSpacing(t *testing.T) {
	for _, c := range [][2]int{{50, 20}, {20, 5}, {3, 2}, {7, 7}, {10, 1}, {9, 4}} {
		rounds, runs := c[0], c[1]
		s := NewSpacing(rounds, runs)
		every, next, done := float64(rounds)/float64(runs), 0.0, 0
		for i := range rounds {
			want := float64(i) >= next && done < runs
			if want {
				next += every
				done++
			}
			if got := s.Take(i); got != want {
				t.Fatalf("%d rounds, %d runs: round %d: Take = %v, want %v", rounds, runs, i, got, want)
			}
		}
		if done != runs {
			t.Errorf("%d rounds, %d runs: %d taken", rounds, runs, done)
		}
	}
}

func TestSpread(t *testing.T) {
	if got := Spread(nil); got != "—" {
		t.Errorf("Spread(nil) = %q", got)
	}
	if got := Spread([]time.Duration{1500 * time.Microsecond}); got != "1.50 ms" {
		t.Errorf("Spread(one) = %q", got)
	}
	got := Spread([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if want := "2.00 ms (1.00 ms–3.00 ms)"; got != want {
		t.Errorf("Spread = %q, want %q", got, want)
	}
}

func TestParallel(t *testing.T) {
	const n = 1000
	var seen [n]atomic.Int32
	var workers atomic.Int32
	var last int
	err := Parallel(4, n, func() func(int) error {
		workers.Add(1)
		return func(i int) error {
			seen[i].Add(1)
			return nil
		}
	}, func(done int) { last = max(last, done) })
	if err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("work(%d) ran %d times", i, seen[i].Load())
		}
	}
	if workers.Load() != 4 || last != n {
		t.Errorf("%d workers, progress up to %d", workers.Load(), last)
	}
	boom := errors.New("boom")
	err = Parallel(2, n, func() func(int) error {
		return func(i int) error {
			if i == 10 {
				return boom
			}
			return nil
		}
	}, nil)
	if !errors.Is(err, boom) {
		t.Errorf("Parallel = %v, want boom", err)
	}
}

func TestSplitMix64(t *testing.T) {
	// The generator's first output from state 0.
	r := SplitMix64{}
	if got := r.Next(); got != 0xe220a8397b1dcdaf {
		t.Errorf("first value %#x", got)
	}
	if r.State != 0x9e3779b97f4a7c15 {
		t.Errorf("state %#x", r.State)
	}
}

func TestMs(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1234 * time.Microsecond: "1.23 ms", 12345 * time.Microsecond: "12.3 ms", 123456 * time.Microsecond: "123 ms",
		1234 * time.Millisecond: "1.23 s", 12345 * time.Millisecond: "12.3 s",
	} {
		if got := Ms(d); got != want {
			t.Errorf("Ms(%v) = %q, want %q", d, got, want)
		}
	}
}
