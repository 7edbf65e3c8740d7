package refresh

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/pgsketch/pgsketch/sketch"
)

// The hot loop of a refresh: tens of millions of base rows, each a COPY
// BINARY tuple. feedFast reads the common tuple (a complete base row whose
// sketched values are integers or text) straight from the bytes, a batch of
// tuples at a time, in three passes: parse the tuples and find their
// groups; hash the values; add the hashes to the sketches. The short loops
// of the last two passes let the processor work on several rows at once
// (the hash is a chain of multiplications, the sketch insert mostly a cache
// miss). Everything else (partials rows, malformed values, a tuple cut by the
// end of the data, the header and the trailer) goes through copyReader.next
// and add, one tuple at a time, which also report the errors.
//
// A base row comes in one of two shapes (see refresh_begin's read_sql):
//   - flagged: the flag true, the time, the dimensions, one value per
//     measure (NULL for all but the hll ones);
//   - lean, when the statement reads no partials rows: the time, the
//     dimensions, one value per hll measure.
// They never have the same number of fields.

// fastBatch is the number of tuples feedFast parses before hashing them.
const fastBatch = 256

// fastState is feedFast's scratch space.
type fastState struct {
	grps [fastBatch]*group
	// Per tuple and hll measure (tuple-major): the integer to print and
	// hash, or the hash; how the value came.
	ints  []int64
	hs    []uint64
	forms []uint8
	// The hashes for sketches that use registers, and their sketches.
	dsk []*sketch.HLL
	dhs []uint64
	// wide and lean say what each measure value of a tuple of either shape
	// is: its hll measure (an index into hllIdx), sumPlan(s) for the s-th
	// sum the refresher adds (an index into sumIdx), or -1 for another
	// measure's; forms how each hll measure's value comes (valueInt8, ...).
	wide, lean []int
	valForms   []uint8
	// sums holds, per tuple and added sum (tuple-major), the value's bytes
	// (a slice of the data being fed) or nil for NULL.
	sums [][]byte
}

// sumPlan is the plan entry of the s-th added sum.
func sumPlan(s int) int { return -2 - s }

const (
	formAbsent uint8 = iota // NULL
	formInt                 // ints holds it; not hashed yet
	formHashed              // hs holds its hash
)

// How an hll measure's value comes (field.form).
const (
	valueInt8 uint8 = iota
	valueInt4
	valueInt2
	valueText
)

// init sets up st for g.
func (st *fastState) init(g *groups) {
	nh := len(g.hllIdx)
	st.ints = make([]int64, fastBatch*nh)
	st.hs = make([]uint64, fastBatch*nh)
	st.forms = make([]uint8, fastBatch*nh)
	st.dsk = make([]*sketch.HLL, 0, fastBatch*nh)
	st.dhs = make([]uint64, 0, fastBatch*nh)
	st.sums = make([][]byte, fastBatch*len(g.sumIdx))
	for i, f := range g.fields {
		switch f.kind {
		case "hll":
			j := len(st.valForms)
			st.wide = append(st.wide, j)
			st.lean = append(st.lean, j)
			st.valForms = append(st.valForms, map[string]uint8{"int8": valueInt8, "int4": valueInt4, "int2": valueInt2, "text": valueText}[f.form])
		case "gsum":
			s := slices.Index(g.sumIdx, i)
			st.wide = append(st.wide, sumPlan(s))
			st.lean = append(st.lean, sumPlan(s))
		default:
			st.wide = append(st.wide, -1)
		}
	}
}

// rawForms reports whether every sketched value of g arrives raw (an
// integer or text), the values feedFast reads and the lean shape carries.
func (g *groups) rawForms() bool {
	for _, f := range g.fields {
		if f.sketched() && f.kind != "gsum" && f.form != "int2" && f.form != "int4" && f.form != "int8" && f.form != "text" {
			return false
		}
	}
	return true
}

// addTuple consumes one tuple read by copyReader: a lean base row is
// widened to the flagged shape for add.
func (g *groups) addTuple(f [][]byte) error {
	if !g.lean || len(f) != 1+g.ndims+len(g.sketchIdx) {
		return g.add(f)
	}
	w := append(g.wide[:0], []byte{1})
	w = append(w, f[:1+g.ndims]...)
	for range g.fields {
		w = append(w, nil)
	}
	for j, i := range g.sketchIdx {
		w[2+g.ndims+i] = f[1+g.ndims+j]
	}
	g.wide = w
	return g.add(w)
}

