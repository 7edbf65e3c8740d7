package sketch

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Parameter ranges accepted by NewHLL and by UnmarshalBinary.
const (
	minLog2m    = 4
	maxLog2m    = 17
	minRegwidth = 1
	maxRegwidth = 5

	// cutoffAuto is the explicit cutoff code meaning "choose the threshold
	// automatically" (the extension's expthresh -1).
	cutoffAuto = 63

	// maxCutoffCode is the largest explicit cutoff code other than auto that
	// an EMPTY or EXPLICIT sketch may carry: 2^(14-1) = 8192 values, the
	// largest power of two the extension accepts as expthresh.
	maxCutoffCode = 14

	// maxExplicit is the largest number of values an EXPLICIT sketch may
	// hold: the capacity of the extension's 128 KiB in-memory buffer.
	maxExplicit = 128*1024/8 - 1
)

// kind is the in-memory representation. SPARSE and FULL are both held as
// kindDense; the choice between them is made when serializing, exactly as the
// extension does.
type kind uint8

const (
	kindEmpty kind = iota
	kindExplicit
	kindDense
	kindUndefined
)

// HLL is a HyperLogLog sketch with postgresql-hll semantics. Create one with
// NewHLL or UnmarshalBinary; the zero value is only a valid target for
// UnmarshalBinary. An HLL is not safe for concurrent use.
type HLL struct {
	log2m    uint8
	regwidth uint8
	cutoff   uint8 // explicit cutoff code, low 6 bits of header byte C
	sparseOn bool  // bit 6 of header byte C
	maxVal   uint8 // 2^regwidth - 1, the register value cap
	kind     kind

	// value maps the trailing-zero count of hash >> log2m (64 when it is 0)
	// to the register value, so the hot path has no branch for the cap or
	// for a zero shifted hash.
	value [65]uint8

	// explicit holds the distinct hash values while kind == kindExplicit,
	// ascending by signed (int64) comparison.
	explicit []uint64
	// regs holds one register per byte, len 2^log2m, while kind == kindDense;
	// nil otherwise.
	regs []uint8
}

// NewHLL returns an empty sketch with 2^log2m registers of regwidth bits,
// the automatic explicit cutoff and sparse encoding enabled: the header that
// hll_empty(log2m, regwidth) and hll_add_agg(h, log2m, regwidth) write.
// log2m must be in 4..17 and regwidth in 1..5.
func NewHLL(log2m, regwidth int) (*HLL, error) {
	if err := checkParams(log2m, regwidth); err != nil {
		return nil, fmt.Errorf("sketch: new hll: %w", err)
	}
	return newHLL(uint8(log2m), uint8(regwidth), cutoffAuto, true), nil
}

func newHLL(log2m, regwidth, cutoff uint8, sparseOn bool) *HLL {
	h := &HLL{
		log2m:    log2m,
		regwidth: regwidth,
		cutoff:   cutoff,
		sparseOn: sparseOn,
		maxVal:   uint8(1)<<regwidth - 1,
		kind:     kindEmpty,
	}
	for tz := range 64 {
		h.value[tz] = min(uint8(tz)+1, h.maxVal)
	}
	h.value[64] = 0 // the bits above the index are all zero: no trace
	return h
}

func checkParams(log2m, regwidth int) error {
	if log2m < minLog2m || log2m > maxLog2m {
		return fmt.Errorf("log2m %d outside %d..%d: %w", log2m, minLog2m, maxLog2m, ErrInvalidParams)
	}
	if regwidth < minRegwidth || regwidth > maxRegwidth {
		return fmt.Errorf("regwidth %d outside %d..%d: %w", regwidth, minRegwidth, maxRegwidth, ErrInvalidParams)
	}
	return nil
}

// Log2m returns the base-2 logarithm of the number of registers.
func (h *HLL) Log2m() int { return int(h.log2m) }

// Regwidth returns the number of bits per register.
func (h *HLL) Regwidth() int { return int(h.regwidth) }

