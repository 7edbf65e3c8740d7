package sketch

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Serialized frequent-items summaries: see "Frequent items byte layout" in
// the package documentation.
const (
	freqTag      = 'F'
	freqVersion  = 1
	freqFlagNull = 1 << 0
)

// MarshalBinary returns the summary in the format of "Frequent items byte
// layout" (package documentation), as reduced to Capacity() counters,
// items in ascending byte order: equal summaries give equal bytes. It
// implements encoding.BinaryMarshaler.
func (f *Freq) MarshalBinary() ([]byte, error) {
	return f.AppendBinary(nil)
}

// AppendBinary appends the serialized summary to dst and returns the
// extended slice. It implements encoding.BinaryAppender.
func (f *Freq) AppendBinary(dst []byte) ([]byte, error) {
	if f.capacity == 0 {
		return dst, fmt.Errorf("sketch: marshal freq: %w: %w", errUninitializedFreq, ErrInvalidParams)
	}
	t := f.cut()
	entries := make([]freqEntry, 0, min(len(f.entries), f.capacity))
	for _, e := range f.entries {
		if e.count > t {
			e.count -= t
			entries = append(entries, e)
		}
	}
	// NULL first, then the items by their bytes.
	slices.SortFunc(entries, func(a, b freqEntry) int {
		return cmp.Or(-cmpBool(a.null, b.null), strings.Compare(a.item, b.item))
	})
	size := 3 + 4*binary.MaxVarintLen64
	for _, e := range entries {
		size += len(e.item) + 3*binary.MaxVarintLen32
	}
	dst = slices.Grow(dst, size)
	var flags byte
	items := len(entries)
	if items > 0 && entries[0].null {
		flags |= freqFlagNull
		items--
	}
	dst = append(dst, freqTag, freqVersion, flags)
	dst = binary.AppendUvarint(dst, uint64(f.capacity))
	dst = binary.AppendUvarint(dst, uint64(f.n))
	dst = binary.AppendUvarint(dst, uint64(f.offset+t))
	dst = binary.AppendUvarint(dst, uint64(items))
	for _, e := range entries {
		if !e.null {
			dst = binary.AppendUvarint(dst, uint64(len(e.item)))
			dst = append(dst, e.item...)
		}
		dst = binary.AppendUvarint(dst, uint64(e.count))
		dst = binary.AppendUvarint(dst, uint64(e.err))
	}
	return dst, nil
}

// UnmarshalBinary decodes a summary written by MarshalBinary. It
// implements encoding.BinaryUnmarshaler.
//
// Invalid input is rejected with an error wrapping ErrTruncated,
// ErrType, ErrVersion, ErrInvalidParams or ErrCorrupt (see "Frequent
// items byte layout"), and the receiver is left unchanged.
func (f *Freq) UnmarshalBinary(data []byte) error {
	return decodeInto(f, "freq", decodeFreq, data)
}

// freqHeader is the decoded part before the items.
type freqHeader struct {
	capacity int
	n        int64
	maxErr   int64
	items    int // non-NULL items
	hasNull  bool
}

func decodeFreq(data []byte) (*Freq, error) {
	if err := checkTagVersion(data, 3, freqTag, "frequent items", freqVersion); err != nil {
		return nil, err
	}
	if data[2]&^freqFlagNull != 0 {
		return nil, fmt.Errorf("flags %#02x: unknown bits set: %w", data[2], ErrCorrupt)
	}
	r := &varintReader{b: data[3:]}
	hdr, err := readFreqHeader(r, data[2]&freqFlagNull != 0)
	if err != nil {
		return nil, err
	}
	f := newFreq(hdr.capacity, hdr.items+1)
	f.n, f.offset = hdr.n, hdr.maxErr
	if hdr.hasNull {
		e, err := readFreqCounts(r, f)
		if err != nil {
			return nil, fmt.Errorf("NULL item: %w", err)
		}
		e.null = true
		f.insert(e)
	}
	if err := readFreqItems(r, f, hdr.items, string(data)); err != nil {
		return nil, err
	}
	if err := checkFreqTotals(f); err != nil {
		return nil, err
	}
	return f, r.end()
}

