package sketch

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
)

// Limits of a frequent-items summary, checked by NewFreq, Add and
// UnmarshalBinary.
const (
	// MaxFreqCapacity is the largest number of counters.
	MaxFreqCapacity = 1 << 20
	// MaxFreqItemLen is the longest item, in bytes.
	MaxFreqItemLen = 1 << 20
)

// Freq is a mergeable frequent-items summary: Misra–Gries in the mergeable
// form of Agarwal et al. ("Mergeable Summaries", 2012), which also keeps,
// as Space-Saving does (Metwally et al., 2005), each item's error. It
// keeps at most m = Capacity() counters for byte-string items and the NULL
// item, which takes a counter like any other. For a tracked item x it
// holds a counter c(x) >= 1 and an error e(x), and the summary holds an
// error offset Δ = MaxError(); the true count of x lies in
//
//	upper(x) = c(x) + Δ
//	lower(x) = upper(x) − e(x), with 0 <= e(x) <= Δ
//
// and that of an untracked item in [0, Δ]. The operations keep this so:
//
//   - Add w to a tracked x: c(x) += w, which raises both bounds by w.
//   - Add w to an untracked x: a counter c(x) = w with e(x) = Δ, as x may
//     have occurred up to Δ times before.
//   - Reduction, when more than m items are tracked: t, the (m+1)-th
//     largest counter, is subtracted from every counter, those left at 0
//     or below are dropped and Δ grows by t. The bounds of a kept item do
//     not move (c − t + Δ + t); a dropped item had upper <= t + Δ, the new
//     Δ, so [0, Δ] still holds for it.
//   - Merge: the Δs add, and so do each item's bounds, an item untracked
//     on one side counting [0, Δ] of that side: c(x) = c1(x) + c2(x) and
//     e(x) = e1(x) + e2(x), an untracked side adding 0 and its Δ. Then the
//     result is reduced.
//
// Lower bounds only ever add occurrences of their own item, so lower <=
// true, and the above gives true <= upper. Plain Misra–Gries uses the
// counter c(x) = upper(x) − Δ as the lower bound; e(x) makes lower bounds
// tighter for the items tracked since early on, the frequent ones, and
// never looser, so upper <= lower + MaxError() holds as well. A reduction
// removes at least (m+1)·t from the counters (the m+1 largest lose t each)
// while Δ grows by t, Add raises the counters and N alike, and Merge adds
// two summaries' inequalities (when the other's capacity is at least m),
// so after any sequence of Add and Merge
//
//	sum of counters + (m+1)·MaxError() <= N()
//
// hence MaxError() <= (N() − sum of counters)/(m+1) <= N()/(m+1). The
// lower bounds of different items count different occurrences, so they
// sum to at most N().
//
// Add does not reduce at every new item, which would cost O(m) each time:
// it lets up to 2m counters accumulate and then reduces to m, so a new
// item costs O(1) amortized. Every read (N excepted), MarshalBinary and
// Merge see the summary as if reduced to m counters now: readers compute
// that view without changing the summary, so the state and the bytes
// depend only on the Adds and Merges, not on when it was read. Create a
// Freq with NewFreq or UnmarshalBinary; the zero value is only a valid
// target for UnmarshalBinary. Reads may run concurrently with each other;
// Add and Merge may not run concurrently with anything.
type Freq struct {
	capacity int
	n        int64
	offset   int64            // Δ of the counters held, before the view's cut
	entries  []freqEntry      // tracked items, NULL included, in no order
	index    map[string]int32 // non-NULL item -> position in entries
	nullPos  int32            // 1 + position of the NULL item in entries, 0 if untracked
	scratch  []int64          // counters, reused by reduce
}

var errUninitializedFreq = errors.New("uninitialized frequent-items summary")

type freqEntry struct {
	item  string
	null  bool
	count int64 // c(x) >= 1, relative to offset
	err   int64 // e(x): upper − lower
}

// FreqItem is a tracked item with the bounds of its true count. Null
// reports the NULL item, whose Item is nil.
type FreqItem struct {
	Item  []byte
	Null  bool
	Lower int64
	Upper int64
}