// explicitLimit is the number of distinct values an EXPLICIT sketch may hold
// before it is promoted to registers (the extension's expthresh_value).
func (h *HLL) explicitLimit() int {
	switch h.cutoff {
	case cutoffAuto:
		// As many 8-byte values as fit in the size of the FULL encoding.
		n := ((int(h.regwidth) << h.log2m) + 7) / 8 / 8
		return min(n, maxExplicit)
	case 0:
		return 0
	default:
		return min(1<<(h.cutoff-1), maxExplicit)
	}
}

// registerValue returns the register index and value for hash x: the index
// is the low log2m bits; the value is 1 + the number of trailing zeros of the
// remaining bits, capped at maxVal, or 0 when the remaining bits are all zero.
func registerValue(x uint64, log2m, maxVal uint8) (idx uint64, val uint8) {
	w := x >> log2m
	if w != 0 {
		val = min(uint8(bits.TrailingZeros64(w))+1, maxVal)
	}
	return x & (1<<log2m - 1), val
}

// AddHash adds a 64-bit hash value. It never allocates once the sketch uses
// registers.
func (h *HLL) AddHash(x uint64) {
	if h.regs == nil {
		h.addSlow(x)
		return
	}
	h.addReg(x)
}

// addReg raises x's register of a sketch that uses registers. It is small
// enough to be inlined into AddHash and AddHashEach's loop.
func (h *HLL) addReg(x uint64) {
	regs := h.regs
	v := h.value[bits.TrailingZeros64(x>>h.log2m)]
	i := x & uint64(len(regs)-1)
	if v > regs[i] {
		regs[i] = v
	}
}

// Add hashes canonical with xxhash64 (seed 0) and adds the hash.
func (h *HLL) Add(canonical []byte) { h.AddHash(xxhash.Sum64(canonical)) }

// Exact reports whether the sketch still holds its values exactly (it is
// EMPTY or EXPLICIT): its estimate is then the exact count.
func (h *HLL) Exact() bool { return h.kind == kindEmpty || h.kind == kindExplicit }

// AddString hashes s with xxhash64 (seed 0) and adds the hash.
func (h *HLL) AddString(s string) { h.AddHash(xxhash.Sum64String(s)) }

// addSlow handles every state but registers, following the extension's
// multiset_add.
func (h *HLL) addSlow(x uint64) {
	if h.log2m == 0 {
		panic("sketch: use of an uninitialized HLL; create it with NewHLL or UnmarshalBinary")
	}
	switch h.kind {
	case kindUndefined:
		// Adding to an undefined sketch leaves it undefined.
	case kindEmpty:
		if h.explicitLimit() == 0 {
			h.toDense()
			h.addDense(x)
			return
		}
		h.kind = kindExplicit
		h.explicit = append(h.explicit[:0], x)
	case kindExplicit:
		pos, found := searchSigned(h.explicit, x)
		if found {
			return
		}
		if len(h.explicit) >= h.explicitLimit() {
			h.toDense()
			h.addDense(x)
			return
		}
		h.explicit = slices.Insert(h.explicit, pos, x)
	case kindDense:
		h.addDense(x)
	}
}

func (h *HLL) addDense(x uint64) {
	i, v := registerValue(x, h.log2m, h.maxVal)
	if v > h.regs[i] {
		h.regs[i] = v
	}
}

// cmpSigned orders hash values as the extension does: by signed 64-bit
// comparison (for compatibility with java-hll).
// searchSigned finds x in a, sorted ascending by signed comparison: its
// position, or where to insert it. A plain loop: slices.BinarySearchFunc
// with cmpSigned costs a third of a refresh's time in EXPLICIT sketches.
func searchSigned(a []uint64, x uint64) (int, bool) {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(a[m]) < int64(x) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(a) && a[lo] == x
}

func cmpSigned(a, b uint64) int {
	switch {
	case int64(a) < int64(b):
		return -1
	case int64(a) > int64(b):
		return 1
	}
	return 0
}

// toDense converts an EMPTY or EXPLICIT sketch to registers holding the same
// values.
func (h *HLL) toDense() {
	regs := make([]uint8, 1<<h.log2m)
	for _, x := range h.explicit {
		i, v := registerValue(x, h.log2m, h.maxVal)
		if v > regs[i] {
			regs[i] = v
		}
	}
	h.regs = regs
	h.explicit = nil
	h.kind = kindDense
}