// feedFast consumes complete base-row tuples from the front of b while they
// are regular and returns the bytes used and the tuples read; it stops at
// the first tuple it does not handle, which the caller reads the general
// way.
func (g *groups) feedFast(b []byte) (used int, tuples int64) {
	st := &g.fs
	if st.ints == nil {
		st.init(g)
	}
	for {
		k, n, stop := g.parseBatch(b[used:])
		used += n
		st.hashInts(k * len(g.hllIdx))
		g.sketchBatch(k)
		g.addSums(k)
		g.rows += int64(k)
		tuples += int64(k)
		if stop || g.fastErr != nil {
			return used, tuples
		}
	}
}

// parseBatch is pass 1: it parses up to fastBatch tuples from the front of
// b, finding the group of each, and returns how many it parsed, the bytes
// they take and whether it stopped at a tuple it does not handle (or at the
// end of b) rather than at the end of the batch.
func (g *groups) parseBatch(b []byte) (k, used int, stop bool) {
	flagged := uint16(2 + g.ndims + len(g.fields))
	lean := uint16(1 + g.ndims + len(g.sketchIdx))
	if !g.lean {
		lean = flagged
	}
	for k < fastBatch {
		n, ok := g.parseTuple(b[used:], k, flagged, lean)
		if !ok {
			return k, used, true
		}
		k++
		used += n
	}
	return k, used, false
}

// parseTuple parses t, the k-th tuple of the batch, of flagged or lean
// fields: its group into st.grps[k], its measure values into the batch's
// arrays. It returns the tuple's length, or false when t is not a complete
// base row of regular values.
func (g *groups) parseTuple(t []byte, k int, flagged, lean uint16) (int, bool) {
	st := &g.fs
	if len(t) < 2 {
		return 0, false
	}
	p := 2
	nf := binary.BigEndian.Uint16(t)
	wide := nf == flagged
	if wide {
		if len(t) < 7 || binary.BigEndian.Uint32(t[2:]) != 1 || t[6] != 1 {
			return 0, false // not a base row, or not as expected
		}
		p = 7
	} else if nf != lean {
		return 0, false
	}
	start, p, ok := g.bucketStart(t, p)
	if !ok {
		return 0, false
	}
	ds := p
	for range g.ndims {
		if _, p, _, ok = copyField(t, p); !ok {
			return 0, false
		}
	}
	dims := t[ds:p]
	plan := st.lean
	if wide {
		plan = st.wide
	}
	if p, ok = g.parseMeasures(t, p, k, plan); !ok {
		return 0, false
	}
	st.grps[k] = g.lookup(start, dims)
	return p, true
}

// bucketStart reads the time field at t[p:] and returns the start of its
// bucket and where the next field begins.
func (g *groups) bucketStart(t []byte, p int) (int64, int, bool) {
	if len(t) < p+4 {
		return 0, p, false
	}
	tl := binary.BigEndian.Uint32(t[p:])
	p += 4
	switch {
	case g.bucket.date && tl == 4 && len(t) >= p+4:
		return int64(g.bucket.dateDays(int32(binary.BigEndian.Uint32(t[p:])))), p + 4, true
	case !g.bucket.date && tl == 8 && len(t) >= p+8:
		return g.bucket.micros(int64(binary.BigEndian.Uint64(t[p:]))), p + 8, true
	}
	return 0, p, false
}

