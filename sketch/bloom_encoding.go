package sketch

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Serialized Bloom filters: see "Bloom byte layout" in the package
// documentation.
const (
	bloomTag     = 'B'
	bloomVersion = 1
)

// MarshalBinary returns the filter in the format of "Bloom byte layout"
// (package documentation). It implements encoding.BinaryMarshaler.
func (b *Bloom) MarshalBinary() ([]byte, error) {
	return b.AppendBinary(nil)
}

// AppendBinary appends the serialized filter to dst and returns the
// extended slice. It implements encoding.BinaryAppender.
func (b *Bloom) AppendBinary(dst []byte) ([]byte, error) {
	if b.m == 0 {
		return dst, fmt.Errorf("sketch: marshal bloom: %w: %w", errUninitializedBloom, ErrInvalidParams)
	}
	dst = slices.Grow(dst, 2+3*binary.MaxVarintLen64+len(b.words)*8)
	dst = append(dst, bloomTag, bloomVersion)
	dst = binary.AppendUvarint(dst, b.m)
	dst = binary.AppendUvarint(dst, uint64(b.k))
	dst = binary.AppendUvarint(dst, b.n)
	for _, w := range b.words {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst, nil
}

// UnmarshalBinary decodes a filter written by MarshalBinary. It implements
// encoding.BinaryUnmarshaler.
//
// Invalid input is rejected with an error wrapping ErrTruncated, ErrType,
// ErrVersion, ErrInvalidParams or ErrCorrupt (see "Bloom byte layout"), and
// the receiver is left unchanged.
func (b *Bloom) UnmarshalBinary(data []byte) error {
	return decodeInto(b, "bloom", decodeBloom, data)
}

func decodeBloom(data []byte) (*Bloom, error) {
	if err := checkTagVersion(data, 2, bloomTag, "bloom", bloomVersion); err != nil {
		return nil, err
	}
	r := &varintReader{b: data[2:]}
	m, err := r.uvarint("bits")
	if err != nil {
		return nil, err
	}
	k, err := r.uvarint("hashes")
	if err != nil {
		return nil, err
	}
	n, err := r.uvarint("count")
	if err != nil {
		return nil, err
	}
	if err := checkBloomShape(m, k); err != nil {
		return nil, err
	}
	switch {
	case n > math.MaxInt64:
		return nil, fmt.Errorf("count %d past 2^63−1: %w", n, ErrCorrupt)
	case uint64(len(r.b)) < m/8:
		return nil, fmt.Errorf("%d bytes of bits, need %d: %w", len(r.b), m/8, ErrTruncated)
	case uint64(len(r.b)) > m/8:
		return nil, fmt.Errorf("%d bytes after the %d of bits: %w", uint64(len(r.b))-m/8, m/8, ErrCorrupt)
	}
	f := newBloom(m, int(k))
	f.n = n
	set := uint64(0)
	for i := range f.words {
		f.words[i] = binary.LittleEndian.Uint64(r.b[8*i:])
		set += uint64(bits.OnesCount64(f.words[i]))
	}
	// Each Add sets at most k bits, and Merge adds the counts.
	if hi, lo := bits.Mul64(n, k); hi == 0 && set > lo {
		return nil, fmt.Errorf("%d bits set by %d items of %d hashes: %w", set, n, k, ErrCorrupt)
	}
	return f, nil
}
