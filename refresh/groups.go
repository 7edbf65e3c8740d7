package refresh

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/pgsketch/pgsketch/sketch"
)

// field is one measure column of refresh_begin's read_sql and write_sql,
// in position order.
type field struct {
	kind     string // hll, theta, topk, gsum, count, sum, min, max
	log2m    int    // hll: log2 of the registers; theta: lg_k
	regwidth int
	// form says what a sketched measure's values are: int2, int4, int8
	// (binary), text (hll: the canonical text; theta: the string's bytes),
	// numeric (binary; gsum only) or sketch (a rollup's, to unite).
	form string
}

// sketched reports whether the field is built from base rows (a sketch,
// or a sum the refresher adds: gsum) rather than a partial aggregate that
// PostgreSQL computes.
func (f field) sketched() bool {
	return f.kind == "hll" || f.kind == "theta" || f.kind == "topk" || f.kind == "gsum"
}

// parseFields reads refresh_begin's fields: "hll:14:5:int8", "theta:12:text",
// "count", "sum", ...
func parseFields(ss []string) ([]field, error) {
	out := make([]field, len(ss))
	for i, s := range ss {
		parts := strings.Split(s, ":")
		f := field{kind: parts[0]}
		switch f.kind {
		case "hll":
			var err1, err2 error
			if len(parts) == 4 {
				f.log2m, err1 = strconv.Atoi(parts[1])
				f.regwidth, err2 = strconv.Atoi(parts[2])
				f.form = parts[3]
			}
			if len(parts) != 4 || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("measure %d: bad sketch parameters %q", i+1, s)
			}
			switch f.form {
			case "int2", "int4", "int8", "text", "sketch":
			default:
				return nil, fmt.Errorf("measure %d: unknown value form %q", i+1, f.form)
			}
			if _, err := sketch.NewHLL(f.log2m, f.regwidth); err != nil {
				return nil, fmt.Errorf("measure %d: %w", i+1, err)
			}
		case "topk":
			var err error
			if len(parts) == 3 {
				f.log2m, err = strconv.Atoi(parts[1])
				f.form = parts[2]
			}
			if len(parts) != 3 || err != nil || f.log2m < 4 || f.log2m > 16 {
				return nil, fmt.Errorf("measure %d: bad summary parameters %q", i+1, s)
			}
			switch f.form {
			case "int2", "int4", "int8", "text", "sketch":
			default:
				return nil, fmt.Errorf("measure %d: unknown value form %q", i+1, f.form)
			}
		case "theta":
			var err error
			if len(parts) == 3 {
				f.log2m, err = strconv.Atoi(parts[1])
				f.form = parts[2]
			}
			if len(parts) != 3 || err != nil {
				return nil, fmt.Errorf("measure %d: bad sketch parameters %q", i+1, s)
			}
			switch f.form {
			case "int2", "int4", "int8", "text", "sketch":
			default:
				return nil, fmt.Errorf("measure %d: unknown value form %q", i+1, f.form)
			}
			if _, err := sketch.NewTheta(f.log2m); err != nil {
				return nil, fmt.Errorf("measure %d: %w", i+1, err)
			}
		case "gsum":
			if len(parts) == 2 {
				f.form = parts[1]
			}
			switch f.form {
			case "int2", "int4", "int8", "numeric":
			default:
				return nil, fmt.Errorf("measure %d: bad sum %q", i+1, s)
			}
		case "count", "sum", "min", "max":
			if len(parts) != 1 {
				return nil, fmt.Errorf("measure %d: unknown kind %q", i+1, s)
			}
		default:
			return nil, fmt.Errorf("measure %d: unknown kind %q", i+1, s)
		}
		out[i] = f
	}
	return out, nil
}

// While a sketch is exact (EMPTY or EXPLICIT, a sorted set), its group
// collects the distinct hashes in a hashSet and gives them to the sketch in
// one sketch.AddHashes (see group.addHash): when the set holds more values
// than the sketch has room for under the explicit cutoff (so the first
// batch of a busy group goes to registers at once, unsorted), but at least
// pendingMin, or when the group is written.
const pendingMin = 256

