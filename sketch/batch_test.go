package sketch

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAddHashesMatchesAddHash checks that adding batches gives the bytes
// adding each value in turn gives, across the EXPLICIT cutoff, with
// duplicates, the value 0, negative (signed) values and several cutoffs.
func TestAddHashesMatchesAddHash(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	pool := func(n int) []uint64 { // values with many repeats
		p := randomHashes(r.Uint64(), n)
		p = append(p, 0, 1, 1<<63, ^uint64(0))
		return p
	}
	for _, cutoff := range []uint8{cutoffAuto, 0, 1, 2, 5, 9} {
		for _, log2m := range []uint8{4, 10, 14} {
			for trial := range 40 {
				vals := pool(1 + r.IntN(3000))
				one := newHLL(log2m, 5, cutoff, true)
				batched := newHLL(log2m, 5, cutoff, true)
				for step := 0; step < 1+r.IntN(6); step++ {
					n := r.IntN(1 + 2*max(batched.explicitLimit(), 4))
					if trial%7 == 0 {
						n = r.IntN(5000)
					}
					xs := make([]uint64, n)
					for i := range xs {
						xs[i] = vals[r.IntN(len(vals))]
					}
					for _, x := range xs {
						one.AddHash(x)
					}
					batched.AddHashes(slices.Clone(xs))
					want, got := mustMarshal(t, one), mustMarshal(t, batched)
					if !bytes.Equal(got, want) {
						t.Fatalf("cutoff %d log2m %d trial %d step %d (%d values): batched %x..., one by one %x...",
							cutoff, log2m, trial, step, n, got[:min(len(got), 12)], want[:min(len(want), 12)])
					}
					if one.Exact() != batched.Exact() || one.ExactRoom() != batched.ExactRoom() {
						t.Fatalf("cutoff %d log2m %d: Exact %t/%t ExactRoom %d/%d", cutoff, log2m,
							batched.Exact(), one.Exact(), batched.ExactRoom(), one.ExactRoom())
					}
				}
			}
		}
	}
}

func TestAddHashesOversizedExplicit(t *testing.T) {
	vals := randomHashes(5, 100)
	slices.SortFunc(vals, cmpSigned)
	b := unhex(t, "128a7f")
	for _, x := range vals {
		b = append(b, byte(x>>56), byte(x>>48), byte(x>>40), byte(x>>32), byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	h := mustUnmarshal(t, b)
	h.AddHashes([]uint64{vals[3], vals[7], vals[3]})
	if got := mustMarshal(t, h); !bytes.Equal(got, b) {
		t.Fatalf("adding present values changed the oversized EXPLICIT sketch")
	}
	h.AddHashes([]uint64{vals[1], 42})
	if h.kind != kindDense {
		t.Fatalf("adding a value kept an oversized EXPLICIT sketch")
	}
	u := mustUnmarshal(t, unhex(t, "108e7f"))
	u.AddHashes([]uint64{1, 2, 3})
	if got := mustMarshal(t, u); !bytes.Equal(got, unhex(t, "108e7f")) {
		t.Errorf("adding to an undefined sketch gave %x", got)
	}
}

func TestMergeSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for range 2000 {
		a := dedupSorted(sorted(randomSmall(r, r.IntN(40))))
		b := dedupSorted(sorted(randomSmall(r, r.IntN(40))))
		want := dedupSorted(sorted(append(slices.Clone(a), b...)))
		got := mergeSorted(slices.Clone(a), b)
		if !slices.Equal(got, want) {
			t.Fatalf("merge %v %v = %v, want %v", a, b, got, want)
		}
	}
}

func randomSmall(r *rand.Rand, n int) []uint64 {
	xs := make([]uint64, n)
	for i := range xs {
		xs[i] = uint64(int64(r.IntN(60) - 30))
	}
	return xs
}

func sorted(xs []uint64) []uint64 {
	slices.SortFunc(xs, cmpSigned)
	return xs
}

func BenchmarkAddHashesToDense(b *testing.B) {
	xs := randomHashes(11, 1281)
	buf := make([]uint64, len(xs))
	b.ReportAllocs()
	for b.Loop() {
		h := newHLL(14, 5, cutoffAuto, true)
		copy(buf, xs)
		h.AddHashes(buf)
	}
}

func TestAddHashEach(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	var one, each []*HLL
	for i := range 20 {
		n := []int{0, 10, 2000, 100000}[i%4]
		vals := randomHashes(uint64(i), n)
		one = append(one, build(t, 12, 5, vals))
		each = append(each, build(t, 12, 5, vals))
	}
	var sks []*HLL
	var hs []uint64
	for range 50000 {
		k := r.IntN(len(one))
		h := r.Uint64()
		one[k].AddHash(h)
		sks = append(sks, each[k])
		hs = append(hs, h)
	}
	AddHashEach(sks, hs)
	for k := range one {
		if !bytes.Equal(mustMarshal(t, one[k]), mustMarshal(t, each[k])) {
			t.Fatalf("sketch %d differs", k)
		}
	}
}
