package sketch

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Serialized Count-Min sketches: see "Count-Min byte layout" in the
// package documentation.
const (
	countMinTag     = 'C'
	countMinVersion = 1
)

// MarshalBinary returns the sketch in the format of "Count-Min byte
// layout" (package documentation). It implements encoding.BinaryMarshaler.
func (c *CountMin) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(nil)
}

// AppendBinary appends the serialized sketch to dst and returns the
// extended slice. It implements encoding.BinaryAppender.
func (c *CountMin) AppendBinary(dst []byte) ([]byte, error) {
	if c.width == 0 {
		return dst, fmt.Errorf("sketch: marshal count-min: %w: %w", errUninitializedCountMin, ErrInvalidParams)
	}
	// Room for 2 bytes a cell, enough for cells below 2^14.
	dst = slices.Grow(dst, 2+3*binary.MaxVarintLen64+2*len(c.cells))
	dst = append(dst, countMinTag, countMinVersion)
	dst = binary.AppendUvarint(dst, uint64(c.width))
	dst = binary.AppendUvarint(dst, uint64(c.depth))
	dst = binary.AppendUvarint(dst, uint64(c.n))
	for _, v := range c.cells {
		dst = binary.AppendUvarint(dst, uint64(v))
	}
	return dst, nil
}

// UnmarshalBinary decodes a sketch written by MarshalBinary. It implements
// encoding.BinaryUnmarshaler.
//
// Invalid input is rejected with an error wrapping ErrTruncated, ErrType,
// ErrVersion, ErrInvalidParams or ErrCorrupt (see "Count-Min byte
// layout"), and the receiver is left unchanged.
func (c *CountMin) UnmarshalBinary(data []byte) error {
	return decodeInto(c, "count-min", decodeCountMin, data)
}

func decodeCountMin(data []byte) (*CountMin, error) {
	if err := checkTagVersion(data, 2, countMinTag, "count-min", countMinVersion); err != nil {
		return nil, err
	}
	r := &varintReader{b: data[2:]}
	c, err := readCountMinHeader(r)
	if err != nil {
		return nil, err
	}
	for row := range c.depth {
		if err := readCountMinRow(r, c, row); err != nil {
			return nil, err
		}
	}
	return c, r.end()
}

// readCountMinHeader reads width, depth and N, and checks the shape and
// that the bytes left can hold the cells (at least one byte each) before
// allocating them.
func readCountMinHeader(r *varintReader) (*CountMin, error) {
	width, err := r.uvarint("width")
	if err != nil {
		return nil, err
	}
	depth, err := r.uvarint("depth")
	if err != nil {
		return nil, err
	}
	if err := checkCountMinShape(width, depth); err != nil {
		return nil, err
	}
	n, err := r.count("N")
	if err != nil {
		return nil, err
	}
	if cells := int(width * depth); cells > len(r.b) {
		return nil, fmt.Errorf("%d cells need at least %d bytes, %d left: %w", cells, cells, len(r.b), ErrTruncated)
	}
	c := newCountMin(int(width), int(depth))
	c.n = n
	return c, nil
}

// readCountMinRow reads one row, whose cells must sum to at most N: an Add
// raises each row by at most its count, and Merge adds rows and N alike.
func readCountMinRow(r *varintReader, c *CountMin, row int) error {
	cells := c.cells[row*c.width : (row+1)*c.width]
	var sum int64
	for i := range cells {
		v, err := r.int64("cell", c.n-sum)
		if err != nil {
			return fmt.Errorf("row %d, cell %d: %w", row, i, err)
		}
		cells[i] = v
		sum += v
	}
	return nil
}
