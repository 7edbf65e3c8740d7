package sketch

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Count-Min limits, checked by NewCountMin and UnmarshalBinary.
const (
	// MaxCountMinDepth is the largest number of rows: δ down to e^-32.
	MaxCountMinDepth = 32
	// MaxCountMinCells is the largest width × depth: 32 MiB of counters.
	MaxCountMinCells = 1 << 22

	// countMinSeed is the MurmurHash3 seed of item hashes, and
	// countMinNullSeed that of the NULL item (hashed as no bytes). They are
	// part of the format: changing them breaks stored sketches.
	countMinSeed     = 0x434d
	countMinNullSeed = 0x434e
)

var errUninitializedCountMin = errors.New("uninitialized count-min sketch")

// CountMin is a Count-Min sketch (Cormode and Muthukrishnan, 2005) with
// conservative update: depth rows of width counters. Item x is counted in
// one cell per row, cell c_i(x) of row i, and its estimate is the smallest
// of those cells. Adding count to x raises each of its cells to at least
// estimate + count and leaves the others alone (conservative update, Estan
// and Varghese 2002), instead of adding count to all of them.
//
// Guarantees. The estimate is never below the true count: each cell of x
// holds at least x's true count (adding to x raises all of x's cells past
// its previous estimate plus count, and cells never decrease), for every
// item, whatever the hashes. No cell is ever above the same cell of a plain
// Count-Min sketch of the same input, which holds the sum of the counts of
// the items hashed to it. So, as for plain Count-Min with width
// ceil(e/ε) and depth ceil(ln(1/δ)), an item's estimate exceeds its true
// count by more than ε·N with probability at most δ (over the hashes).
//
// Merge adds the cells. The merged sketch is not the conservative-update
// sketch of the combined input (that one can be smaller), but each cell is
// still at least the sum of the true counts it holds, and at most the
// plain Count-Min cell of the combined input: estimates stay upper bounds
// and the ε·N, δ guarantee holds for the total N.
//
// Cells are chosen by double hashing: MurmurHash3 x64 128 of the item's
// bytes with seed 0x434d gives (h1, h2); the cell of row i is the high 64
// bits of fmix64(h1 + i·h2) × width. fmix64 (MurmurHash3's finalizer)
// makes the rows independent in practice: without it, the columns of two
// items that collide in two rows would be close in every row.
//
// Create a CountMin with NewCountMin or UnmarshalBinary; the zero value is
// only a valid target for UnmarshalBinary. Estimates may run concurrently
// with each other; Add and Merge may not run concurrently with anything.
type CountMin struct {
	width int
	depth int
	n     int64
	cells []int64 // row i is cells[i*width : (i+1)*width]
}

// NewCountMin returns an empty sketch whose estimates exceed true counts by
// at most eps·N with probability at least 1 − delta: width ceil(e/eps) and
// depth ceil(ln(1/delta)) (at least 1), 0 < eps < 1 and 0 < delta < 1, with
// depth at most MaxCountMinDepth and width × depth at most
// MaxCountMinCells. For example eps 0.001 and delta 0.01 give 2719 × 5
// cells.
func NewCountMin(eps, delta float64) (*CountMin, error) {
	width, depth, err := countMinShape(eps, delta)
	if err != nil {
		return nil, fmt.Errorf("sketch: new count-min: %w", err)
	}
	return newCountMin(width, depth), nil
}

func newCountMin(width, depth int) *CountMin {
	return &CountMin{width: width, depth: depth, cells: make([]int64, width*depth)}
}

func countMinShape(eps, delta float64) (width, depth int, err error) {
	if !(eps > 0 && eps < 1) || !(delta > 0 && delta < 1) {
		return 0, 0, fmt.Errorf("eps %v and delta %v must be in (0, 1): %w", eps, delta, ErrInvalidParams)
	}
	w := math.Ceil(math.E / eps)
	d := max(math.Ceil(math.Log(1/delta)), 1)
	if d > MaxCountMinDepth || w*d > MaxCountMinCells {
		return 0, 0, fmt.Errorf("eps %v and delta %v need %v × %v cells, at most depth %d and %d cells: %w",
			eps, delta, w, d, MaxCountMinDepth, MaxCountMinCells, ErrInvalidParams)
	}
	return int(w), int(d), nil
}

func checkCountMinShape(width, depth uint64) error {
	if width < 1 || depth < 1 || depth > MaxCountMinDepth || width > MaxCountMinCells/depth {
		return fmt.Errorf("width %d and depth %d: want depth in [1, %d] and width × depth in [1, %d]: %w",
			width, depth, MaxCountMinDepth, MaxCountMinCells, ErrInvalidParams)
	}
	return nil
}

// Width returns the number of cells per row.
func (c *CountMin) Width() int { return c.width }

// Depth returns the number of rows.
func (c *CountMin) Depth() int { return c.depth }