// parseMeasures reads the measure values at t[p:] of the k-th tuple of the
// batch as plan (st.wide or st.lean) lays them out, and returns where they
// end, or false at a value the fast path does not handle.
func (g *groups) parseMeasures(t []byte, p, k int, plan []int) (int, bool) {
	st := &g.fs
	row := k * len(g.hllIdx)
	ns := len(g.sumIdx)
	for _, j := range plan {
		v, next, null, ok := copyField(t, p)
		if !ok {
			return p, false
		}
		p = next
		if null {
			if j >= 0 {
				st.forms[row+j] = formAbsent
			} else if j <= sumPlan(0) {
				st.sums[k*ns+sumPlan(0)-j] = nil
			}
			continue
		}
		if j <= sumPlan(0) {
			st.sums[k*ns+sumPlan(0)-j] = v
			continue
		}
		if j < 0 {
			continue // another measure: set only in partials rows, ignored in base rows
		}
		// An hll measure's value: the integer to hash in pass 2, or the
		// hash of a text.
		x := row + j
		st.forms[x] = formInt
		switch vf, l := st.valForms[j], len(v); {
		case vf == valueInt8 && l == 8:
			st.ints[x] = int64(binary.BigEndian.Uint64(v))
		case vf == valueInt4 && l == 4:
			st.ints[x] = int64(int32(binary.BigEndian.Uint32(v)))
		case vf == valueInt2 && l == 2:
			st.ints[x] = int64(int16(binary.BigEndian.Uint16(v)))
		case vf == valueText:
			st.forms[x] = formHashed
			st.hs[x] = xxhash.Sum64(v)
		default:
			return p, false // add reports it
		}
	}
	return p, true
}

// hashInts is pass 2: it hashes the integers of the first n values.
func (st *fastState) hashInts(n int) {
	for x, f := range st.forms[:n] {
		if f == formInt {
			st.hs[x] = hashInt(st.ints[x])
		}
	}
}

// sketchBatch is pass 3: it counts the first k tuples in their groups and
// adds their hashes, exact sketches' into their sets, the others gathered
// and added in one loop.
func (g *groups) sketchBatch(k int) {
	st := &g.fs
	nh := len(g.hllIdx)
	dsk, dhs := st.dsk[:0], st.dhs[:0]
	for r, grp := range st.grps[:k] {
		grp.rows++
		for j, i := range g.hllIdx {
			x := r*nh + j
			if st.forms[x] == formAbsent {
				continue
			}
			if p := grp.pending[i]; p != nil {
				if p.add(st.hs[x]) && p.n > grp.flushAt[i] {
					grp.flush(i)
				}
				continue
			}
			dsk = append(dsk, grp.sketches[i])
			dhs = append(dhs, st.hs[x])
		}
	}
	sketch.AddHashEach(dsk, dhs)
}

// addSums is pass 4: it adds the first k tuples' values of the sums the
// refresher adds, keeping the first error in g.fastErr.
func (g *groups) addSums(k int) {
	st := &g.fs
	ns := len(g.sumIdx)
	for r, grp := range st.grps[:k] {
		for s, i := range g.sumIdx {
			if v := st.sums[r*ns+s]; v != nil {
				if err := grp.sums[i].add(g.fields[i].form, v); err != nil && g.fastErr == nil {
					g.fastErr = fmt.Errorf("measure %d: %w", i+1, err)
				}
			}
		}
	}
}

// addHash adds hash h to the group's sketch i: straight into registers, or,
// while the sketch is exact, into the set of pending values.
func (grp *group) addHash(i int, h uint64) {
	p := grp.pending[i]
	if p == nil {
		grp.sketches[i].AddHash(h)
		return
	}
	if p.add(h) && p.n > grp.flushAt[i] {
		grp.flush(i)
	}
}

// newGroup returns the group of key with empty sketches.
func (g *groups) newGroup(key string) *group {
	grp := &group{key: key, sketches: make([]*sketch.HLL, len(g.fields)),
		pending: make([]*hashSet, len(g.fields)), flushAt: make([]int, len(g.fields)),
		partials: make([][]byte, len(g.fields))}
	for i, fd := range g.fields {
		if fd.kind == "theta" {
			if grp.thetas == nil {
				grp.thetas = make([]*thetaState, len(g.fields))
			}
			grp.thetas[i] = newThetaState(fd.log2m)
		}
		if fd.kind == "topk" {
			if grp.topks == nil {
				grp.topks = make([]*topkState, len(g.fields))
			}
			grp.topks[i] = newTopkState(fd.log2m)
		}
		if fd.kind == "gsum" {
			if grp.sums == nil {
				grp.sums = make([]*sumState, len(g.fields))
			}
			grp.sums[i] = &sumState{}
		}
		if fd.kind == "hll" {
			grp.sketches[i], _ = sketch.NewHLL(fd.log2m, fd.regwidth) // checked by parseFields
			grp.pending[i] = &hashSet{cache: &g.slots}
			grp.flushAt[i] = max(pendingMin, grp.sketches[i].ExactRoom())
		}
	}
	return grp
}

