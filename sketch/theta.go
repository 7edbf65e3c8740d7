package sketch

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Theta sketch parameters, compatible with Apache DataSketches.
const (
	// MinThetaLgK and MaxThetaLgK bound lgK, the base-2 logarithm of the
	// nominal number of entries k of a Theta sketch or union.
	MinThetaLgK = 4
	MaxThetaLgK = 26
	// DefaultThetaLgK is the DataSketches default: k = 4096, a relative
	// standard error of about 1/sqrt(k) = 1.6%.
	DefaultThetaLgK = 12

	// ThetaSeed is the MurmurHash3 seed of every Theta hash (the
	// DataSketches default update seed). Sketches built with another seed
	// cannot be combined with these and are refused by UnmarshalBinary.
	ThetaSeed = 9001

	// thetaMax is theta 1.0 as a 63-bit integer: hashes live in
	// [1, thetaMax), so the sign bit of a Java long is never set.
	thetaMax = math.MaxInt64

	// Hash table policy of the DataSketches QuickSelect sketch: grow by a
	// factor of 2^lgResize while the table has at most 2^lgK slots (kept at
	// most half full), up to 2^(lgK+1) slots; there, fill to 15/16 and then
	// rebuild down to k entries.
	lgResize   = 3
	minLgTable = 5
	strideBits = 7
	strideMask = 1<<strideBits - 1
	rebuildNum = 15
	rebuildDen = 16
)

// thetaSeedHash is the 16-bit seed hash stored in serialized sketches: the
// low 16 bits of h1 of MurmurHash3 of the seed's 8 little-endian bytes with
// hash seed 0 (0x93cc for 9001).
var thetaSeedHash = uint16(computeSeedHash(ThetaSeed))

func computeSeedHash(seed uint64) uint64 {
	h1, _ := murmur3Uint64(seed, 0)
	return h1 & 0xffff
}

// ThetaHash returns the Theta hash of b: the first 64-bit half of
// MurmurHash3_x64_128(b, ThetaSeed) shifted right by one bit, a value in
// [0, 2^63-1]. This is the hash DataSketches computes for a byte array, and
// for a Java long, a C++ int64_t or a Go int64 v it is ThetaHash of the 8
// little-endian bytes of v. Pass it to AddHash.
func ThetaHash(b []byte) uint64 {
	h1, _ := murmur3(b, ThetaSeed)
	return h1 >> 1
}

func thetaHashString(s string) uint64 {
	h1, _ := murmur3(s, ThetaSeed)
	return h1 >> 1
}

func thetaHashUint64(v uint64) uint64 {
	h1, _ := murmur3Uint64(v, ThetaSeed)
	return h1 >> 1
}

// Theta is an updatable Theta sketch: the QuickSelect sketch of Apache
// DataSketches with resize factor 8 and sampling probability 1. It counts
// distinct values; Compact turns it into a CompactTheta for estimation, set
// operations and storage.
//
// The sketch keeps every distinct hash below theta, a threshold that starts
// at 1.0 (2^63-1 as an integer). Hashes are kept in an open-addressing table of 2^lgCur
// slots, probed with double hashing (the start slot is the low lgCur bits of
// the hash, the odd stride comes from the next 7 bits) in which 0 marks a
// free slot (so hash 0 is never stored). While lgCur <= lgK the table is
// kept at most half full: one more entry grows it 8-fold, to at most
// 2^(lgK+1) slots. At 2^(lgK+1) slots it is filled to 15/16; one more
// entry triggers a rebuild: theta becomes the (k+1)-th smallest hash and
// only the k hashes below it stay. A hash is added only if it is not 0 and
// below theta.
//
// These thresholds are the library's, so for the same input values the
// retained hashes and theta are bit for bit those of the Java and C++
// sketches. Create a Theta with NewTheta (the zero value is not usable). A
// Theta is not safe for concurrent use.
type Theta struct {
	table    []uint64 // 2^lgCur slots, 0 = free
	lgCur    uint8
	lgK      uint8
	count    int      // occupied slots
	capacity int      // count that triggers a resize or rebuild when exceeded
	theta    uint64   // every stored hash is below it
	empty    bool     // nothing was ever offered to the sketch
	scratch  []uint64 // the k survivors of a rebuild, kept for the next one
	counts   []int32  // reused by Compact
}

// NewTheta returns an empty update sketch with k = 2^lgK nominal entries,
// MinThetaLgK <= lgK <= MaxThetaLgK (DefaultThetaLgK is the usual choice).
// The sketch starts small and grows to at most 2^(lgK+1) 8-byte slots.
func NewTheta(lgK int) (*Theta, error) {
	if err := checkThetaLgK(lgK); err != nil {
		return nil, fmt.Errorf("sketch: new theta: %w", err)
	}
	t := &Theta{lgK: uint8(lgK), theta: thetaMax, empty: true}
	t.setTable(startLgTable(lgK))
	return t, nil
}

