package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/scripts/benchkit"
)

// timedKind is one way of answering a benchmark's query: each call of run
// answers it once, checked, and returns its time.
type timedKind struct {
	name string
	run  func() (time.Duration, error)
}

// interleave runs o.runs rounds of kinds: those at the indexes rotating,
// in an order that rotates from round to round, and the exact query (the
// kind at exactAt) in o.exactRuns of the rounds, spread evenly, at a place
// that moves. It prints a line per round and returns the times by kind.
func interleave(ctx context.Context, o options, kinds []timedKind, rotating []int, exactAt int) (map[string][]time.Duration, error) {
	times := map[string][]time.Duration{}
	spacing := benchkit.NewSpacing(o.runs, o.exactRuns)
	fmt.Printf("%d rounds; the exact query in %d of them\n", o.runs, o.exactRuns)
	for i := range o.runs {
		var order []int
		for _, k := range benchkit.Rotation(i, len(rotating)) {
			order = append(order, rotating[k])
		}
		if spacing.Take(i) {
			order = slices.Insert(order, i%4%len(order), exactAt)
		}
		var line strings.Builder
		fmt.Fprintf(&line, "round %2d", i+1)
		for _, k := range order {
			d, err := kinds[k].run()
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", i+1, kinds[k].name, err)
			}
			times[kinds[k].name] = append(times[kinds[k].name], d)
			fmt.Fprintf(&line, "  %s %s", kinds[k].name, benchkit.Ms(d))
		}
		fmt.Println(line.String())
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return times, nil
}

// target is a ratio of two kinds' times printed, and the least it should
// be (0: none, a reference).
type target struct {
	slow, fast string
	goal       float64
}

// note says whether ratio x meets the target, measured where at says.
func (t target) note(x float64, at string) string {
	if t.goal <= 0 {
		return ""
	}
	return fmt.Sprintf("  (target >= %gx%s: %s)", t.goal, at, benchkit.Met(x >= t.goal))
}
