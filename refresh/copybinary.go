package refresh

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// COPY BINARY format (PostgreSQL's COPY ... (FORMAT binary)), as COPY TO
// writes it and COPY FROM reads it:
//
//	header  11-byte signature "PGCOPY\n\xff\r\n\x00"
//	        int32 flags (bit 16: OIDs included; other high bits must be 0)
//	        int32 length of the header extension, then that many bytes
//	tuple   int16 number of fields, then per field:
//	        int32 length in bytes (-1 for NULL), then the value in the
//	        type's binary send format
//	trailer int16 -1
//
// All integers are big-endian (network order).

var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

var errCopyFormat = errors.New("bad COPY BINARY data")

// maxCopyField caps one field's length: far beyond any value a rollup
// refresh reads, small enough that a corrupt length cannot ask for gigabytes.
const maxCopyField = 64 << 20

// copyReader cuts COPY BINARY data into tuples. It is a decoder of bytes
// from the server; it never panics on malformed input.
type copyReader struct {
	headerDone bool
	done       bool
	fields     [][]byte // reused; nil entries are NULLs
}

// next reads one tuple from the front of b. It returns the number of bytes
// used and the fields (valid until the next call), or need > 0 when b holds
// no complete tuple yet. After the trailer, done is set and next reports
// an error for any further data.
func (r *copyReader) next(b []byte) (used int, fields [][]byte, need bool, err error) {
	if r.done {
		if len(b) > 0 {
			return 0, nil, false, fmt.Errorf("%w: %d bytes after the trailer", errCopyFormat, len(b))
		}
		return 0, nil, true, nil
	}
	if !r.headerDone {
		if len(b) < len(copySignature)+8 {
			return 0, nil, true, nil
		}
		if string(b[:len(copySignature)]) != string(copySignature) {
			return 0, nil, false, fmt.Errorf("%w: no PGCOPY signature", errCopyFormat)
		}
		p := len(copySignature)
		flags := binary.BigEndian.Uint32(b[p:])
		if flags&0xffff0000 != 0 {
			return 0, nil, false, fmt.Errorf("%w: header flags %#x", errCopyFormat, flags)
		}
		ext := binary.BigEndian.Uint32(b[p+4:])
		if ext > maxCopyField {
			return 0, nil, false, fmt.Errorf("%w: header extension of %d bytes", errCopyFormat, ext)
		}
		if len(b) < p+8+int(ext) {
			return 0, nil, true, nil
		}
		r.headerDone = true
		return p + 8 + int(ext), nil, false, nil
	}
	if len(b) < 2 {
		return 0, nil, true, nil
	}
	n := int16(binary.BigEndian.Uint16(b))
	if n == -1 {
		r.done = true
		return 2, nil, false, nil
	}
	if n < 0 {
		return 0, nil, false, fmt.Errorf("%w: %d fields", errCopyFormat, n)
	}
	if r.fields == nil {
		r.fields = make([][]byte, 0, 8) // non-nil: a tuple of no fields is not a header
	}
	r.fields = r.fields[:0]
	p := 2
	for range n {
		if len(b) < p+4 {
			return 0, nil, true, nil
		}
		l := int32(binary.BigEndian.Uint32(b[p:]))
		p += 4
		switch {
		case l == -1:
			r.fields = append(r.fields, nil)
		case l < 0 || l > maxCopyField:
			return 0, nil, false, fmt.Errorf("%w: field of %d bytes", errCopyFormat, l)
		case len(b) < p+int(l):
			return 0, nil, true, nil
		default:
			r.fields = append(r.fields, b[p:p+int(l):p+int(l)])
			p += int(l)
		}
	}
	return p, r.fields, false, nil
}

// appendField appends one COPY BINARY field: its length and bytes, or -1
// for a nil (NULL) value.
func appendField(dst, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(dst, 0xffffffff)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// appendHeader appends the COPY BINARY header (no flags, no extension).
func appendHeader(dst []byte) []byte {
	dst = append(dst, copySignature...)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
}

// appendTrailer appends the COPY BINARY trailer.
func appendTrailer(dst []byte) []byte { return append(dst, 0xff, 0xff) }
