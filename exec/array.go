package exec

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pgsketch/pgsketch/rewrite/plan"
)

var errArray = errors.New("exec: malformed array")

// decodeBinaryArray reads a one-dimensional array in PostgreSQL's binary
// format (array_send): nil elements are NULLs. A NULL array (b == nil) has no
// elements. The returned slices alias b.
func decodeBinaryArray(b []byte) ([][]byte, error) {
	if b == nil {
		return nil, nil
	}
	if len(b) < 12 {
		return nil, fmt.Errorf("%w: %d-byte header", errArray, len(b))
	}
	ndim := int32(binary.BigEndian.Uint32(b))
	b = b[12:] // ndim, has-null flag, element type
	switch {
	case ndim == 0:
		return nil, nil
	case ndim != 1:
		return nil, fmt.Errorf("%w: %d dimensions", errArray, ndim)
	case len(b) < 8:
		return nil, fmt.Errorf("%w: short dimension", errArray)
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[8:]
	if n < 0 || int(n) > len(b)/4 {
		return nil, fmt.Errorf("%w: %d elements in %d bytes", errArray, n, len(b))
	}
	out := make([][]byte, n)
	for i := range out {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: short element %d", errArray, i)
		}
		l := int32(binary.BigEndian.Uint32(b))
		b = b[4:]
		if l < 0 {
			continue
		}
		if int(l) > len(b) {
			return nil, fmt.Errorf("%w: element %d of %d bytes", errArray, i, l)
		}
		out[i], b = b[:l:l], b[l:]
	}
	return out, nil
}

// appendBinaryArray appends a one-dimensional array of elements of type
// elem in binary format (array_recv); nil elements are NULLs.
func appendBinaryArray(dst []byte, elem uint32, elems [][]byte) []byte {
	hasNull := uint32(0)
	for _, e := range elems {
		if e == nil {
			hasNull = 1
			break
		}
	}
	dst = binary.BigEndian.AppendUint32(dst, 1)
	dst = binary.BigEndian.AppendUint32(dst, hasNull)
	dst = binary.BigEndian.AppendUint32(dst, elem)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(elems)))
	dst = binary.BigEndian.AppendUint32(dst, 1) // lower bound
	for _, e := range elems {
		if e == nil {
			dst = binary.BigEndian.AppendUint32(dst, ^uint32(0))
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

// eachTextArrayElement calls f with every non-NULL element of a
// one-dimensional array in PostgreSQL's text format (array_out), unquoted
// and unescaped: the element type's own output text. buf is scratch space
// reused between elements; the slice f gets is valid only during the call.
func eachTextArrayElement(s []byte, f func([]byte)) error {
	if s == nil {
		return nil
	}
	// A lower bound other than 1 is printed first: [0:2]={...}.
	if len(s) > 0 && s[0] == '[' {
		i := 0
		for i < len(s) && s[i] != '=' {
			i++
		}
		if i == len(s) {
			return fmt.Errorf("%w: dimension decoration without '='", errArray)
		}
		s = s[i+1:]
	}
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return fmt.Errorf("%w: not in braces", errArray)
	}
	body := s[1 : len(s)-1]
	if len(body) == 0 {
		return nil
	}
	var buf []byte
	i := 0
	for {
		if i >= len(body) {
			return fmt.Errorf("%w: missing element", errArray)
		}
		switch body[i] {
		case '{':
			return fmt.Errorf("%w: more than one dimension", errArray)
		case '"':
			buf = buf[:0]
			i++
			closed := false
			for i < len(body) {
				c := body[i]
				if c == '\\' && i+1 < len(body) {
					buf = append(buf, body[i+1])
					i += 2
					continue
				}
				i++
				if c == '"' {
					closed = true
					break
				}
				buf = append(buf, c)
			}
			if !closed {
				return fmt.Errorf("%w: unterminated quoted element", errArray)
			}
			f(buf)
		default:
			j := i
			for j < len(body) && body[j] != ',' {
				j++
			}
			e := body[i:j]
			i = j
			if string(e) != "NULL" {
				f(e)
			}
		}
		if i == len(body) {
			return nil
		}
		if body[i] != ',' {
			return fmt.Errorf("%w: expected ',' at %d", errArray, i)
		}
		i++
	}
}

// eachSketch decodes the sketches of a fetch's rollup-half column for agg a
// (a bytea[] in binary format, one sketch per rollup row), skipping NULL
// elements, and hands each to f. Its errors, and f's, wrap ErrData.
func eachSketch[T any, P interface {
	*T
	encoding.BinaryUnmarshaler
}](arr []byte, a plan.Agg, f func(P) error) error {
	elems, err := decodeBinaryArray(arr)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
	}
	for _, e := range elems {
		if e == nil {
			continue
		}
		s := P(new(T))
		if err := s.UnmarshalBinary(e); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
		}
		if err := f(s); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrData, a.Measure, err)
		}
	}
	return nil
}