// NewFreq returns an empty summary with capacity counters, 1 <= capacity <=
// MaxFreqCapacity. It holds up to 2·capacity counters between reductions.
func NewFreq(capacity int) (*Freq, error) {
	if capacity < 1 || capacity > MaxFreqCapacity {
		return nil, fmt.Errorf("sketch: new freq: capacity %d outside [1, %d]: %w",
			capacity, MaxFreqCapacity, ErrInvalidParams)
	}
	return newFreq(capacity, 0), nil
}

func newFreq(capacity, items int) *Freq {
	return &Freq{capacity: capacity, index: make(map[string]int32, items),
		entries: make([]freqEntry, 0, items)}
}

// Capacity returns m, the number of counters kept.
func (f *Freq) Capacity() int { return f.capacity }

// N returns the total count added: the sum of every Add's count, over all
// merged summaries.
func (f *Freq) N() int64 { return f.n }

// Add adds count occurrences of item (an int64 is best added as its 8
// big-endian bytes, a text as its bytes). A count of 0 does nothing. It
// fails, leaving f unchanged, with an error wrapping ErrInvalidParams if
// count is negative, item is longer than MaxFreqItemLen or f was not made
// by NewFreq or UnmarshalBinary, and ErrOverflow if N would pass
// math.MaxInt64.
func (f *Freq) Add(item []byte, count int64) error {
	if err := f.checkAdd(len(item), count); err != nil {
		return fmt.Errorf("sketch: freq add: %w", err)
	}
	if count == 0 {
		return nil
	}
	f.n += count
	if i, ok := f.index[string(item)]; ok {
		f.entries[i].count += count
		return nil
	}
	f.insert(freqEntry{item: string(item), count: count, err: f.offset})
	f.maybeReduce()
	return nil
}

// AddNull adds count occurrences of the NULL item, as Add does for others.
func (f *Freq) AddNull(count int64) error {
	if err := f.checkAdd(0, count); err != nil {
		return fmt.Errorf("sketch: freq add null: %w", err)
	}
	if count == 0 {
		return nil
	}
	f.n += count
	if f.nullPos > 0 {
		f.entries[f.nullPos-1].count += count
		return nil
	}
	f.insert(freqEntry{null: true, count: count, err: f.offset})
	f.maybeReduce()
	return nil
}

func (f *Freq) checkAdd(itemLen int, count int64) error {
	switch {
	case f.capacity == 0:
		return fmt.Errorf("%w: %w", errUninitializedFreq, ErrInvalidParams)
	case count < 0:
		return fmt.Errorf("negative count %d: %w", count, ErrInvalidParams)
	case itemLen > MaxFreqItemLen:
		return fmt.Errorf("item of %d bytes, at most %d: %w", itemLen, MaxFreqItemLen, ErrInvalidParams)
	case count > math.MaxInt64-f.n:
		return fmt.Errorf("count %d on top of N %d: %w", count, f.n, ErrOverflow)
	}
	return nil
}

func (f *Freq) insert(e freqEntry) {
	if e.null {
		f.nullPos = int32(len(f.entries)) + 1
	} else {
		f.index[e.item] = int32(len(f.entries))
	}
	f.entries = append(f.entries, e)
}

// lookup returns the position of item (or of NULL) in entries.
func (f *Freq) lookup(item string, null bool) (int, bool) {
	if null {
		return int(f.nullPos) - 1, f.nullPos > 0
	}
	i, ok := f.index[item]
	return int(i), ok
}

func (f *Freq) maybeReduce() {
	if len(f.entries) > 2*f.capacity {
		f.reduce()
	}
}

// reduce brings the summary down to at most m counters: it subtracts the
// cut from every counter, drops those left at 0 or below and adds the cut
// to the offset.
func (f *Freq) reduce() {
	if len(f.entries) <= f.capacity {
		return
	}
	f.scratch = f.appendCounts(f.scratch[:0])
	t := kthLargest(f.scratch, f.capacity+1)
	f.offset += t
	kept := f.entries[:0]
	for _, e := range f.entries {
		if e.count > t {
			e.count -= t
			kept = append(kept, e)
		}
	}
	clear(f.entries[len(kept):])
	f.entries = kept
	f.reindex()
}

func (f *Freq) reindex() {
	clear(f.index)
	f.nullPos = 0
	for i, e := range f.entries {
		if e.null {
			f.nullPos = int32(i) + 1
		} else {
			f.index[e.item] = int32(i)
		}
	}
}