// lookup returns the group of bucket start and the dimension bytes dims (as
// COPY BINARY fields), creating it when new. Rows mostly arrive in time
// order: the groups of the current bucket are a slice indexed by a small
// number standing for the dimension values, which stays in cache.
func (g *groups) lookup(start int64, dims []byte) *group {
	if start != g.curBucket || g.cur == nil {
		if g.byBucket == nil {
			g.byBucket = make(map[int64]*[]*group)
		}
		g.curBucket = start
		if g.cur = g.byBucket[start]; g.cur == nil {
			g.cur = new([]*group)
			g.byBucket[start] = g.cur
		}
	}
	id := g.dimIDs.id(dims)
	cur := *g.cur
	if id < len(cur) {
		if grp := cur[id]; grp != nil {
			return grp
		}
	} else {
		cur = append(cur, make([]*group, id+1-len(cur))...)
		*g.cur = cur
	}
	key := make([]byte, 8+len(dims))
	binary.BigEndian.PutUint64(key, uint64(start))
	copy(key[8:], dims)
	grp := g.newGroup(string(key))
	g.m[grp.key] = grp
	cur[id] = grp
	return grp
}

// dimIndex numbers distinct dimension bytes 0, 1, 2, ... in an open
// addressing table. Keys of up to 32 bytes (dimensions are usually short)
// are held packed in four words, compared and hashed as such.
type dimIndex struct {
	slots []dimSlot // power of two in length
	keys  []string  // by number
	seed  maphash.Seed
}

// dimSlot holds a key packed (see packKey) when it is short, else its hash
// in w0.
type dimSlot struct {
	w0, w1, w2, w3 uint64
	n              int32 // the key's length
	id             int32 // number + 1; 0 for an empty slot
}

// packKey packs a key of up to 32 bytes into words that, with its length,
// determine it: overlapping loads covering every byte, at offsets computed
// without a branch on the length (which varies from row to row). The words
// are returned in registers: an array would be written and read back
// through memory in pieces of different sizes, which stalls.
func packKey(b []byte) (w0, w1, w2, w3 uint64) {
	n := len(b)
	if n >= 8 {
		// [0,8) [n-8,n) [min(8,n-8),+8) [max(n-16,0),+8): all of 8..32 bytes.
		return binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:]),
			binary.LittleEndian.Uint64(b[min(8, n-8):]), binary.LittleEndian.Uint64(b[max(n-16, 0):])
	}
	if n >= 4 {
		return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32, 0, 0, 0
	}
	if n > 0 {
		return uint64(b[0]) | uint64(b[n>>1])<<8 | uint64(b[n-1])<<16, 0, 0, 0
	}
	return 0, 0, 0, 0
}

func hashKey(w0, w1, w2, w3 uint64, n int) uint64 {
	hi, lo := bits.Mul64(w0^0xa0761d6478bd642f, w1^0xe7037ed1a0b428db^uint64(n))
	hi2, lo2 := bits.Mul64(w2^0x8ebc6af09c88c6e3, w3^0x589965cc75374cc3)
	return hi ^ lo ^ hi2 ^ lo2
}

// id returns the number of key, assigning the next one when it is new.
func (x *dimIndex) id(key []byte) int {
	if x.slots == nil {
		x.slots = make([]dimSlot, 64)
		x.seed = maphash.MakeSeed()
	}
	n := len(key)
	var w0, w1, w2, w3, h uint64
	if n <= 32 {
		w0, w1, w2, w3 = packKey(key)
		h = hashKey(w0, w1, w2, w3, n)
	} else {
		h = maphash.Bytes(x.seed, key)
		w0 = h // compared first; then the key itself
	}
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.id == 0 {
			x.keys = append(x.keys, string(key))
			*s = dimSlot{w0: w0, w1: w1, w2: w2, w3: w3, n: int32(n), id: int32(len(x.keys))}
			if 2*len(x.keys) > len(x.slots) {
				x.grow()
			}
			return len(x.keys) - 1
		}
		if s.w0 == w0 && s.w1 == w1 && s.w2 == w2 && s.w3 == w3 && s.n == int32(n) &&
			(n <= 32 || x.keys[s.id-1] == string(key)) {
			return int(s.id - 1)
		}
	}
}

