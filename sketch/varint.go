package sketch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// checkTagVersion checks the first two bytes of the Freq and CountMin
// formats, the tag of the format (named name in errors) and its version,
// after checking that data holds at least minLen bytes.
func checkTagVersion(data []byte, minLen int, tag byte, name string, version byte) error {
	if len(data) < minLen {
		return fmt.Errorf("%d bytes, need at least %d: %w", len(data), minLen, ErrTruncated)
	}
	switch {
	case data[0] != tag:
		return fmt.Errorf("tag %#02x, want %#02x (%s): %w", data[0], tag, name, ErrType)
	case data[1] != version:
		return fmt.Errorf("version %d, want %d: %w", data[1], version, ErrVersion)
	}
	return nil
}

// varintReader reads the unsigned LEB128 varints (encoding/binary's
// Uvarint) and byte strings of the Freq and CountMin formats. It accepts
// only the shortest encoding of each value, so that every value has one
// encoding and equal sketches have equal bytes.
type varintReader struct {
	b []byte
}

// uvarint reads a varint, naming it what in errors: ErrTruncated if the
// bytes end inside it, ErrCorrupt if it is longer than 10 bytes, overflows
// 64 bits or is not in its shortest form.
func (r *varintReader) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		return 0, fmt.Errorf("%s: varint cut short: %w", what, ErrTruncated)
	case n < 0:
		return 0, fmt.Errorf("%s: varint overflows 64 bits: %w", what, ErrCorrupt)
	case n > 1 && r.b[n-1] == 0:
		return 0, fmt.Errorf("%s: varint not in its shortest form: %w", what, ErrCorrupt)
	}
	r.b = r.b[n:]
	return v, nil
}

// int64 reads a varint that must be at most limit (<= math.MaxInt64).
func (r *varintReader) int64(what string, limit int64) (int64, error) {
	v, err := r.uvarint(what)
	if err != nil {
		return 0, err
	}
	if v > uint64(limit) {
		return 0, fmt.Errorf("%s %d, at most %d: %w", what, v, limit, ErrCorrupt)
	}
	return int64(v), nil
}

// count reads a non-negative int64 varint.
func (r *varintReader) count(what string) (int64, error) {
	return r.int64(what, math.MaxInt64)
}

// bytes returns the next n bytes, without copying.
func (r *varintReader) bytes(what string, n int) ([]byte, error) {
	if n > len(r.b) {
		return nil, fmt.Errorf("%s: %d bytes, only %d left: %w", what, n, len(r.b), ErrTruncated)
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b, nil
}

// end fails with ErrCorrupt if bytes are left.
func (r *varintReader) end() error {
	if len(r.b) > 0 {
		return fmt.Errorf("%d trailing bytes: %w", len(r.b), ErrCorrupt)
	}
	return nil
}
