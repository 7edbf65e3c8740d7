package exec

import (
	"cmp"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/sketch"
)

// TestTopKProof: over random skewed data split into groups and days, each
// day's summary small enough to prune, whenever prove accepts the counted
// candidates (after widening as verifiedGroups does) the Limit largest
// exact counts among them are the true ones: every uncounted (group,
// item) pair counts less than the cut, or at most as much when ties may
// be answered by any tied row.
func TestTopKProof(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	proven, refused := 0, 0
	for trial := range 300 {
		groups := 1 + r.IntN(3)
		truth := make([]map[uint64]int64, groups)
		sums := make([]summary, groups)
		capacity := []int{8, 16, 64}[r.IntN(3)]
		for g := range groups {
			truth[g] = map[uint64]int64{}
			acc, _ := sketch.NewFreq(capacity)
			for range 1 + r.IntN(8) { // days
				day, _ := sketch.NewFreq(capacity)
				for range 200 + r.IntN(800) {
					u := r.Float64()
					item := uint64(float64(300) * u * u * u)
					truth[g][item]++
					if err := day.Add(binary.BigEndian.AppendUint64(nil, item), 1); err != nil {
						t.Fatal(err)
					}
				}
				if err := acc.Merge(day); err != nil {
					t.Fatal(err)
				}
			}
			sums[g] = summary{f: acc, items: acc.Items()}
		}
		spec := &plan.TopKSpec{TotalOrder: trial%2 == 0}
		if trial%3 == 0 {
			spec.Threshold = int64(20 + r.IntN(100))
		} else {
			spec.Limit = int64(1 + r.IntN(6))
		}
		counted := map[string]bool{}
		var counts []int64
		next := firstCandidates(spec, sums)
		ok := false
		var cut int64
		for round := 1; round <= MaxTopKRounds; round++ {
			for _, c := range next {
				counted[c.key()] = true
				item := binary.BigEndian.Uint64(c.item)
				for g := range groups {
					if n := truth[g][item]; n > 0 {
						counts = append(counts, n)
					}
				}
			}
			cut, _, ok = prove(spec, sums, counted, slices.Clone(counts))
			if ok {
				break
			}
			if next = widen(spec, sums, counted, cut); len(next) == 0 {
				break
			}
		}
		if !ok {
			refused++
			continue
		}
		proven++
		for g := range groups {
			for item, n := range truth[g] {
				if counted[candidate{item: binary.BigEndian.AppendUint64(nil, item)}.key()] {
					continue
				}
				bad := false
				switch {
				case spec.Threshold > 0:
					bad = n >= spec.Threshold
				case spec.TotalOrder:
					bad = n >= cut
				default:
					bad = n > cut
				}
				if bad {
					t.Fatalf("trial %d: uncounted item %d of group %d counts %d, the cut is %d (spec %+v)", trial, item, g, n, cut, *spec)
				}
			}
		}
	}
	t.Logf("%d proven, %d refused", proven, refused)
	if proven < 50 || refused < 5 {
		t.Errorf("%d proven, %d refused: the trials do not exercise both outcomes", proven, refused)
	}
}

// TestTopKFirstCandidates: the first round holds every item whose upper
// bound reaches the Limit-th largest lower bound, across groups.
func TestTopKFirstCandidates(t *testing.T) {
	f, _ := sketch.NewFreq(4)
	for i, n := range []int64{50, 40, 30, 5} {
		if err := f.Add([]byte{byte('a' + i)}, n); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := sketch.NewFreq(4)
	if err := g.Add([]byte("z"), 35); err != nil {
		t.Fatal(err)
	}
	sums := []summary{{f: f, items: f.Items()}, {f: g, items: g.Items()}}
	got := firstCandidates(&plan.TopKSpec{Limit: 3}, sums)
	var names []string
	for _, c := range got {
		names = append(names, string(c.item))
	}
	slices.SortFunc(names, cmp.Compare)
	if want := []string{"a", "b", "z"}; !slices.Equal(names, want) {
		t.Errorf("candidates %v, want %v", names, want)
	}
	cut, bound, ok := prove(&plan.TopKSpec{Limit: 3}, sums, map[string]bool{"\x01a": true, "\x01b": true, "\x01z": true}, []int64{50, 40, 35})
	if !ok || cut != 35 || bound != 30 {
		t.Errorf("prove: cut %d bound %d ok %v; want 35, 30, true", cut, bound, ok)
	}
	// At the boundary: c (upper 30) uncounted against a cut of 31, 30, 29.
	two := map[string]bool{"\x01a": true, "\x01b": true, "\x01z": true}
	for _, c := range []struct {
		cut   int64
		total bool
		ok    bool
	}{{31, true, true}, {30, false, true}, {30, true, false}, {29, false, false}} {
		spec := &plan.TopKSpec{Limit: 3, TotalOrder: c.total}
		if _, _, ok := prove(spec, sums, two, []int64{50, 40, c.cut}); ok != c.ok {
			t.Errorf("cut %d, total order %v: proven %v, want %v", c.cut, c.total, ok, c.ok)
		}
	}
	// Threshold: proven only below it; fewer rows than asked: only when
	// nothing is uncounted.
	if _, _, ok := prove(&plan.TopKSpec{Threshold: 30}, sums, two, nil); ok {
		t.Error("threshold 30 proven with an uncounted item of upper bound 30")
	}
	if _, _, ok := prove(&plan.TopKSpec{Threshold: 31}, sums, two, nil); !ok {
		t.Error("threshold 31 not proven with every uncounted item at most 30")
	}
	if _, _, ok := prove(&plan.TopKSpec{Limit: 5}, sums, two, []int64{50, 40, 35}); ok {
		t.Error("3 counted rows proven the top 5 with an uncounted item")
	}
}