// group is the rebuilt rollup row of one bucket and dimension values.
type group struct {
	// key is the bucket (8 bytes, big-endian) followed by the dimensions
	// as COPY BINARY fields: also the order rows are written in.
	key      string
	rows     int64         // base rows streamed (the row count when there is no partials row)
	sketches []*sketch.HLL // per field; nil for non-hll fields
	thetas   []*thetaState // per field; nil for non-theta fields
	topks    []*topkState  // per field; nil for non-topk fields
	sums     []*sumState   // per field; nil for non-gsum fields
	pending  []*hashSet    // per hll field: hashes not yet added, while the sketch is exact; else nil
	flushAt  []int         // per hll field: the size of pending that adds it
	partials [][]byte      // per field: the partials row's value; nil for NULL and hll fields
	partial  bool          // the partials row arrived
}

// groups accumulates read_sql's rows. It is not safe for concurrent use.
type groups struct {
	ndims  int
	fields []field
	bucket bucketer
	m      map[string]*group
	rows   int64        // base rows read
	tuples atomic.Int64 // tuples read, for progress and error messages
	rd     copyReader
	key    []byte
	// instants, when set, maps local bucket starts to the instants written.
	instants map[int64]int64
	// byBucket indexes m by bucket, then by the number dimIDs gives the
	// dimension bytes; cur is the current bucket's (see lookup).
	byBucket  map[int64]*[]*group
	cur       *[]*group
	curBucket int64
	dimIDs    dimIndex
	// lean: base rows may come in the lean shape (see feedFast); fast:
	// feedFast reads them.
	lean, fast bool
	hllIdx     []int // the hll measures' positions in fields
	sketchIdx  []int // the sketched measures' positions in fields (hll, theta, topk, gsum)
	sumIdx     []int // the gsum measures' positions in fields
	// fastErr is an error feedFast met adding a sum (the only measure it
	// adds that can fail once parsed).
	fastErr error
	slots   slotCache
	wide    [][]byte
	fs      fastState
}

func newGroups(ndims int, fields []field, b bucketer) *groups {
	g := &groups{ndims: ndims, fields: fields, bucket: b, m: make(map[string]*group)}
	slow := false // a measure feedFast does not build
	for i, f := range fields {
		if f.kind == "hll" {
			g.hllIdx = append(g.hllIdx, i)
		}
		if f.sketched() {
			g.sketchIdx = append(g.sketchIdx, i)
		}
		if f.kind == "gsum" {
			g.sumIdx = append(g.sumIdx, i)
		}
		slow = slow || f.kind == "theta" || f.kind == "topk"
	}
	g.lean = g.rawForms()
	g.fast = g.lean && !slow
	return g
}

// feed consumes the complete tuples at the front of data and returns how
// many bytes it used; the rest waits for more data.
func (g *groups) feed(data []byte) (int, error) {
	used := 0
	for {
		if g.fast && g.rd.headerDone && !g.rd.done {
			n, k := g.feedFast(data[used:])
			used += n
			g.tuples.Add(k)
			if err := g.fastErr; err != nil {
				return used, fmt.Errorf("copy tuple %d: %w", g.tuples.Load(), err)
			}
		}
		n, fields, need, err := g.rd.next(data[used:])
		if err != nil {
			return used, fmt.Errorf("copy tuple %d: %w", g.tuples.Load()+1, err)
		}
		if need {
			return used, nil
		}
		used += n
		if fields == nil {
			continue // header or trailer
		}
		k := g.tuples.Add(1)
		if err := g.addTuple(fields); err != nil {
			return used, fmt.Errorf("copy tuple %d: %w", k, err)
		}
	}
}

