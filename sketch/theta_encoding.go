package sketch

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Serialized compact Theta sketches: see "Theta sketch byte layout" in the
// package documentation.
const (
	thetaFamilyCompact = 3

	thetaSerialV1         = 1
	thetaSerialV2         = 2
	thetaSerialV3         = 3
	thetaSerialCompressed = 4

	// Flag bits of byte 5.
	thetaFlagBigEndian  = 1 << 0
	thetaFlagReadOnly   = 1 << 1
	thetaFlagEmpty      = 1 << 2
	thetaFlagCompact    = 1 << 3
	thetaFlagOrdered    = 1 << 4
	thetaFlagSingleItem = 1 << 5
)

// preambleLongs is the number of 8-byte words before the hashes: 3 in
// estimation mode (count and theta follow the first word), 1 when empty or
// holding exactly one hash, else 2 (count only).
func (c *CompactTheta) preambleLongs() int {
	switch {
	case c.IsEstimationMode():
		return 3
	case c.empty || len(c.hashes) == 1:
		return 1
	}
	return 2
}

// MarshalBinary returns the sketch in the compact Theta format of Apache
// DataSketches, serial version 3 (uncompressed, little-endian, hashes in
// ascending order), the form the Java and C++ libraries write and read. It
// implements encoding.BinaryMarshaler.
func (c *CompactTheta) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(nil)
}

// AppendBinary appends the serialized sketch to dst and returns the extended
// slice. It implements encoding.BinaryAppender.
func (c *CompactTheta) AppendBinary(dst []byte) ([]byte, error) {
	if c.theta == 0 {
		return dst, fmt.Errorf("sketch: marshal theta: %w: %w", errUninitialized, ErrInvalidParams)
	}
	pre := c.preambleLongs()
	flags := byte(thetaFlagReadOnly | thetaFlagCompact | thetaFlagOrdered)
	switch {
	case c.empty:
		flags |= thetaFlagEmpty
	case pre == 1:
		flags |= thetaFlagSingleItem
	}
	dst = slices.Grow(dst, 8*(pre+len(c.hashes)))
	dst = append(dst, byte(pre), thetaSerialV3, thetaFamilyCompact, 0, 0, flags)
	dst = binary.LittleEndian.AppendUint16(dst, thetaSeedHash)
	if pre >= 2 {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(c.hashes)))
		dst = binary.LittleEndian.AppendUint32(dst, 0)
	}
	if pre == 3 {
		dst = binary.LittleEndian.AppendUint64(dst, c.theta)
	}
	n := len(dst)
	dst = dst[:n+8*len(c.hashes)]
	for i, h := range c.hashes {
		binary.LittleEndian.PutUint64(dst[n+8*i:], h)
	}
	return dst, nil
}

// UnmarshalBinary decodes a compact Theta sketch of serial version 1, 2 or 3
// as written by DataSketches (Java, C++, Python) or by MarshalBinary. The
// compressed serial version 4 is refused with an error wrapping ErrVersion:
// have the writer use its uncompressed serialization. It implements
// encoding.BinaryUnmarshaler.
//
// Invalid input is rejected with an error wrapping ErrTruncated, ErrVersion,
// ErrType, ErrCorrupt or ErrIncompatible (a seed hash other than that of
// ThetaSeed), and the receiver is left unchanged.
func (c *CompactTheta) UnmarshalBinary(data []byte) error {
	return decodeInto(c, "theta", decodeTheta, data)
}

// thetaHeader is the decoded preamble: where the hashes start, how many
// there are and the fields they are checked against.
type thetaHeader struct {
	pre      int
	empty    bool
	theta    uint64
	count    uint64
	offset   int  // of the first hash
	ordered  bool // hashes must already be ascending
	seedHash uint16
	hasSeed  bool // versions 2 and 3 store a seed hash; version 1 does not
}