// N returns the total count added, over all merged sketches.
func (c *CountMin) N() int64 { return c.n }

// Epsilon returns e/width: estimates exceed true counts by at most
// Epsilon()·N with probability at least 1 − Delta().
func (c *CountMin) Epsilon() float64 { return math.E / float64(c.width) }

// Delta returns e^−depth.
func (c *CountMin) Delta() float64 { return math.Exp(-float64(c.depth)) }

// columns holds the cell of each row for one item, as indices into cells.
type columns [MaxCountMinDepth]int

func (c *CountMin) columnsOf(h1, h2 uint64, cols *columns) {
	for i := range c.depth {
		hi, _ := bits.Mul64(fmix64(h1+uint64(i)*h2), uint64(c.width))
		cols[i] = i*c.width + int(hi)
	}
}

// Add adds count occurrences of item (encoded as for Freq.Add) with
// conservative update. A count of 0 does nothing. It fails, leaving c
// unchanged, with an error wrapping ErrInvalidParams if count is negative
// or c was not made by NewCountMin or UnmarshalBinary, and ErrOverflow if N
// would pass math.MaxInt64.
func (c *CountMin) Add(item []byte, count int64) error {
	if err := c.checkAdd(count); err != nil {
		return fmt.Errorf("sketch: count-min add: %w", err)
	}
	h1, h2 := murmur3(item, countMinSeed)
	c.add(h1, h2, count)
	return nil
}

// AddNull adds count occurrences of the NULL item, as Add does for others.
func (c *CountMin) AddNull(count int64) error {
	if err := c.checkAdd(count); err != nil {
		return fmt.Errorf("sketch: count-min add null: %w", err)
	}
	h1, h2 := murmur3("", countMinNullSeed)
	c.add(h1, h2, count)
	return nil
}

func (c *CountMin) checkAdd(count int64) error {
	switch {
	case c.width == 0:
		return fmt.Errorf("%w: %w", errUninitializedCountMin, ErrInvalidParams)
	case count < 0:
		return fmt.Errorf("negative count %d: %w", count, ErrInvalidParams)
	case count > math.MaxInt64-c.n:
		return fmt.Errorf("count %d on top of N %d: %w", count, c.n, ErrOverflow)
	}
	return nil
}

func (c *CountMin) add(h1, h2 uint64, count int64) {
	if count == 0 {
		return
	}
	var cols columns
	c.columnsOf(h1, h2, &cols)
	target := c.min(&cols) + count
	for _, j := range cols[:c.depth] {
		c.cells[j] = max(c.cells[j], target)
	}
	c.n += count
}

func (c *CountMin) min(cols *columns) int64 {
	est := int64(math.MaxInt64)
	for _, j := range cols[:c.depth] {
		est = min(est, c.cells[j])
	}
	return est
}

// Estimate returns an upper bound of item's true count: at least the true
// count always, and at most ε·N above it with probability 1 − δ.
func (c *CountMin) Estimate(item []byte) int64 {
	h1, h2 := murmur3(item, countMinSeed)
	return c.estimate(h1, h2)
}

// EstimateNull returns an upper bound of the NULL item's true count.
func (c *CountMin) EstimateNull() int64 {
	h1, h2 := murmur3("", countMinNullSeed)
	return c.estimate(h1, h2)
}

func (c *CountMin) estimate(h1, h2 uint64) int64 {
	if c.width == 0 {
		return 0
	}
	var cols columns
	c.columnsOf(h1, h2, &cols)
	return c.min(&cols)
}

// Merge adds o's cells to c's, so that c bounds the counts of both inputs
// (see CountMin for what conservative update keeps). Both must have the
// same width and depth. o is not changed, and may be c. It fails, leaving
// c unchanged, with an error wrapping ErrInvalidParams if c or o was not
// made by NewCountMin or UnmarshalBinary, ErrIncompatible if the shapes
// differ, and ErrOverflow if the total count would pass math.MaxInt64.
func (c *CountMin) Merge(o *CountMin) error {
	switch {
	case c.width == 0 || o == nil || o.width == 0:
		return fmt.Errorf("sketch: count-min merge: %w: %w", errUninitializedCountMin, ErrInvalidParams)
	case o.width != c.width || o.depth != c.depth:
		return fmt.Errorf("sketch: count-min merge: %d × %d into %d × %d: %w",
			o.width, o.depth, c.width, c.depth, ErrIncompatible)
	case o.n > math.MaxInt64-c.n:
		return fmt.Errorf("sketch: count-min merge: N %d plus N %d: %w", c.n, o.n, ErrOverflow)
	}
	// Every cell is at most its sketch's N, so the sums do not overflow.
	for i, v := range o.cells {
		c.cells[i] += v
	}
	c.n += o.n
	return nil
}

// Clone returns an independent copy of c.
func (c *CountMin) Clone() *CountMin {
	d := *c
	d.cells = slices.Clone(c.cells)
	return &d
}