func (f *Freq) appendCounts(dst []int64) []int64 {
	for _, e := range f.entries {
		dst = append(dst, e.count)
	}
	return dst
}

// cut is what a reduction would subtract now: the (m+1)-th largest
// counter, or 0 if at most m items are tracked. Readers see every counter
// minus the cut (dropping those left at 0 or below) and the offset plus
// the cut, without changing f.
func (f *Freq) cut() int64 {
	if len(f.entries) <= f.capacity {
		return 0
	}
	return kthLargest(f.appendCounts(nil), f.capacity+1)
}

// MaxError returns Δ, the error bound shared by every item: each item's
// true count is at most its lower bound plus MaxError, and an untracked
// item's true count is at most MaxError. It is at most (N − the sum of the
// counters)/(Capacity()+1), so at most N/(Capacity()+1), and 0 while no
// more than Capacity() distinct items were ever added.
func (f *Freq) MaxError() int64 { return f.offset + f.cut() }

// Bounds returns bounds of item's true count: those of Freq for a tracked
// item, 0 and MaxError() for another.
func (f *Freq) Bounds(item []byte) (lower, upper int64) {
	return f.bounds(string(item), false)
}

// NullBounds returns bounds of the NULL item's true count, as Bounds does
// for other items.
func (f *Freq) NullBounds() (lower, upper int64) { return f.bounds("", true) }

func (f *Freq) bounds(item string, null bool) (lower, upper int64) {
	t := f.cut()
	maxErr := f.offset + t
	i, ok := f.lookup(item, null)
	if !ok || f.entries[i].count <= t {
		return 0, maxErr
	}
	e := f.entries[i]
	return e.count + f.offset - e.err, e.count + f.offset
}

// Items returns the tracked items (at most Capacity()) with their bounds,
// by decreasing lower bound, then decreasing upper bound; equal bounds put
// byte strings in ascending order and NULL last.
func (f *Freq) Items() []FreqItem {
	t := f.cut()
	items := make([]FreqItem, 0, min(len(f.entries), f.capacity))
	for _, e := range f.entries {
		if e.count <= t {
			continue
		}
		it := FreqItem{Null: e.null, Upper: e.count + f.offset}
		it.Lower = it.Upper - e.err
		if !e.null {
			it.Item = []byte(e.item)
		}
		items = append(items, it)
	}
	slices.SortFunc(items, compareFreqItems)
	return items
}

func compareFreqItems(a, b FreqItem) int {
	if c := cmp.Compare(b.Lower, a.Lower); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Upper, a.Upper); c != 0 {
		return c
	}
	if a.Null || b.Null {
		return cmpBool(a.Null, b.Null)
	}
	return bytes.Compare(a.Item, b.Item)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Top returns the first k of Items(): the k items with the largest lower
// bounds. These are not necessarily the true top k; Candidates says which
// items can be.
func (f *Freq) Top(k int) []FreqItem {
	items := f.Items()
	return items[:max(0, min(k, len(items)))]
}

// Candidates returns every tracked item that can be among the k most
// frequent, in the order of Items, and whether that list is complete, i.e.
// no untracked item can be among them.
//
// An item x is among the true top k when fewer than k items have a true
// count above x's (ties included, as any tie-break may pick x). Let L be
// the k-th largest lower bound. If upper(x) < L, the k items whose lower
// bound is at least L all have true counts >= L > upper(x) >= true(x), so x
// is not among the top k. Every member of the top k therefore has
// upper >= L, which is the test applied here; and it is the smallest set
// the bounds allow, since an item with upper(x) >= L whose true count were
// its upper bound, with every other item at its lower bound, would have
// fewer than k items above it. An untracked item's upper bound is
// MaxError(), so the list is complete when MaxError() < L, or, with fewer
// than k items tracked, when MaxError() is 0 (every item that occurred is
// then tracked exactly). When it is not complete, an exact answer needs
// more than the candidates.
func (f *Freq) Candidates(k int) (items []FreqItem, complete bool) {
	items = f.Items()
	if k < 1 {
		return items[:0], true
	}
	if len(items) < k {
		return items, f.MaxError() == 0
	}
	l := items[k-1].Lower
	items = slices.DeleteFunc(items, func(it FreqItem) bool { return it.Upper < l })
	return items, f.MaxError() < l
}