func checkThetaLgK(lgK int) error {
	if lgK < MinThetaLgK || lgK > MaxThetaLgK {
		return fmt.Errorf("lgK %d outside [%d, %d]: %w", lgK, MinThetaLgK, MaxThetaLgK, ErrInvalidParams)
	}
	return nil
}

// startLgTable is the library's starting table size: lgK+1 reduced by whole
// resize steps of 3 while staying at least 5, so that growing 8-fold lands
// exactly on 2^(lgK+1) slots.
func startLgTable(lgK int) uint8 {
	lgMax := lgK + 1
	if lgMax <= minLgTable {
		return minLgTable
	}
	return uint8((lgMax-minLgTable)%lgResize + minLgTable)
}

// tableCapacity is the number of entries a table of 2^lgCur slots holds
// before it must grow (half of it while lgCur <= lgK) or be rebuilt (15/16
// of it, at lgCur = lgK+1).
func tableCapacity(lgCur, lgK uint8) int {
	if lgCur <= lgK {
		return (1 << lgCur) / 2
	}
	return (1 << lgCur) * rebuildNum / rebuildDen
}

func (t *Theta) setTable(lgCur uint8) {
	t.lgCur = lgCur
	t.table = make([]uint64, 1<<lgCur)
	t.capacity = tableCapacity(lgCur, t.lgK)
	t.count = 0
}

// LgK returns the base-2 logarithm of the nominal number of entries.
func (t *Theta) LgK() int { return int(t.lgK) }

// IsEmpty reports whether nothing was ever added. Adding a value whose hash
// is screened out (0 or not below theta) still makes the sketch non-empty,
// as in DataSketches.
func (t *Theta) IsEmpty() bool { return t.empty }

// NumRetained returns the number of hashes currently held: up to
// 15/16 * 2^(lgK+1) before a rebuild trims them back to k.
func (t *Theta) NumRetained() int { return t.count }

// Estimate returns the estimated number of distinct values added: the
// number of retained hashes divided by theta as a fraction.
func (t *Theta) Estimate() float64 {
	return float64(t.count) / (float64(t.theta) / float64(thetaMax))
}

// AddBytes adds the value whose canonical bytes are b. An empty b is
// ignored, as DataSketches ignores empty strings and byte arrays.
func (t *Theta) AddBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	h1, _ := murmur3(b, ThetaSeed)
	t.AddHash(h1 >> 1)
}

// AddString adds the value whose canonical bytes are those of s (for text,
// its UTF-8 bytes, as DataSketches hashes a Java or C++ string). An empty s
// is ignored.
func (t *Theta) AddString(s string) {
	if len(s) == 0 {
		return
	}
	h1, _ := murmur3(s, ThetaSeed)
	t.AddHash(h1 >> 1)
}

// AddInt64 adds v, hashed as its 8 little-endian bytes: the same hash as
// update(long) in Java and update(int64_t) in C++. The libraries widen
// smaller integers to 64 bits before hashing, so pass those as int64 too.
func (t *Theta) AddInt64(v int64) { t.AddUint64(uint64(v)) }

// AddFloat64 adds v as DataSketches hashes a double: the 8 little-endian
// bytes of its IEEE 754 bits, after mapping -0 to 0 and every NaN to the
// canonical NaN 0x7ff8000000000000.
func (t *Theta) AddFloat64(v float64) { t.AddUint64(canonicalFloatBits(v)) }

func canonicalFloatBits(v float64) uint64 {
	switch {
	case v == 0:
		return 0
	case v != v:
		return 0x7ff8000000000000
	}
	return math.Float64bits(v)
}

// AddUint64 adds v, hashed as its 8 little-endian bytes (so AddUint64(x)
// and AddInt64(int64(x)) add the same value).
func (t *Theta) AddUint64(v uint64) {
	h1, _ := murmur3Uint64(v, ThetaSeed)
	t.AddHash(h1 >> 1)
}

// AddHash adds an already computed Theta hash (see ThetaHash). Hashes that
// are 0 or not below theta, including every value of 2^63-1 or more, are
// screened out.
func (t *Theta) AddHash(h uint64) {
	t.empty = false
	// h-1 wraps for h == 0, so one comparison screens 0 and h >= theta.
	if h-1 >= t.theta-1 {
		return
	}
	t.insert(h)
}

// insert stores h unless it is already present, then grows or rebuilds the
// table when it holds more than its capacity.
func (t *Theta) insert(h uint64) {
	mask := uint64(len(t.table) - 1)
	i := h & mask
	stride := (h>>t.lgCur)&strideMask<<1 | 1
	for {
		v := t.table[i]
		if v == h {
			return
		}
		if v == 0 {
			break
		}
		i = (i + stride) & mask
	}
	t.table[i] = h
	t.count++
	if t.count > t.capacity {
		t.overflow()
	}
}

