package sketch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func mustCountMin(t testing.TB, eps, delta float64) *CountMin {
	t.Helper()
	c, err := NewCountMin(eps, delta)
	if err != nil {
		t.Fatalf("NewCountMin(%v, %v): %v", eps, delta, err)
	}
	return c
}

func mustCMAdd(t testing.TB, c *CountMin, item []byte, count int64) {
	t.Helper()
	if err := c.Add(item, count); err != nil {
		t.Fatalf("Add(%x, %d): %v", item, count, err)
	}
}

func marshalCM(t testing.TB, c *CountMin) []byte {
	t.Helper()
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

func decodeCM(t testing.TB, b []byte) *CountMin {
	t.Helper()
	var c CountMin
	if err := c.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary: %v", err)
	}
	return &c
}

func TestNewCountMinShape(t *testing.T) {
	for _, tc := range []struct {
		eps, delta   float64
		width, depth int
	}{
		{0.001, 0.01, 2719, 5},
		{0.01, 0.05, 272, 3},
		{0.5, 0.5, 6, 1},
		{0.9, 0.99, 4, 1},
		{math.E / 1000, math.Exp(-2), 1000, 2},
	} {
		c := mustCountMin(t, tc.eps, tc.delta)
		if c.Width() != tc.width || c.Depth() != tc.depth {
			t.Errorf("NewCountMin(%v, %v): %d × %d, want %d × %d", tc.eps, tc.delta, c.Width(), c.Depth(), tc.width, tc.depth)
		}
		if c.Epsilon() > tc.eps || c.Delta() > tc.delta*(1+1e-12) {
			t.Errorf("NewCountMin(%v, %v): Epsilon %v, Delta %v", tc.eps, tc.delta, c.Epsilon(), c.Delta())
		}
	}
	for _, p := range [][2]float64{
		{0, 0.01}, {1, 0.01}, {-1, 0.01}, {math.NaN(), 0.01}, {0.01, 0}, {0.01, 1},
		{0.01, math.NaN()}, {math.Inf(1), 0.1}, {1e-7, 0.01}, {0.1, 1e-15},
	} {
		if _, err := NewCountMin(p[0], p[1]); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("NewCountMin(%v, %v): %v, want ErrInvalidParams", p[0], p[1], err)
		}
	}
}

// A million adds from a skewed stream with random counts; after each, the
// estimate of the item added and of a random item (often never added) is
// at least its true count: two million checks. No cell ever exceeds the
// cell of a plain Count-Min sketch (every count added to all of an item's
// cells) of the same input.
func TestCountMinNeverUnderestimates(t *testing.T) {
	const adds, universe = 1_000_000, 200_000
	c := mustCountMin(t, 0.01, 0.01)
	plain := make([]int64, len(c.cells))
	r := rand.New(rand.NewPCG(11, 12))
	zipf := rand.NewZipf(r, 1.1, 1, universe-1)
	exact := make([]int64, universe)
	var key [8]byte
	var cols columns
	for i := range adds {
		v := zipf.Uint64()
		count := int64(1)
		if i%16 == 0 {
			count = 1 + r.Int64N(1000)
		}
		mustCMAdd(t, c, putKey(&key, v), count)
		exact[v] += count
		h1, h2 := murmur3(key[:], countMinSeed)
		c.columnsOf(h1, h2, &cols)
		for _, j := range cols[:c.depth] {
			plain[j] += count
		}
		if est := c.Estimate(key[:]); est < exact[v] {
			t.Fatalf("add %d: Estimate(%d) = %d < true %d", i, v, est, exact[v])
		}
		w := r.Uint64N(universe)
		if est := c.Estimate(putKey(&key, w)); est < exact[w] {
			t.Fatalf("add %d: Estimate(%d) = %d < true %d", i, w, est, exact[w])
		}
	}
	for j, v := range c.cells {
		if v > plain[j] {
			t.Fatalf("cell %d: %d above the plain Count-Min cell %d", j, v, plain[j])
		}
	}
}

func putKey(buf *[8]byte, v uint64) []byte {
	for i := range 8 {
		buf[7-i] = byte(v >> (8 * i))
	}
	return buf[:]
}