func decodeTheta(data []byte) (*CompactTheta, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%d bytes, need at least 8: %w", len(data), ErrTruncated)
	}
	if fam := data[2]; fam != thetaFamilyCompact {
		return nil, fmt.Errorf("family %d, want %d (compact Theta): %w", fam, thetaFamilyCompact, ErrType)
	}
	var hdr thetaHeader
	var err error
	switch ver := data[1]; ver {
	case thetaSerialV1:
		hdr, err = headerV1(data)
	case thetaSerialV2:
		hdr, err = headerV2(data)
	case thetaSerialV3:
		hdr, err = headerV3(data)
	case thetaSerialCompressed:
		return nil, fmt.Errorf("serial version 4 (compressed) is not supported: %w", ErrVersion)
	default:
		return nil, fmt.Errorf("serial version %d, want 1, 2 or 3: %w", ver, ErrVersion)
	}
	if err != nil {
		return nil, err
	}
	if err := checkLength(data, hdr); err != nil {
		return nil, err
	}
	if hdr.empty {
		return newCompactTheta(true, thetaMax, nil), nil
	}
	if hdr.hasSeed && hdr.seedHash != thetaSeedHash {
		return nil, fmt.Errorf("seed hash %#04x, want %#04x (seed %d): %w",
			hdr.seedHash, thetaSeedHash, ThetaSeed, ErrIncompatible)
	}
	if hdr.theta == 0 || hdr.theta > thetaMax {
		return nil, fmt.Errorf("theta %#x outside [1, 2^63-1]: %w", hdr.theta, ErrCorrupt)
	}
	hashes, err := readHashes(data[hdr.offset:], hdr)
	if err != nil {
		return nil, err
	}
	return newCompactTheta(false, hdr.theta, hashes), nil
}

// headerV1 reads the version 1 preamble: always 3 longs, with the count at
// byte 8 and theta at byte 16, no seed hash (the sketch is taken to use
// ThetaSeed), and an empty sketch recognized as one with no hashes and theta
// 1.0. Bytes 3 to 7 are ignored, and the hashes may be unordered.
func headerV1(data []byte) (thetaHeader, error) {
	hdr := thetaHeader{pre: int(data[0])}
	if hdr.pre != 3 {
		return hdr, fmt.Errorf("serial version 1 with %d preamble longs, want 3: %w", hdr.pre, ErrCorrupt)
	}
	if len(data) < 24 {
		return hdr, fmt.Errorf("%d bytes, need 24 for the preamble: %w", len(data), ErrTruncated)
	}
	hdr.count = uint64(binary.LittleEndian.Uint32(data[8:]))
	hdr.theta = binary.LittleEndian.Uint64(data[16:])
	hdr.offset = 24
	hdr.empty = hdr.count == 0 && hdr.theta == thetaMax
	return hdr, nil
}

// headerV2 reads the version 2 preamble: 1 long when empty, 2 in exact
// mode (theta 1.0), 3 with theta; no hashes with theta 1.0 also means
// empty. Of the flags byte only the big-endian bit is checked (the libraries
// ignore the rest): hashes are sorted if need be.
func headerV2(data []byte) (thetaHeader, error) {
	hdr := thetaHeader{
		pre:      int(data[0]),
		theta:    thetaMax,
		seedHash: binary.LittleEndian.Uint16(data[6:]),
		hasSeed:  true,
	}
	if data[5]&thetaFlagBigEndian != 0 {
		return hdr, fmt.Errorf("big-endian flag set: %w", ErrCorrupt)
	}
	switch hdr.pre {
	case 1:
		hdr.empty, hdr.offset = true, 8
		return hdr, nil
	case 2, 3:
	default:
		return hdr, fmt.Errorf("%d preamble longs, want 1, 2 or 3: %w", hdr.pre, ErrCorrupt)
	}
	if err := readCountTheta(data, &hdr); err != nil {
		return hdr, err
	}
	hdr.empty = hdr.count == 0 && hdr.theta == thetaMax
	return hdr, nil
}