func (t *Theta) overflow() {
	if t.lgCur <= t.lgK {
		t.resize()
	} else {
		t.rebuild()
	}
}

// resize moves every hash into a table 8 times larger, capped at
// 2^(lgK+1) slots.
func (t *Theta) resize() {
	old := t.table
	t.setTable(min(t.lgCur+lgResize, t.lgK+1))
	for _, h := range old {
		if h != 0 {
			t.place(h)
		}
	}
}

// rebuild lowers theta to the (k+1)-th smallest hash and keeps the k hashes
// below it. The hashes are first packed at the front of the table, where
// the selection runs; only the k survivors are copied out (to a buffer kept
// for the next rebuild) before the table is cleared and refilled.
func (t *Theta) rebuild() {
	k := 1 << t.lgK
	all := t.table[:0]
	for _, h := range t.table {
		if h != 0 {
			all = append(all, h)
		}
	}
	selectNth(all, k)
	t.theta = all[k]
	keep := append(t.scratch[:0], all[:k]...)
	t.scratch = keep
	clear(t.table)
	t.count = 0
	for _, h := range keep {
		t.place(h)
	}
}

// place stores h, known to be absent, in the table without any capacity
// check.
func (t *Theta) place(h uint64) {
	mask := uint64(len(t.table) - 1)
	i := h & mask
	stride := (h>>t.lgCur)&strideMask<<1 | 1
	for t.table[i] != 0 {
		i = (i + stride) & mask
	}
	t.table[i] = h
	t.count++
}

// Compact returns the sketch's current state as an immutable CompactTheta:
// every retained hash in ascending order (possibly more than k: compacting
// does not trim), theta and the empty flag. The Theta stays usable.
func (t *Theta) Compact() *CompactTheta {
	hashes := make([]uint64, t.count)
	t.counts = sortTable(hashes, t.table, t.theta, t.counts)
	return newCompactTheta(t.empty, t.theta, hashes)
}

// sortTable writes the non-zero entries of table, all below theta, to out
// (exactly their number long) in ascending order and returns the counts
// buffer for reuse.
//
// The hashes are uniformly spread over [0, theta), so a counting pass on
// their top bits (about one bucket per hash) followed by a scatter leaves
// them nearly sorted, and an insertion sort finishes in linear time. If the
// insertion sort has to move elements too far, as with hashes that are not
// random (AddHash of arbitrary values), it gives way to a general sort. Very
// small and very large sketches (lgK above 19) go to the general sort
// directly, the latter to bound the counts buffer at 2^21 entries.
func sortTable(out, table []uint64, theta uint64, counts []int32) []int32 {
	if len(out) < 64 || len(out) > 1<<20 {
		i := 0
		for _, h := range table {
			if h != 0 {
				out[i] = h
				i++
			}
		}
		slices.Sort(out)
		return counts
	}
	lgBuckets := bits.Len(uint(len(out)))
	shift := max(0, bits.Len64(theta-1)-lgBuckets)
	nb := 1 << lgBuckets
	counts = slices.Grow(counts[:0], nb+1)[:nb+1]
	clear(counts)
	for _, h := range table {
		if h != 0 {
			counts[h>>shift+1]++
		}
	}
	for b := 1; b <= nb; b++ {
		counts[b] += counts[b-1]
	}
	for _, h := range table {
		if h != 0 {
			b := h >> shift
			out[counts[b]] = h
			counts[b]++
		}
	}
	if !insertionSort(out, 8*len(out)) {
		slices.Sort(out)
	}
	return counts
}

// insertionSort sorts xs unless that takes more than budget element moves,
// in which case it stops and reports false, leaving xs a permutation of its
// input.
func insertionSort(xs []uint64, budget int) bool {
	for i := 1; i < len(xs); i++ {
		x := xs[i]
		j := i
		for j > 0 && xs[j-1] > x {
			xs[j] = xs[j-1]
			j--
		}
		xs[j] = x
		if budget -= i - j; budget < 0 {
			return false
		}
	}
	return true
}

// selectNth reorders xs so that xs[n] is the value a full sort would put
// there, with smaller values before it and larger ones after it
// (quickselect with a median-of-three pivot; xs holds distinct values). It
// falls back to sorting when partitioning makes too little progress, so the
// worst case stays O(len(xs) log len(xs)).
func selectNth(xs []uint64, n int) {
	lo, hi := 0, len(xs)-1
	budget := 3 * bits.Len(uint(len(xs)))
	for lo < hi {
		if budget == 0 {
			slices.Sort(xs[lo : hi+1])
			return
		}
		budget--
		p := partition(xs, lo, hi)
		switch {
		case n < p:
			hi = p - 1
		case n > p:
			lo = p + 1
		default:
			return
		}
	}
}

