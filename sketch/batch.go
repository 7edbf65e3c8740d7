package sketch

import (
	"math/bits"
	"slices"
	"sync"
)

// AddHashes adds every hash value of xs. The sketch ends up exactly as if
// AddHash had been called on each in turn (the result does not depend on the
// order). xs is used as scratch space: its order is changed.
//
// While the sketch is EMPTY or EXPLICIT this is much cheaper than adding
// the values one by one: a batch that keeps the sketch EXPLICIT is sorted
// and merged in one pass, and a batch that takes it past the explicit
// cutoff goes straight into registers, unsorted.
func (h *HLL) AddHashes(xs []uint64) {
	if len(xs) == 0 {
		return
	}
	if h.regs != nil {
		for _, x := range xs {
			h.AddHash(x)
		}
		return
	}
	switch h.kind {
	case kindUndefined:
		return
	case kindEmpty, kindExplicit:
	default:
		for _, x := range xs {
			h.AddHash(x)
		}
		return
	}
	if h.log2m == 0 {
		panic("sketch: use of an uninitialized HLL; create it with NewHLL or UnmarshalBinary")
	}
	// Added one by one, the values would make the sketch dense exactly when
	// one of them is new while it holds the cutoff's number of values or
	// more: when the union gains a value and exceeds the cutoff.
	limit := h.explicitLimit()
	if len(h.explicit)+len(xs) > limit && h.unionExceeds(xs, limit) {
		if h.kind == kindEmpty {
			h.explicit = h.explicit[:0]
		}
		h.toDense()
		for _, x := range xs {
			h.addDense(x)
		}
		return
	}
	sortSigned(xs)
	xs = dedupSorted(xs)
	if h.kind == kindEmpty {
		h.kind = kindExplicit
		h.explicit = append(h.explicit[:0], xs...)
		return
	}
	h.explicit = mergeSorted(h.explicit, xs)
}

// AddHashEach adds hs[i] to sks[i] for every i, as AddHash does: one loop
// for many sketches, whose register updates (cache misses, mostly) the
// processor then overlaps. sks and hs must have the same length.
func AddHashEach(sks []*HLL, hs []uint64) {
	hs = hs[:len(sks)]
	for i, h := range sks {
		if h.regs == nil {
			h.addSlow(hs[i])
			continue
		}
		h.addReg(hs[i])
	}
}

// ExactRoom returns how many more distinct values an EMPTY or EXPLICIT
// sketch takes before the next one makes it use registers; 0 otherwise.
func (h *HLL) ExactRoom() int {
	switch h.kind {
	case kindEmpty:
		return h.explicitLimit()
	case kindExplicit:
		return max(h.explicitLimit()-len(h.explicit), 0)
	}
	return 0
}

// unionExceeds reports whether the EXPLICIT (or EMPTY) sketch's values
// together with xs hold a value the sketch lacks and more than limit
// distinct values. It counts with a hash set and stops early.
func (h *HLL) unionExceeds(xs []uint64, limit int) bool {
	var explicit []uint64
	if h.kind == kindExplicit {
		explicit = h.explicit
	}
	n := len(explicit) + len(xs)
	size := 1 << bits.Len(uint(2*n-1)) // a power of two, at least 2n
	tp := setPool.Get().(*[]uint64)
	if cap(*tp) < size {
		*tp = make([]uint64, size)
	}
	set := (*tp)[:size]
	clear(set)
	defer setPool.Put(tp)
	shift := 64 - uint(bits.Len(uint(size-1)))
	mask := uint64(size - 1)
	distinct, zero := 0, false
	// insert adds x to the set and reports whether it was new. Slots hold
	// the values themselves; 0 marks an empty slot, so the value 0 is
	// tracked apart.
	insert := func(x uint64) bool {
		if x == 0 {
			if zero {
				return false
			}
			zero = true
			return true
		}
		for i := (x * 0x9e3779b97f4a7c15) >> shift; ; i = (i + 1) & mask {
			switch set[i] {
			case 0:
				set[i] = x
				return true
			case x:
				return false
			}
		}
	}
	for _, x := range explicit {
		if insert(x) {
			distinct++
		}
	}
	gained := false
	for _, x := range xs {
		if insert(x) {
			distinct++
			gained = true
			if distinct > limit {
				return true
			}
		}
	}
	return gained && distinct > limit
}

var setPool = sync.Pool{New: func() any { return new([]uint64) }}

// sortSigned sorts xs ascending by signed comparison, the EXPLICIT order:
// flipping the sign bit turns that order into the unsigned one.
func sortSigned(xs []uint64) {
	const sign = 1 << 63
	for i := range xs {
		xs[i] ^= sign
	}
	slices.Sort(xs)
	for i := range xs {
		xs[i] ^= sign
	}
}

// dedupSorted removes repeated values from sorted xs, in place.
func dedupSorted(xs []uint64) []uint64 {
	if len(xs) < 2 {
		return xs
	}
	n := 1
	for _, x := range xs[1:] {
		if x != xs[n-1] {
			xs[n] = x
			n++
		}
	}
	return xs[:n]
}

// mergeSorted merges the distinct sorted (signed order) values b into the
// distinct sorted values a, in place at the end of a's array (grown when
// needed), and returns the union.
func mergeSorted(a, b []uint64) []uint64 {
	n, m := len(a), len(b)
	out := slices.Grow(a, m)[:n+m]
	// Merge from the back; k is the next slot to fill.
	i, j, k := n-1, m-1, n+m-1
	for j >= 0 {
		switch {
		case i >= 0 && int64(out[i]) > int64(b[j]):
			out[k] = out[i]
			i--
		case i >= 0 && out[i] == b[j]:
			out[k] = out[i]
			i--
			j--
		default:
			out[k] = b[j]
			j--
		}
		k--
	}
	// out[:i+1] is in place; out[k+1:] holds the rest. Close the gap left by
	// values both held.
	if k > i {
		copy(out[i+1:], out[k+1:])
		out = out[:n+m-(k-i)]
	}
	return out
}