// Estimates exceed true counts by more than ε·N for at most a share δ of
// the items, for skewed and flat streams, single and merged sketches. The
// probability is over the hashes; the trials draw fresh items (random 8
// byte keys), which is the same for a fixed hash. Every item of a trial's
// universe is checked, most of them never added or rare, the ones whose
// estimates are mostly collisions. The observed share must stay below
// δ/2: the bound is loose, and conservative update tightens it further.
func TestCountMinErrorBound(t *testing.T) {
	const eps, delta, trials, universe, events = 0.01, 0.05, 40, 4000, 20_000
	r := rand.New(rand.NewPCG(21, 22))
	var checked, over int
	worst := 0.0
	for trial := range trials {
		s := []float64{1.01, 1.3, 2}[trial%3]
		if trial%4 == 3 {
			s = 0 // uniform
		}
		keys := make([][]byte, universe)
		for i := range keys {
			keys[i] = key8(r.Uint64())
		}
		parts := 1 + trial%5*4 // 1, 5, 9, 13 or 17 sketches merged
		c, exact := countMinTrial(t, r, keys, s, events, parts, eps, delta)
		for i, k := range keys {
			e := float64(c.Estimate(k)-exact[i]) / float64(c.N())
			worst = max(worst, e)
			checked++
			if e > eps {
				over++
			}
		}
	}
	share := float64(over) / float64(checked)
	t.Logf("%d estimates, %d over ε·N (share %.2g, δ = %v); worst error %.4f·N (ε = %v)",
		checked, over, share, delta, worst, eps)
	if share > delta/2 {
		t.Fatalf("share over ε·N %.3g > δ/2 = %v", share, delta/2)
	}
}

// countMinTrial adds events draws over keys (Zipf with exponent s, or
// uniform for s = 0) to parts sketches, round robin, and merges them.
func countMinTrial(t *testing.T, r *rand.Rand, keys [][]byte, s float64, events, parts int,
	eps, delta float64) (*CountMin, []int64) {
	t.Helper()
	draw := func() uint64 { return r.Uint64N(uint64(len(keys))) }
	if s > 0 {
		draw = rand.NewZipf(r, s, 1, uint64(len(keys)-1)).Uint64
	}
	sketches := make([]*CountMin, parts)
	for i := range sketches {
		sketches[i] = mustCountMin(t, eps, delta)
	}
	exact := make([]int64, len(keys))
	for i := range events {
		k := draw()
		mustCMAdd(t, sketches[i%parts], keys[k], 1)
		exact[k]++
	}
	for _, o := range sketches[1:] {
		if err := sketches[0].Merge(o); err != nil {
			t.Fatal(err)
		}
	}
	return sketches[0], exact
}

func TestCountMinMerge(t *testing.T) {
	a, b := mustCountMin(t, 0.1, 0.1), mustCountMin(t, 0.1, 0.1)
	for i := range 100 {
		mustCMAdd(t, a, key8(uint64(i%7)), 1)
		mustCMAdd(t, b, key8(uint64(i%5)), 2)
	}
	if err := a.AddNull(3); err != nil {
		t.Fatal(err)
	}
	sum := a.Clone()
	if err := sum.Merge(b); err != nil {
		t.Fatal(err)
	}
	for i, v := range sum.cells {
		if v != a.cells[i]+b.cells[i] {
			t.Fatalf("cell %d: %d, want %d + %d", i, v, a.cells[i], b.cells[i])
		}
	}
	if sum.N() != 300+3 {
		t.Fatalf("N %d", sum.N())
	}
	for i := range 7 {
		want := int64(100 / 7)
		if i < 100%7 {
			want++
		}
		if i < 5 {
			want += 2 * 20
		}
		if est := sum.Estimate(key8(uint64(i))); est < want {
			t.Fatalf("Estimate(%d) = %d < %d", i, est, want)
		}
	}
	if est := sum.EstimateNull(); est < 3 {
		t.Fatalf("EstimateNull = %d", est)
	}
	self := b.Clone()
	if err := self.Merge(self); err != nil || self.N() != 2*b.N() || self.cells[0] != 2*b.cells[0] {
		t.Fatalf("self merge: %v, N %d", err, self.N())
	}
}

func TestCountMinErrors(t *testing.T) {
	c := mustCountMin(t, 0.1, 0.1)
	mustCMAdd(t, c, []byte("a"), math.MaxInt64-5)
	before := marshalCM(t, c)
	big := mustCountMin(t, 0.1, 0.1)
	mustCMAdd(t, big, []byte("b"), 6)
	for name, tc := range map[string]struct {
		o    *CountMin
		want error
	}{
		"nil":      {nil, ErrInvalidParams},
		"zero":     {&CountMin{}, ErrInvalidParams},
		"width":    {mustCountMin(t, 0.2, 0.1), ErrIncompatible},
		"depth":    {mustCountMin(t, 0.1, 0.01), ErrIncompatible},
		"overflow": {big, ErrOverflow},
	} {
		if err := c.Merge(tc.o); !errors.Is(err, tc.want) {
			t.Errorf("Merge %s: %v, want %v", name, err, tc.want)
		}
	}
	if err := c.Add([]byte("a"), 6); !errors.Is(err, ErrOverflow) {
		t.Errorf("Add overflow: %v", err)
	}
	if err := c.Add([]byte("a"), -1); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("Add negative: %v", err)
	}
	if err := c.AddNull(-1); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("AddNull negative: %v", err)
	}
	if !bytes.Equal(before, marshalCM(t, c)) {
		t.Errorf("failed calls changed the sketch")
	}
	var zero CountMin
	if err := zero.Add([]byte("a"), 1); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("zero value Add: %v", err)
	}
	if _, err := zero.MarshalBinary(); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("zero value MarshalBinary: %v", err)
	}
	if zero.Estimate([]byte("a")) != 0 || zero.EstimateNull() != 0 {
		t.Errorf("zero value Estimate")
	}
}

