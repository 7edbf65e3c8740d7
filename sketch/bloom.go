package sketch

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Bloom filter limits, checked by NewBloom and UnmarshalBinary.
const (
	// MaxBloomBits is the largest filter: 2^33 bits, 1 GiB.
	MaxBloomBits = 1 << 33
	// MaxBloomHashes is the largest number of bits set per item.
	MaxBloomHashes = 32

	// bloomSeed is the MurmurHash3 seed of item hashes. It is part of the
	// format: changing it breaks stored filters.
	bloomSeed = 0x4246
)

var errUninitializedBloom = errors.New("uninitialized bloom filter")

// Bloom is a Bloom filter (Bloom, 1970): m bits, of which each added item
// sets k. Contains reports whether all of an item's k bits are set: never
// false for an added item, and true for an item never added with the
// false-positive probability of the filter's fill.
//
// Shape. For a design of n items and false-positive rate p, NewBloom takes
// m = ceil(−n·ln p / (ln 2)²) bits (rounded up to whole 64-bit words) and
// k = round((m/n)·ln 2) bits per item, which minimise m for p. The rate
// after n' distinct items is then about (1 − e^(−k·n'/m))^k
// (FalsePositiveRate), recomputed for the rounded k and m, so slightly off
// p at n' = n; past n it climbs fast (at 2n, p = 1 % has become about
// 16 %): a filter cannot grow, and saturates.
//
// A filter cannot forget: clearing an item's bits would clear other items'.
// Merge ORs two filters of one shape, which is the filter of both inputs.
//
// Bits are chosen by double hashing: MurmurHash3 x64 128 of the item's
// bytes with seed 0x4246 gives (h1, h2); the i-th bit of the item is the
// high 64 bits of fmix64(h1 + i·h2) × m, as the columns of a CountMin.
//
// Create a Bloom with NewBloom or UnmarshalBinary; the zero value is only
// a valid target for UnmarshalBinary. Contains calls may run concurrently
// with each other; Add and Merge may not run concurrently with anything.
type Bloom struct {
	m     uint64 // bits, a multiple of 64
	k     int
	n     uint64 // items added, repeats included (saturating)
	words []uint64
}

// NewBloom returns an empty filter for n distinct items at false-positive
// rate p (n ≥ 1, 0 < p < 1), shaped as the type's documentation says, with
// at most MaxBloomBits bits. For example n 1 000 000 and p 0.01 give
// 9 585 088 bits (1.2 MB, 9.6 bits an item) and 7 hashes.
func NewBloom(n uint64, p float64) (*Bloom, error) {
	m, k, err := bloomShape(n, p)
	if err != nil {
		return nil, fmt.Errorf("sketch: new bloom: %w", err)
	}
	return newBloom(m, k), nil
}

func newBloom(m uint64, k int) *Bloom {
	return &Bloom{m: m, k: k, words: make([]uint64, m/64)}
}

func bloomShape(n uint64, p float64) (m uint64, k int, err error) {
	if n == 0 || !(p > 0 && p < 1) {
		return 0, 0, fmt.Errorf("n %d and p %v: want n ≥ 1 and 0 < p < 1: %w", n, p, ErrInvalidParams)
	}
	bitsNeeded := math.Ceil(-float64(n) * math.Log(p) / (math.Ln2 * math.Ln2))
	if bitsNeeded > MaxBloomBits {
		return 0, 0, fmt.Errorf("n %d at p %v needs %.0f bits, more than %d: %w", n, p, bitsNeeded, uint64(MaxBloomBits), ErrInvalidParams)
	}
	m = (uint64(bitsNeeded) + 63) / 64 * 64
	k = int(math.Round(float64(m) / float64(n) * math.Ln2))
	return m, min(max(k, 1), MaxBloomHashes), nil
}

func checkBloomShape(m, k uint64) error {
	if m == 0 || m%64 != 0 || m > MaxBloomBits || k == 0 || k > MaxBloomHashes {
		return fmt.Errorf("%d bits and %d hashes: want a multiple of 64 up to %d bits and 1 to %d hashes: %w",
			m, k, uint64(MaxBloomBits), MaxBloomHashes, ErrInvalidParams)
	}
	return nil
}

// Bits is m, the filter's size in bits.
func (b *Bloom) Bits() uint64 { return b.m }

// Hashes is k, the bits set per item.
func (b *Bloom) Hashes() int { return b.k }

// Count is the number of Add calls the filter holds, repeats included (an
// upper bound of the distinct items), at most math.MaxInt64.
func (b *Bloom) Count() uint64 { return b.n }

// FalsePositiveRate is the rate at which Contains reports an item never
// added once n distinct items were: (1 − e^(−k·n/m))^k.
func (b *Bloom) FalsePositiveRate(n uint64) float64 {
	return math.Pow(-math.Expm1(-float64(b.k)*float64(n)/float64(b.m)), float64(b.k))
}

// FillRatio is the share of bits set; FillRatio^k is the chance that an
// item never added is reported, whatever was added.
func (b *Bloom) FillRatio() float64 {
	set := 0
	for _, w := range b.words {
		set += bits.OnesCount64(w)
	}
	return float64(set) / float64(b.m)
}

// bit is the i-th bit of the item hashed to (h1, h2).
func (b *Bloom) bit(h1, h2 uint64, i int) uint64 {
	hi, _ := bits.Mul64(fmix64(h1+uint64(i)*h2), b.m)
	return hi
}

// Add sets item's bits. It panics on the zero value.
func (b *Bloom) Add(item []byte) {
	if b.m == 0 {
		panic(errUninitializedBloom)
	}
	h1, h2 := murmur3(item, bloomSeed)
	for i := range b.k {
		j := b.bit(h1, h2, i)
		b.words[j/64] |= 1 << (j % 64)
	}
	if b.n < math.MaxInt64 {
		b.n++
	}
}

// Contains reports whether all of item's bits are set: true for every
// item added, and for others at the filter's false-positive rate.
func (b *Bloom) Contains(item []byte) bool {
	if b.m == 0 {
		return false
	}
	h1, h2 := murmur3(item, bloomSeed)
	for i := range b.k {
		j := b.bit(h1, h2, i)
		if b.words[j/64]&(1<<(j%64)) == 0 {
			return false
		}
	}
	return true
}

// Merge ORs o into b: b then holds every item either held. The two must
// have one shape (bits and hashes), else ErrIncompatible.
func (b *Bloom) Merge(o *Bloom) error {
	if b.m == 0 || o.m == 0 {
		return fmt.Errorf("sketch: merge bloom: %w: %w", errUninitializedBloom, ErrInvalidParams)
	}
	if b.m != o.m || b.k != o.k {
		return fmt.Errorf("sketch: merge bloom: %d bits, %d hashes with %d bits, %d hashes: %w", b.m, b.k, o.m, o.k, ErrIncompatible)
	}
	for i, w := range o.words {
		b.words[i] |= w
	}
	b.n = min(b.n+o.n, math.MaxInt64) // both are at most MaxInt64: no wrap
	return nil
}

// Clone returns an independent copy of b.
func (b *Bloom) Clone() *Bloom {
	c := *b
	c.words = append([]uint64(nil), b.words...)
	return &c
}