// compatible reports whether o has the same header parameters as h.
func (h *HLL) compatible(o *HLL) error {
	switch {
	case h.log2m != o.log2m:
		return fmt.Errorf("log2m %d and %d differ: %w", h.log2m, o.log2m, ErrIncompatible)
	case h.regwidth != o.regwidth:
		return fmt.Errorf("regwidth %d and %d differ: %w", h.regwidth, o.regwidth, ErrIncompatible)
	case h.cutoff != o.cutoff:
		return fmt.Errorf("explicit cutoff codes %d and %d differ: %w", h.cutoff, o.cutoff, ErrIncompatible)
	case h.sparseOn != o.sparseOn:
		return fmt.Errorf("sparse flags %t and %t differ: %w", h.sparseOn, o.sparseOn, ErrIncompatible)
	}
	return nil
}

// Union merges o into h, as the extension's hll_union and hll_union_agg do.
// Both sketches must have the same log2m, regwidth, explicit cutoff and
// sparse flag (the extension rejects any difference), else ErrIncompatible
// is returned and h is unchanged. An undefined operand makes h undefined; an
// EMPTY o leaves h unchanged; an EMPTY h becomes a copy of o. Two EXPLICIT
// sketches stay EXPLICIT while the union fits under the explicit cutoff;
// anything else yields registers. Union of two register sketches does not
// allocate.
func (h *HLL) Union(o *HLL) error {
	if err := h.compatible(o); err != nil {
		return fmt.Errorf("sketch: union: %w", err)
	}
	if h.kind == kindUndefined || o.kind == kindUndefined {
		h.kind = kindUndefined
		h.explicit = nil
		h.regs = nil
		return nil
	}
	switch o.kind {
	case kindEmpty:
		return nil
	case kindExplicit:
		switch h.kind {
		case kindEmpty:
			h.kind = kindExplicit
			h.explicit = append(h.explicit[:0], o.explicit...)
		case kindExplicit:
			h.unionExplicit(o.explicit)
		case kindDense:
			for _, x := range o.explicit {
				h.addDense(x)
			}
		}
	case kindDense:
		switch h.kind {
		case kindEmpty:
			h.kind = kindDense
			h.regs = slices.Clone(o.regs)
		case kindExplicit:
			vals := h.explicit
			h.regs = slices.Clone(o.regs)
			h.explicit = nil
			h.kind = kindDense
			for _, x := range vals {
				h.addDense(x)
			}
		case kindDense:
			maxRegisters(h.regs, o.regs)
		}
	}
	return nil
}

// UnionFull merges into h the FULL sketch b serializes, straight from its
// packed registers, and reports whether it did. It does so only where
// UnmarshalBinary of b into another sketch and Union of that into h would
// succeed and leave h holding registers: b is a FULL sketch, its header
// byte for byte h's parameters (log2m, regwidth 5, explicit cutoff, sparse
// flag) and its length exact, and h is EMPTY or holds registers. Otherwise
// it returns false and leaves h unchanged, for the caller to decode b and
// take Union's way, with its errors. It allocates only the registers an
// EMPTY h takes on.
func (h *HLL) UnionFull(b []byte) bool {
	if h.regwidth != 5 || h.kind != kindEmpty && h.kind != kindDense {
		return false
	}
	c := h.cutoff
	if h.sparseOn {
		c |= 0x40
	}
	m := 1 << h.log2m
	if len(b) != headerLen+m/8*5 || b[0] != schemaVersion<<4|typeFull || b[1] != (h.regwidth-1)<<5|h.log2m || b[2] != c {
		return false
	}
	in := b[headerLen:]
	if h.kind == kindEmpty {
		h.regs = make([]uint8, m)
		unpackFull5(h.regs, in)
		h.kind = kindDense
		return true
	}
	regs := h.regs[:m]
	for len(in) >= 5 && len(regs) >= 8 {
		putLE64(regs, max8(le64(regs), unpack5(in)))
		in = in[5:]
		regs = regs[8:]
	}
	return true
}