// add consumes one tuple: flag, time, ndims dimensions, the measures.
func (g *groups) add(f [][]byte) error {
	if want := 2 + g.ndims + len(g.fields); len(f) != want {
		return fmt.Errorf("%d fields, want %d", len(f), want)
	}
	if len(f[0]) != 1 {
		return fmt.Errorf("bad row flag")
	}
	var start int64
	switch t := f[1]; {
	case g.bucket.date && len(t) == 4:
		start = int64(g.bucket.dateDays(int32(binary.BigEndian.Uint32(t))))
	case !g.bucket.date && len(t) == 8:
		start = g.bucket.micros(int64(binary.BigEndian.Uint64(t)))
	default:
		return fmt.Errorf("time of %d bytes", len(t))
	}
	g.key = g.key[:0]
	for _, d := range f[2 : 2+g.ndims] {
		g.key = appendField(g.key, d)
	}
	grp := g.lookup(start, g.key)
	vals := f[2+g.ndims:]
	if f[0][0] != 0 { // a base row
		g.rows++
		grp.rows++
		for i, fd := range g.fields {
			v := vals[i]
			if fd.kind == "topk" { // a NULL is an item too
				if err := grp.topks[i].add(fd.form, v); err != nil {
					return fmt.Errorf("measure %d: %w", i+1, err)
				}
				continue
			}
			if fd.kind == "gsum" {
				if v != nil {
					if err := grp.sums[i].add(fd.form, v); err != nil {
						return fmt.Errorf("measure %d: %w", i+1, err)
					}
				}
				continue
			}
			if !fd.sketched() || v == nil {
				continue
			}
			if fd.kind == "theta" {
				if err := grp.thetas[i].add(fd.form, v); err != nil {
					return fmt.Errorf("measure %d: %w", i+1, err)
				}
				continue
			}
			if fd.form == "sketch" { // a level's rows: the rollup's sketches
				if err := grp.union(i, v); err != nil {
					return fmt.Errorf("measure %d: %w", i+1, err)
				}
				continue
			}
			h, err := g.hash(fd.form, v)
			if err != nil {
				return fmt.Errorf("measure %d: %w", i+1, err)
			}
			grp.addHash(i, h)
		}
		return nil
	}
	if grp.partial {
		return fmt.Errorf("second partials row for one bucket and dimension values")
	}
	grp.partial = true
	for i, fd := range g.fields {
		if !fd.sketched() && vals[i] != nil {
			grp.partials[i] = slices.Clone(vals[i])
		}
	}
	return nil
}

// hash returns the xxhash64 of a value's canonical text.
func (g *groups) hash(form string, v []byte) (uint64, error) {
	var n int64
	switch form {
	case "text":
		return xxhash.Sum64(v), nil
	case "int2":
		if len(v) != 2 {
			return 0, fmt.Errorf("int2 of %d bytes", len(v))
		}
		n = int64(int16(binary.BigEndian.Uint16(v)))
	case "int4":
		if len(v) != 4 {
			return 0, fmt.Errorf("int4 of %d bytes", len(v))
		}
		n = int64(int32(binary.BigEndian.Uint32(v)))
	case "int8":
		if len(v) != 8 {
			return 0, fmt.Errorf("int8 of %d bytes", len(v))
		}
		n = int64(binary.BigEndian.Uint64(v))
	}
	return hashInt(n), nil // xxhash64 of what int2out, int4out, int8out print
}

// flush adds the pending hashes of field i to its sketch and sets the
// size of the next batch.
func (grp *group) flush(i int) {
	p := grp.pending[i]
	if p == nil || p.n == 0 {
		return
	}
	bp := batchPool.Get().(*[]uint64)
	batch := p.appendTo((*bp)[:0])
	sk := grp.sketches[i]
	sk.AddHashes(batch)
	*bp = batch
	batchPool.Put(bp)
	if sk.Exact() {
		p.reset()
		grp.flushAt[i] = max(pendingMin, sk.ExactRoom())
	} else {
		p.release()
		grp.pending[i] = nil // registers from now on
	}
}

var batchPool = sync.Pool{New: func() any { return new([]uint64) }}

// union merges sketch bytes b into the group's sketch i.
func (grp *group) union(i int, b []byte) error {
	var s sketch.HLL
	if err := s.UnmarshalBinary(b); err != nil {
		return err
	}
	grp.flush(i)
	return grp.sketches[i].Union(&s)
}