// Merge adds o into f: afterwards f summarizes both inputs, with N the sum
// of theirs (see Freq for how counters, errors and the error offset
// combine), reduced to f's capacity, so MaxError is still at most
// N/(Capacity()+1). o's capacity must be at least f's: a summary can be
// merged into one of equal or smaller capacity. o is not changed, and may
// be f.
//
// Merge fails, leaving f unchanged, with an error wrapping ErrInvalidParams
// if f or o was not made by NewFreq or UnmarshalBinary, ErrIncompatible if
// o has a smaller capacity, and ErrOverflow if the total count would pass
// math.MaxInt64.
func (f *Freq) Merge(o *Freq) error {
	if err := f.checkMerge(o); err != nil {
		return fmt.Errorf("sketch: freq merge: %w", err)
	}
	if o == f {
		o = f.clone()
	}
	t := o.cut()
	f.reduce()
	deltaF, deltaO := f.offset, o.offset+t
	// Items only in f gain o's Δ as error; those in both get o's own error
	// instead, below.
	for i := range f.entries {
		f.entries[i].err += deltaO
	}
	for _, e := range o.entries {
		if e.count > t {
			f.mergeEntry(e, t, deltaF, deltaO)
		}
	}
	f.n += o.n
	f.offset = deltaF + deltaO
	f.reduce()
	return nil
}

// mergeEntry adds o's entry e, seen after o's cut t, to f.
func (f *Freq) mergeEntry(e freqEntry, t, deltaF, deltaO int64) {
	e.count -= t
	i, ok := f.lookup(e.item, e.null)
	if !ok {
		e.err += deltaF
		f.insert(e)
		return
	}
	f.entries[i].count += e.count
	f.entries[i].err += e.err - deltaO
}

func (f *Freq) checkMerge(o *Freq) error {
	switch {
	case f.capacity == 0 || o == nil || o.capacity == 0:
		return fmt.Errorf("%w: %w", errUninitializedFreq, ErrInvalidParams)
	case o.capacity < f.capacity:
		return fmt.Errorf("capacity %d into capacity %d: %w", o.capacity, f.capacity, ErrIncompatible)
	case o.n > math.MaxInt64-f.n:
		return fmt.Errorf("N %d plus N %d: %w", f.n, o.n, ErrOverflow)
	}
	return nil
}

// Clone returns an independent copy of f.
func (f *Freq) Clone() *Freq {
	return f.clone()
}

func (f *Freq) clone() *Freq {
	c := *f
	c.entries = slices.Clone(f.entries)
	c.index = maps.Clone(f.index)
	c.scratch = nil
	return &c
}

// kthLargest returns the k-th largest value of a, 1 <= k <= len(a),
// reordering a. It is a quickselect with a median-of-three pivot and a
// three-way partition (counters repeat a lot); should 2·log2(len(a))
// rounds not suffice, it sorts what is left, so it never takes more than
// O(n log n).
func kthLargest(a []int64, k int) int64 {
	lo, hi, target := 0, len(a), k-1
	for rounds := 2 * bits.Len(uint(len(a))); rounds > 0 && hi-lo > 16; rounds-- {
		s := a[lo:hi]
		pivot := medianOf3(s[0], s[len(s)/2], s[len(s)-1])
		i, j := partitionDesc(s, pivot)
		switch {
		case target < lo+i:
			hi = lo + i
		case target >= lo+j:
			lo += j
		default:
			return pivot
		}
	}
	slices.SortFunc(a[lo:hi], func(x, y int64) int { return cmp.Compare(y, x) })
	return a[target]
}

func medianOf3(a, b, c int64) int64 {
	return max(min(a, b), min(max(a, b), c))
}

// partitionDesc reorders s into the values above pivot, then those equal
// to it, then those below, and returns where the equal run starts and ends.
func partitionDesc(s []int64, pivot int64) (i, j int) {
	k := len(s)
	for j < k {
		switch v := s[j]; {
		case v > pivot:
			s[i], s[j] = v, s[i]
			i++
			j++
		case v < pivot:
			k--
			s[j], s[k] = s[k], v
		default:
			j++
		}
	}
	return i, j
}
