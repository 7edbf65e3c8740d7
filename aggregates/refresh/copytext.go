package refresh

import (
	"bytes"
	"errors"
	"fmt"
)

// COPY text format (PostgreSQL's default COPY format), as COPY TO writes it
// and COPY FROM reads it: one row per line ending in '\n', fields separated
// by '\t', NULL written as \N, and within a field a backslash escapes
// itself, the delimiter and control characters:
//
//	\\  backslash   \t tab   \n newline   \r carriage return
//	\b  backspace   \f form feed   \v vertical tab
//	\NNN octal byte (1 to 3 digits)   \xHH hex byte (1 or 2 digits)
//
// Any other escaped character stands for itself. COPY TO only produces the
// first group; COPY FROM accepts all of them.

var errBadEscape = errors.New("bad escape")

// isNull reports whether an escaped field is the NULL marker.
func isNull(f []byte) bool { return len(f) == 2 && f[0] == '\\' && f[1] == 'N' }

// unescape appends the value of escaped field f to dst. f must not be \N.
func unescape(dst, f []byte) ([]byte, error) {
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i == len(f) {
			return dst, fmt.Errorf("%w: trailing backslash", errBadEscape)
		}
		switch c = f[i]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'v':
			dst = append(dst, '\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(c - '0')
			for k := 0; k < 2 && i+1 < len(f) && f[i+1] >= '0' && f[i+1] <= '7'; k++ {
				i++
				v = v*8 + int(f[i]-'0')
			}
			dst = append(dst, byte(v))
		case 'x':
			v, n := 0, 0
			for n < 2 && i+1 < len(f) && hexVal(f[i+1]) >= 0 {
				i++
				v = v*16 + hexVal(f[i])
				n++
			}
			if n == 0 {
				dst = append(dst, 'x') // \x without digits is a plain x
				continue
			}
			dst = append(dst, byte(v))
		default:
			dst = append(dst, c)
		}
	}
	return dst, nil
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// splitFields cuts line (without its '\n') at each tab into fields, reusing
// dst. An escaped tab is written \t, so every raw tab is a separator.
func splitFields(dst [][]byte, line []byte) [][]byte {
	dst = dst[:0]
	for {
		i := bytes.IndexByte(line, '\t')
		if i < 0 {
			return append(dst, line)
		}
		dst = append(dst, line[:i])
		line = line[i+1:]
	}
}