// headerV3 reads the version 3 preamble, which the flags byte describes:
// EMPTY (then there are no hashes, whatever the preamble length), ORDERED
// and COMPACT (required). One long of preamble in a non-empty sketch means a
// single hash in exact mode, at byte 8.
func headerV3(data []byte) (thetaHeader, error) {
	flags := data[5]
	hdr := thetaHeader{
		pre:      int(data[0]),
		theta:    thetaMax,
		empty:    flags&thetaFlagEmpty != 0,
		ordered:  flags&thetaFlagOrdered != 0,
		seedHash: binary.LittleEndian.Uint16(data[6:]),
		hasSeed:  true,
	}
	switch {
	case flags&thetaFlagBigEndian != 0:
		return hdr, fmt.Errorf("big-endian flag set: %w", ErrCorrupt)
	case flags&thetaFlagCompact == 0:
		return hdr, fmt.Errorf("flags %#02x lack COMPACT: %w", flags, ErrCorrupt)
	case hdr.pre < 1 || hdr.pre > 3:
		return hdr, fmt.Errorf("%d preamble longs, want 1, 2 or 3: %w", hdr.pre, ErrCorrupt)
	case flags&thetaFlagSingleItem != 0 && (hdr.pre != 1 || hdr.empty):
		return hdr, fmt.Errorf("SINGLEITEM flag with %d preamble longs, empty %t: %w", hdr.pre, hdr.empty, ErrCorrupt)
	case hdr.pre == 1:
		hdr.offset = 8
		if !hdr.empty {
			hdr.count = 1
		}
		return hdr, nil
	}
	if err := readCountTheta(data, &hdr); err != nil {
		return hdr, err
	}
	if hdr.empty && hdr.count != 0 {
		return hdr, fmt.Errorf("EMPTY flag with %d hashes: %w", hdr.count, ErrCorrupt)
	}
	return hdr, nil
}

// readCountTheta reads the hash count at byte 8 and, with 3 preamble longs,
// theta at byte 16.
func readCountTheta(data []byte, hdr *thetaHeader) error {
	hdr.offset = 8 * hdr.pre
	if len(data) < hdr.offset {
		return fmt.Errorf("%d bytes, need %d for the preamble: %w", len(data), hdr.offset, ErrTruncated)
	}
	hdr.count = uint64(binary.LittleEndian.Uint32(data[8:]))
	if hdr.pre == 3 {
		hdr.theta = binary.LittleEndian.Uint64(data[16:])
	}
	return nil
}

// checkLength requires exactly the preamble plus count hashes. The hashes
// of an empty sketch are not there, whatever the count field says.
func checkLength(data []byte, hdr thetaHeader) error {
	count := hdr.count
	if hdr.empty {
		count = 0
	}
	have := uint64(len(data) - hdr.offset)
	switch need := 8 * count; {
	case have < need:
		return fmt.Errorf("%d bytes of hashes, need %d for %d hashes: %w", have, need, count, ErrTruncated)
	case have > need:
		return fmt.Errorf("%d trailing bytes after %d hashes: %w", have-need, count, ErrCorrupt)
	}
	return nil
}

// readHashes decodes count little-endian hashes, sorting them unless the
// header says they are ordered, and checks that they are distinct, not 0
// and below theta.
func readHashes(b []byte, hdr thetaHeader) ([]uint64, error) {
	hashes := make([]uint64, hdr.count)
	b = b[:8*len(hashes)]
	for i := range hashes {
		hashes[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	if !hdr.ordered {
		slices.Sort(hashes)
	}
	// Ascending and below theta: each hash is above the previous one (the
	// first above 0) and the last is below theta.
	var prev uint64
	bad := -1
	for i, h := range hashes {
		if h <= prev {
			bad = i
			break
		}
		prev = h
	}
	switch {
	case bad == 0:
		return nil, fmt.Errorf("the smallest hash is 0: %w", ErrCorrupt)
	case bad > 0:
		return nil, fmt.Errorf("hash %d (%#x) not above the previous one (%#x): %w",
			bad, hashes[bad], hashes[bad-1], ErrCorrupt)
	case prev >= hdr.theta:
		return nil, fmt.Errorf("hash %d is %#x, not below theta %#x: %w", len(hashes)-1, prev, hdr.theta, ErrCorrupt)
	}
	return hashes, nil
}
