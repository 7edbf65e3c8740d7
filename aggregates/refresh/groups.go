package refresh

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/sketch"
)

// field is one measure column of refresh_begin's read_sql and write_sql,
// in position order.
type field struct {
	kind     string // hll, count, sum, min, max
	log2m    int
	regwidth int
}

// parseFields reads refresh_begin's fields: "hll:14:5", "count", "sum", ...
func parseFields(ss []string) ([]field, error) {
	out := make([]field, len(ss))
	for i, s := range ss {
		kind, params, _ := strings.Cut(s, ":")
		f := field{kind: kind}
		switch kind {
		case "hll":
			a, b, ok := strings.Cut(params, ":")
			var err1, err2 error
			f.log2m, err1 = strconv.Atoi(a)
			f.regwidth, err2 = strconv.Atoi(b)
			if !ok || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("measure %d: bad sketch parameters %q", i+1, s)
			}
			if _, err := sketch.NewHLL(f.log2m, f.regwidth); err != nil {
				return nil, fmt.Errorf("measure %d: %w", i+1, err)
			}
		case "count", "sum", "min", "max":
		default:
			return nil, fmt.Errorf("measure %d: unknown kind %q", i+1, s)
		}
		out[i] = f
	}
	return out, nil
}

// group is the rebuilt rollup row of one bucket and dimension values.
type group struct {
	key      string        // escaped bucket and dimension fields, tab separated
	rows     int64         // base rows streamed (for the row count when no partials row)
	sketches []*sketch.HLL // per field; nil for non-hll fields
	partials [][]byte      // per field: escaped text from the partials row; nil for hll fields
	partial  bool          // the partials row arrived
}

// groups accumulates read_sql's rows. It is not safe for concurrent use.
type groups struct {
	ndims  int
	fields []field
	m      map[string]*group
	rows   int64 // base rows read
	line   int64 // lines read, for error messages
	split  [][]byte
	value  []byte
	// bucketText, when set, replaces each bucket field on output.
	bucketText map[string]string
}

// buckets returns the distinct bucket fields (unescaped: bucket values
// are dates or timestamps, which COPY never escapes), sorted.
func (g *groups) buckets() []string {
	seen := make(map[string]bool)
	var out []string
	for k := range g.m {
		b, _, _ := strings.Cut(k, "\t")
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

func newGroups(ndims int, fields []field) *groups {
	return &groups{ndims: ndims, fields: fields, m: make(map[string]*group)}
}

// add consumes one line of read_sql's COPY output (without its newline):
// flag, bucket, ndims dimensions, len(fields) measures.
func (g *groups) add(line []byte) error {
	g.line++
	g.split = splitFields(g.split, line)
	f := g.split
	if want := 2 + g.ndims + len(g.fields); len(f) != want {
		return fmt.Errorf("copy line %d: %d fields, want %d", g.line, len(f), want)
	}
	// The key is the raw text from bucket through the last dimension.
	keyLen := len(f[0]) + 1
	keyEnd := keyLen
	for _, x := range f[1 : 2+g.ndims] {
		keyEnd += len(x) + 1
	}
	key := line[keyLen : keyEnd-1]
	grp := g.m[string(key)]
	if grp == nil {
		grp = &group{key: string(key), sketches: make([]*sketch.HLL, len(g.fields)),
			partials: make([][]byte, len(g.fields))}
		for i, fd := range g.fields {
			if fd.kind == "hll" {
				grp.sketches[i], _ = sketch.NewHLL(fd.log2m, fd.regwidth) // checked by parseFields
			}
		}
		g.m[grp.key] = grp
	}
	vals := f[2+g.ndims:]
	switch string(f[0]) {
	case "t":
		g.rows++
		grp.rows++
		for i, fd := range g.fields {
			if fd.kind != "hll" || isNull(vals[i]) {
				continue
			}
			v := vals[i]
			if bytes.IndexByte(v, '\\') >= 0 {
				var err error
				if g.value, err = unescape(g.value[:0], v); err != nil {
					return fmt.Errorf("copy line %d, measure %d: %w", g.line, i+1, err)
				}
				v = g.value
			}
			grp.sketches[i].Add(v)
		}
	case "f":
		if grp.partial {
			return fmt.Errorf("copy line %d: second partials row for %q", g.line, key)
		}
		grp.partial = true
		for i, fd := range g.fields {
			if fd.kind != "hll" {
				grp.partials[i] = slices.Clone(vals[i])
			}
		}
	default:
		return fmt.Errorf("copy line %d: bad row flag %q", g.line, f[0])
	}
	return nil
}

// writeTo writes the rebuilt rows in COPY text format, sorted by key so
// that the output is deterministic.
func (g *groups) writeTo(w io.Writer) error {
	keys := make([]string, 0, len(g.m))
	for k := range g.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var buf []byte
	for _, k := range keys {
		grp := g.m[k]
		if g.bucketText != nil {
			b, rest, hasDims := strings.Cut(grp.key, "\t")
			t, ok := g.bucketText[b]
			if !ok {
				return fmt.Errorf("group %q: no bucket start for %q", grp.key, b)
			}
			buf = append(buf[:0], t...)
			if hasDims {
				buf = append(append(buf, '\t'), rest...)
			}
		} else {
			buf = append(buf[:0], grp.key...)
		}
		for i, fd := range g.fields {
			buf = append(buf, '\t')
			switch {
			case fd.kind == "hll":
				b, err := grp.sketches[i].MarshalBinary()
				if err != nil {
					return fmt.Errorf("group %q: %w", grp.key, err)
				}
				buf = append(buf, `\\x`...)
				buf = hex.AppendEncode(buf, b)
			case grp.partial:
				buf = append(buf, grp.partials[i]...)
			case fd.kind == "count":
				buf = strconv.AppendInt(buf, grp.rows, 10)
			default:
				return fmt.Errorf("group %q: no partials row for measure %d", grp.key, i+1)
			}
		}
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