func (x *dimIndex) grow() {
	old := x.slots
	x.slots = make([]dimSlot, 2*len(old))
	mask := uint64(len(x.slots) - 1)
	for _, s := range old {
		if s.id == 0 {
			continue
		}
		h := s.w0 // a long key's hash
		if s.n <= 32 {
			h = hashKey(s.w0, s.w1, s.w2, s.w3, int(s.n))
		}
		i := h & mask
		for x.slots[i].id != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// hashInt returns the xxhash64 (seed 0) of n's decimal text, what int2out,
// int4out and int8out print: the canonical text hash of an integer.
// Texts of up to 8 bytes (-9999999 to 99999999) are built and hashed in a
// register without a branch on their length, which varies from row to row:
// mispredicted branches cost more than the arithmetic.
func hashInt(n int64) uint64 {
	if uint64(n+9_999_999) < 9_999_999+100_000_000 {
		return hashShortInt(n)
	}
	return hashLongInt(n)
}

// hashShortInt is hashInt for -9999999 <= n <= 99999999.
func hashShortInt(n int64) uint64 {
	neg := n < 0
	u := uint64(n)
	if neg {
		u = -u
	}
	// Eight decimal digits, the first in the low byte (SWAR: 4-digit halves
	// in 32-bit lanes, then 2-digit pairs in 16-bit lanes, then digits).
	hi := u / 10000
	x := hi | (u-hi*10000)<<32
	y := (x * 10486 >> 20) & 0x0000007f0000007f // lane / 100
	y = (x-y*100)<<16 | y
	z := (y * 103 >> 10) & 0x000f000f000f000f // lane / 10
	z = (y-z*10)<<8 | z
	// Leading zero digits are the low zero bytes; one digit stays for 0.
	lz := uint(bits.TrailingZeros64(z|1<<56)) / 8
	w := (z + 0x3030303030303030) >> (8 * lz)
	l := 8 - uint64(lz)
	if neg {
		w = w<<8 | '-'
		l++
	}
	if l == 8 {
		k := bits.RotateLeft64(w*xxPrime2, 31) * xxPrime1
		h := xxPrime5 + 8 ^ k
		return xxAvalanche(bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4)
	}
	// l is 1 to 7: a 4-byte step when l >= 4, then l%4 single bytes; each
	// step is computed and kept or dropped by a conditional move.
	h := xxPrime5 + l
	h4 := bits.RotateLeft64(h^(w&0xffffffff)*xxPrime1, 23)*xxPrime2 + xxPrime3
	if l >= 4 {
		h = h4
		w >>= 32
	}
	m := l & 3
	h1 := bits.RotateLeft64(h^(w&0xff)*xxPrime5, 11) * xxPrime1
	if m >= 1 {
		h = h1
	}
	h2 := bits.RotateLeft64(h^(w>>8&0xff)*xxPrime5, 11) * xxPrime1
	if m >= 2 {
		h = h2
	}
	h3 := bits.RotateLeft64(h^(w>>16&0xff)*xxPrime5, 11) * xxPrime1
	if m == 3 {
		h = h3
	}
	return xxAvalanche(h)
}

func xxAvalanche(h uint64) uint64 {
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}

// hashLongInt is hashInt for the other values: rare, so printed and hashed
// the plain way.
func hashLongInt(n int64) uint64 {
	var buf [20]byte
	return xxhash.Sum64(strconv.AppendInt(buf[:0], n, 10))
}

// xxhash64's primes (seed 0), as github.com/cespare/xxhash/v2 uses them.
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

// copyField reads the binary COPY field at t[p:]: its bytes, where the next
// field starts, and whether it is NULL; ok is false when t ends first.
func copyField(t []byte, p int) (v []byte, next int, null, ok bool) {
	if len(t) < p+4 {
		return nil, p, false, false
	}
	l := int32(binary.BigEndian.Uint32(t[p:]))
	p += 4
	if l == -1 {
		return nil, p, true, true
	}
	if l < 0 || int(l) > len(t)-p {
		return nil, p, false, false
	}
	return t[p : p+int(l)], p + int(l), false, true
}