// merge moves o's groups into g: sketches are united, row counts added,
// and each bucket's partials row kept from whichever stream read it.
func (g *groups) merge(o *groups) error {
	g.byBucket, g.cur = nil, nil // the index is for add, which is done
	g.rows += o.rows
	g.tuples.Add(o.tuples.Load())
	for k, og := range o.m {
		mine := g.m[k]
		if mine == nil {
			g.m[k] = og
			continue
		}
		mine.rows += og.rows
		for i, fd := range g.fields {
			if fd.kind == "theta" {
				if err := mine.thetas[i].absorb(og.thetas[i]); err != nil {
					return err
				}
			}
			if fd.kind == "topk" {
				if err := mine.topks[i].absorb(og.topks[i]); err != nil {
					return err
				}
			}
			if fd.kind == "gsum" {
				mine.sums[i].absorb(og.sums[i])
			}
			if fd.kind != "hll" {
				continue
			}
			mine.flush(i)
			og.flush(i)
			if err := mine.sketches[i].Union(og.sketches[i]); err != nil {
				return err
			}
		}
		if og.partial {
			if mine.partial {
				return fmt.Errorf("two partials rows for one bucket and dimension values")
			}
			mine.partial, mine.partials = true, og.partials
		}
	}
	return nil
}

// localBuckets returns the distinct finite bucket starts, sorted.
func (g *groups) localBuckets() []int64 {
	seen := make(map[int64]bool)
	var out []int64
	for k := range g.m {
		b := int64(binary.BigEndian.Uint64([]byte(k[:8])))
		if !seen[b] && b != math.MaxInt64 && b != math.MinInt64 {
			seen[b] = true
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// writeTo writes the rebuilt rows in COPY BINARY format, sorted by key so
// that the output is deterministic.
func (g *groups) writeTo(w io.Writer) error {
	keys := make([]string, 0, len(g.m))
	for k := range g.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf := appendHeader(nil)
	nfields := 1 + g.ndims + len(g.fields)
	for _, k := range keys {
		grp := g.m[k]
		buf = binary.BigEndian.AppendUint16(buf, uint16(nfields))
		b := int64(binary.BigEndian.Uint64([]byte(k[:8])))
		if g.instants != nil && b != math.MaxInt64 && b != math.MinInt64 {
			var ok bool
			if b, ok = g.instants[b]; !ok {
				return fmt.Errorf("no instant for a bucket start")
			}
		}
		if g.bucket.date {
			buf = binary.BigEndian.AppendUint32(buf, 4)
			buf = binary.BigEndian.AppendUint32(buf, uint32(int32(b)))
		} else {
			buf = binary.BigEndian.AppendUint32(buf, 8)
			buf = binary.BigEndian.AppendUint64(buf, uint64(b))
		}
		buf = append(buf, k[8:]...)
		for i, fd := range g.fields {
			switch {
			case fd.kind == "hll":
				grp.flush(i)
				sk, err := grp.sketches[i].MarshalBinary()
				if err != nil {
					return err
				}
				buf = appendField(buf, sk)
			case fd.kind == "topk":
				sk, err := grp.topks[i].marshal()
				if err != nil {
					return err
				}
				buf = appendField(buf, sk)
			case fd.kind == "gsum":
				buf = appendField(buf, grp.sums[i].marshal(fd.form))
			case fd.kind == "theta":
				sk, err := grp.thetas[i].marshal()
				if err != nil {
					return err
				}
				buf = appendField(buf, sk)
			case grp.partial:
				buf = appendField(buf, grp.partials[i])
			case fd.kind == "count":
				buf = binary.BigEndian.AppendUint32(buf, 8)
				buf = binary.BigEndian.AppendUint64(buf, uint64(grp.rows))
			default:
				return fmt.Errorf("measure %d: no partials row for a bucket", i+1)
			}
		}
		if len(buf) >= 256<<10 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	buf = appendTrailer(buf)
	_, err := w.Write(buf)
	return err
}