// readFreqHeader reads capacity, N, the error offset and the item count,
// and checks them against each other and against the bytes left (each
// item takes at least 3 bytes) before anything is allocated.
func readFreqHeader(r *varintReader, hasNull bool) (freqHeader, error) {
	hdr := freqHeader{hasNull: hasNull}
	capacity, err := r.uvarint("capacity")
	if err != nil {
		return hdr, err
	}
	if capacity < 1 || capacity > MaxFreqCapacity {
		return hdr, fmt.Errorf("capacity %d outside [1, %d]: %w", capacity, MaxFreqCapacity, ErrInvalidParams)
	}
	hdr.capacity = int(capacity)
	if hdr.n, err = r.count("N"); err != nil {
		return hdr, err
	}
	if hdr.maxErr, err = r.int64("error offset", hdr.n); err != nil {
		return hdr, err
	}
	items, err := r.int64("item count", int64(hdr.capacity))
	if err != nil {
		return hdr, err
	}
	hdr.items = int(items)
	if hasNull && hdr.items == hdr.capacity {
		return hdr, fmt.Errorf("%d items and NULL, capacity %d: %w", hdr.items, hdr.capacity, ErrCorrupt)
	}
	if need := 3 * hdr.items; need > len(r.b) {
		return hdr, fmt.Errorf("%d items need at least %d bytes, %d left: %w", hdr.items, need, len(r.b), ErrTruncated)
	}
	return hdr, nil
}

// readFreqItems reads the items, which must be distinct, in ascending
// byte order and at most MaxFreqItemLen bytes long. Items are cut from
// text, a copy of the whole input made once, rather than copied one by
// one.
func readFreqItems(r *varintReader, f *Freq, items int, text string) error {
	var prev string
	for i := range items {
		e, err := readFreqItem(r, f, text)
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		if i > 0 && prev >= e.item {
			return fmt.Errorf("item %d %q not above item %d %q: %w", i, e.item, i-1, prev, ErrCorrupt)
		}
		f.insert(e)
		prev = e.item
	}
	return nil
}

func readFreqItem(r *varintReader, f *Freq, text string) (freqEntry, error) {
	size, err := r.int64("length", MaxFreqItemLen)
	if err != nil {
		return freqEntry{}, err
	}
	start := len(text) - len(r.b)
	if _, err := r.bytes("bytes", int(size)); err != nil {
		return freqEntry{}, err
	}
	e, err := readFreqCounts(r, f)
	e.item = text[start : start+int(size)]
	return e, err
}

// readFreqCounts reads an item's counter, in [1, N], and its error, at
// most the error offset.
func readFreqCounts(r *varintReader, f *Freq) (freqEntry, error) {
	var e freqEntry
	var err error
	if e.count, err = r.int64("count", f.n); err != nil {
		return e, err
	}
	if e.count == 0 {
		return e, fmt.Errorf("count is 0: %w", ErrCorrupt)
	}
	e.err, err = r.int64("error", f.offset)
	return e, err
}

// checkFreqTotals checks what any sequence of Add and Merge keeps: the
// counters sum to at most N − (capacity+1)·(error offset). As there are at
// most capacity items, the lower bounds (counter + offset − error) then
// sum to at most N as well.
func checkFreqTotals(f *Freq) error {
	var counts int64
	for _, e := range f.entries {
		if e.count > f.n-counts {
			return fmt.Errorf("counters sum past N %d: %w", f.n, ErrCorrupt)
		}
		counts += e.count
	}
	if f.offset > (f.n-counts)/int64(f.capacity+1) {
		return fmt.Errorf("error offset %d with counters summing to %d, N %d and capacity %d: "+
			"(capacity+1)·offset + counters > N: %w", f.offset, counts, f.n, f.capacity, ErrCorrupt)
	}
	return nil
}