// unionExplicit merges the sorted values b into the EXPLICIT sketch h. Like
// the extension's explicit_union, the result is promoted to registers when it
// gains values and exceeds the explicit cutoff.
func (h *HLL) unionExplicit(b []uint64) {
	a := h.explicit
	merged := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := cmpSigned(a[i], b[j]); {
		case c < 0:
			merged = append(merged, a[i])
			i++
		case c > 0:
			merged = append(merged, b[j])
			j++
		default:
			merged = append(merged, a[i])
			i++
			j++
		}
	}
	merged = append(merged, a[i:]...)
	merged = append(merged, b[j:]...)
	h.explicit = merged
	if len(merged) > len(a) && len(merged) > h.explicitLimit() {
		h.toDense()
	}
}

// maxRegisters sets dst[i] = max(dst[i], src[i]), eight registers at a
// time (max8).
func maxRegisters(dst, src []uint8) {
	n := len(dst) &^ 7
	src = src[:len(dst)]
	for i := 0; i < n; i += 8 {
		putLE64(dst[i:], max8(le64(dst[i:]), le64(src[i:])))
	}
	for i := n; i < len(dst); i++ {
		dst[i] = max(dst[i], src[i])
	}
}

// max8 is the bytewise maximum of a and b, eight registers each. Registers
// hold at most 31, so they are compared at once in a uint64 (SWAR): for
// bytes below 0x80, ((a|H)-b)&H has the high bit of each byte set exactly
// where a >= b.
func max8(a, b uint64) uint64 {
	const hi = 0x8080808080808080
	ge := ((a | hi) - b) & hi // high bit set where a >= b
	mask := (ge >> 7) * 0xff  // 0xff where a >= b
	return a&mask | b&^mask
}

// Clone returns a deep copy of h.
func (h *HLL) Clone() *HLL {
	c := *h
	c.explicit = slices.Clone(h.explicit)
	c.regs = slices.Clone(h.regs)
	return &c
}

// Fold returns a copy of h reduced to 2^log2m registers, so that sketches of
// different precision can be merged. log2m must be in 4..h.Log2m(). The
// result equals the sketch that would have been built at the lower precision
// from the same hash values (EXPLICIT values are re-added and may be promoted
// under the smaller automatic cutoff), with one exception of probability
// 2^-(64-log2m) per value: a hash whose bits above the old log2m are all zero
// left no trace in the old registers and cannot be recovered.
func (h *HLL) Fold(log2m int) (*HLL, error) {
	if log2m < minLog2m || log2m > int(h.log2m) {
		return nil, fmt.Errorf("sketch: fold: log2m %d outside %d..%d: %w", log2m, minLog2m, h.log2m, ErrInvalidParams)
	}
	if log2m == int(h.log2m) {
		return h.Clone(), nil
	}
	f := newHLL(uint8(log2m), h.regwidth, h.cutoff, h.sparseOn)
	switch h.kind {
	case kindUndefined:
		f.kind = kindUndefined
	case kindEmpty:
	case kindExplicit:
		for _, x := range h.explicit {
			f.AddHash(x)
		}
	case kindDense:
		// A hash x with old index i and value v has new index i mod 2^log2m.
		// Its new value counts trailing zeros of x >> log2m, whose low
		// (old-new) bits are i >> log2m: if those are non-zero they decide the
		// value alone, else the old value grows by old-new.
		f.kind = kindDense
		f.regs = make([]uint8, 1<<log2m)
		shift := uint(h.log2m) - uint(log2m)
		mask := uint64(1)<<log2m - 1
		for i, v := range h.regs {
			if v == 0 {
				continue
			}
			hi := uint64(i) >> log2m
			var nv uint8
			if hi != 0 {
				nv = uint8(bits.TrailingZeros64(hi)) + 1
			} else {
				nv = v + uint8(shift)
			}
			nv = min(nv, f.maxVal)
			j := uint64(i) & mask
			if nv > f.regs[j] {
				f.regs[j] = nv
			}
		}
	}
	return f, nil
}

// StdError returns the relative standard error of Estimate: 1.04/sqrt(m)
// once the sketch uses registers, 0 while it is EMPTY or EXPLICIT (exact),
// and NaN for an undefined sketch.
func (h *HLL) StdError() float64 {
	switch h.kind {
	case kindDense:
		return 1.04 / math.Sqrt(float64(uint64(1)<<h.log2m))
	case kindUndefined:
		return math.NaN()
	}
	return 0
}