func TestCountMinRoundTrip(t *testing.T) {
	c := mustCountMin(t, 0.01, 0.01)
	r := rand.New(rand.NewPCG(5, 6))
	for range 10_000 {
		mustCMAdd(t, c, key8(r.Uint64N(500)), 1+r.Int64N(3))
	}
	enc := marshalCM(t, c)
	back := decodeCM(t, enc)
	if back.Width() != c.Width() || back.Depth() != c.Depth() || back.N() != c.N() {
		t.Fatalf("shape or N differs")
	}
	for i := range uint64(600) {
		if back.Estimate(key8(i)) != c.Estimate(key8(i)) {
			t.Fatalf("Estimate(%d) differs", i)
		}
	}
	if !bytes.Equal(marshalCM(t, back), enc) {
		t.Fatalf("re-encoding differs")
	}
}

// The layout of "Count-Min byte layout" in the package documentation.
func TestCountMinMarshalLayout(t *testing.T) {
	c := mustCountMin(t, 0.9, 0.2) // width 4, depth 2
	mustCMAdd(t, c, []byte("a"), 200)
	mustCMAdd(t, c, []byte("b"), 1)
	got := marshalCM(t, c)
	want := "43 01 04 02 c9 01"
	var cells []byte
	for _, v := range c.cells {
		cells = appendTestUvarint(cells, uint64(v))
	}
	if hex.EncodeToString(got) != stripSpaces(want)+hex.EncodeToString(cells) {
		t.Fatalf("bytes %x, want %s then the cells %x", got, want, cells)
	}
	if est := c.Estimate([]byte("a")); est < 200 || est > 201 {
		t.Fatalf("Estimate(a) = %d", est)
	}
}

func appendTestUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func TestCountMinUnmarshalMalformed(t *testing.T) {
	valid := "43 01 02 01 05 03 02" // width 2, depth 1, N 5, cells 3 2
	for _, tc := range []struct {
		name, hex string
		want      error
	}{
		{"empty", "", ErrTruncated},
		{"short", "43", ErrTruncated},
		{"tag", "44 01 02 01 05 03 02", ErrType},
		{"version", "43 02 02 01 05 03 02", ErrVersion},
		{"width 0", "43 01 00 01 00", ErrInvalidParams},
		{"depth 0", "43 01 02 00 00", ErrInvalidParams},
		{"depth too big", "43 01 01 21 00", ErrInvalidParams},
		{"too many cells", "43 01 8080 80 02 02 00", ErrInvalidParams},
		{"width overflows", "43 01 ffffffffffffffffff01 02 00", ErrInvalidParams},
		{"cells past the bytes", "43 01 04 02 05 01 02 03", ErrTruncated},
		{"N cut short", "43 01 02 01", ErrTruncated},
		{"N over MaxInt64", "43 01 02 01 ffffffffffffffffff01 00 00", ErrCorrupt},
		{"varint not shortest", "43 01 02 01 05 83 00 02", ErrCorrupt},
		{"cell over N", "43 01 02 01 05 06 00", ErrCorrupt},
		{"row over N", "43 01 02 01 05 03 03", ErrCorrupt},
		{"cell cut short", "43 01 02 01 05 03 82 81", ErrTruncated},
		{"trailing bytes", valid + " 00", ErrCorrupt},
	} {
		in, err := hex.DecodeString(stripSpaces(tc.hex))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := mustCountMin(t, 0.5, 0.5)
		mustCMAdd(t, c, []byte("keep"), 3)
		before := marshalCM(t, c)
		if err := c.UnmarshalBinary(in); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if !bytes.Equal(marshalCM(t, c), before) {
			t.Errorf("%s: receiver changed", tc.name)
		}
	}
	in, _ := hex.DecodeString(stripSpaces(valid))
	if c := decodeCM(t, in); c.N() != 5 || c.Width() != 2 || c.Depth() != 1 {
		t.Fatalf("valid input: N %d, %d × %d", c.N(), c.Width(), c.Depth())
	}
}