// partition places the median of xs[lo], xs[mid], xs[hi] at its final
// position p within xs[lo..hi], smaller values before and larger after, and
// returns p.
func partition(xs []uint64, lo, hi int) int {
	mid := lo + (hi-lo)/2
	if xs[mid] < xs[lo] {
		xs[mid], xs[lo] = xs[lo], xs[mid]
	}
	if xs[hi] < xs[lo] {
		xs[hi], xs[lo] = xs[lo], xs[hi]
	}
	if xs[hi] < xs[mid] {
		xs[hi], xs[mid] = xs[mid], xs[hi]
	}
	pivot := xs[mid]
	xs[mid], xs[hi] = xs[hi], xs[mid]
	p := lo
	for i := lo; i < hi; i++ {
		if xs[i] < pivot {
			xs[i], xs[p] = xs[p], xs[i]
			p++
		}
	}
	xs[p], xs[hi] = xs[hi], xs[p]
	return p
}

// CompactTheta is an immutable Theta sketch: theta, the retained hashes in
// ascending order and the empty flag. It is what (*Theta).Compact, the set
// operations (ThetaUnion, ThetaIntersect, ThetaANotB) and UnmarshalBinary
// return; the zero value is only a valid target for UnmarshalBinary.
//
// Every retained hash h satisfies 0 < h < theta <= 2^63-1, and the hashes
// are distinct. An empty sketch has theta 2^63-1 (1.0) and no hashes; a
// sketch with no hashes and theta 1.0 is always empty. A CompactTheta is safe
// for concurrent reads.
type CompactTheta struct {
	empty  bool
	theta  uint64
	hashes []uint64
}

// newCompactTheta wraps sorted, distinct hashes below theta, making the
// state canonical: no hashes with theta 1.0 means empty.
func newCompactTheta(empty bool, theta uint64, hashes []uint64) *CompactTheta {
	if empty || (len(hashes) == 0 && theta == thetaMax) {
		return &CompactTheta{empty: true, theta: thetaMax}
	}
	return &CompactTheta{theta: theta, hashes: hashes}
}

// IsEmpty reports whether the sketch has seen no values at all (as opposed
// to a sketch in estimation mode that retained no hash).
func (c *CompactTheta) IsEmpty() bool { return c.empty }

// IsEstimationMode reports whether theta is below 1.0, so that Estimate is
// an estimate rather than an exact count.
func (c *CompactTheta) IsEstimationMode() bool { return !c.empty && c.theta < thetaMax }

// NumRetained returns the number of retained hashes.
func (c *CompactTheta) NumRetained() int { return len(c.hashes) }

// Theta returns theta as a fraction in (0, 1]: the probability with which
// any one distinct value's hash is retained.
func (c *CompactTheta) Theta() float64 { return float64(c.theta) / float64(thetaMax) }

// ThetaLong returns theta as a 63-bit integer: 2^63-1 for 1.0.
func (c *CompactTheta) ThetaLong() uint64 { return c.theta }

// Hashes returns a copy of the retained hashes in ascending order.
func (c *CompactTheta) Hashes() []uint64 { return slices.Clone(c.hashes) }

// Estimate returns the estimated number of distinct values: the number of
// retained hashes divided by theta. It is exact when not in estimation mode
// and 0 for an empty sketch.
func (c *CompactTheta) Estimate() float64 {
	if c.empty {
		return 0
	}
	return float64(len(c.hashes)) / c.Theta()
}

// LowerBound returns the lower bound of the approximate confidence interval
// of numStdDev standard deviations (1, 2 or 3: about 68.3%, 95.4% and
// 99.7%) around Estimate. Outside estimation mode it is the exact count.
// Other numStdDev values give NaN. See theta_bounds.go for the method.
func (c *CompactTheta) LowerBound(numStdDev int) float64 {
	return c.bound(numStdDev, binomialLowerBound)
}

// UpperBound returns the upper bound of the approximate confidence interval
// of numStdDev standard deviations (1, 2 or 3) around Estimate. Outside
// estimation mode it is the exact count. Other numStdDev values give NaN.
func (c *CompactTheta) UpperBound(numStdDev int) float64 {
	return c.bound(numStdDev, binomialUpperBound)
}

// bound is LowerBound or UpperBound, with binomial the bound in estimation
// mode.
func (c *CompactTheta) bound(numStdDev int, binomial func(n uint64, theta float64, numStdDev int, delta float64) float64) float64 {
	delta, ok := thetaDelta(numStdDev)
	switch {
	case !ok:
		return math.NaN()
	case !c.IsEstimationMode():
		return float64(len(c.hashes))
	}
	return binomial(uint64(len(c.hashes)), c.Theta(), numStdDev, delta)
}
