package sketch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Expected values of the Java fixtures (testdata/theta/README.md). Theta and
// the estimate are given to 15 significant digits, the bounds exactly.
const (
	fixtureRetained = 4342
	fixtureTheta    = "0.531700444213199"
	fixtureEstimate = "8166.25234614053"
	fixtureLB2      = 7996.956955317471
	fixtureUB2      = 8339.090301078124
)

var thetaFixtures = []string{
	"theta_compact_empty_from_java_v1.sk",
	"theta_compact_empty_from_java_v2.sk",
	"theta_compact_estimation_from_java_v1.sk",
	"theta_compact_estimation_from_java_v2.sk",
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "theta", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustTheta(t testing.TB, lgK int) *Theta {
	t.Helper()
	s, err := NewTheta(lgK)
	if err != nil {
		t.Fatalf("NewTheta(%d): %v", lgK, err)
	}
	return s
}

func decodeCompact(t testing.TB, b []byte) *CompactTheta {
	t.Helper()
	var c CompactTheta
	if err := c.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary(%.64x...): %v", b, err)
	}
	return &c
}

func marshalCompact(t testing.TB, c *CompactTheta) []byte {
	t.Helper()
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

// sketchOf returns the compact sketch of AddInt64(v) for v in [from, to).
func sketchOf(t testing.TB, lgK int, from, to int64) *CompactTheta {
	t.Helper()
	s := mustTheta(t, lgK)
	for v := from; v < to; v++ {
		s.AddInt64(v)
	}
	return s.Compact()
}

func sameCompact(a, b *CompactTheta) bool {
	return a.empty == b.empty && a.theta == b.theta && slices.Equal(a.hashes, b.hashes)
}

// --- MurmurHash3 ---

func TestMurmur3KnownVectors(t *testing.T) {
	tests := []struct {
		in     string
		seed   uint64
		h1, h2 uint64
	}{
		{"", 0, 0, 0}, // every step maps 0 to 0
		// Published DataSketches test vectors: remainders 11, 11, 1 and 8.
		{"The quick brown fox jumps over the lazy dog", 0, 0xe34bbc7bbc071b6c, 0x7a433ca9c49a9347},
		{"The quick brown fox jumps over the lazy eog", 0, 0x362108102c62d1c9, 0x3285cd100292b305},
		{"The quick brown fox jumps over the lazy dogdogdog", 0, 0x9c8205300e612fc4, 0xcbc0af6136aa3df9},
		{"The quick brown fox jumps over the lazy1", 0, 0xe3301a827e5cdfe3, 0xbdbf05f8da0f0392},
	}
	for _, tc := range tests {
		if r1, r2 := murmur3Ref([]byte(tc.in), tc.seed); r1 != tc.h1 || r2 != tc.h2 {
			t.Errorf("reference murmur3(%q) = %#x, %#x", tc.in, r1, r2)
		}
		h1, h2 := murmur3([]byte(tc.in), tc.seed)
		if h1 != tc.h1 || h2 != tc.h2 {
			t.Errorf("murmur3(%q, %d) = %#x, %#x; want %#x, %#x", tc.in, tc.seed, h1, h2, tc.h1, tc.h2)
		}
		s1, s2 := murmur3(tc.in, tc.seed)
		if s1 != h1 || s2 != h2 {
			t.Errorf("string and []byte hashes of %q differ", tc.in)
		}
	}
}

func TestThetaSeedHash(t *testing.T) {
	if thetaSeedHash != 0x93cc {
		t.Fatalf("seed hash of %d = %#x, want 0x93cc", ThetaSeed, thetaSeedHash)
	}
	// The Java fixtures of serial version 2 store it at bytes 6-7.
	for _, name := range thetaFixtures[1:] {
		b := readFixture(t, name)
		if b[1] != 2 {
			continue
		}
		if got := binary.LittleEndian.Uint16(b[6:]); got != thetaSeedHash {
			t.Errorf("%s: seed hash %#x, want %#x", name, got, thetaSeedHash)
		}
	}
}

// murmur3Ref is a plain transcription of the algorithm, byte by byte, to
// check the word loads and the tail handling of murmur3 at every length.
func murmur3Ref(data []byte, seed uint64) (uint64, uint64) {
	rotl := func(x uint64, r uint) uint64 { return x<<r | x>>(64-r) }
	word := func(b []byte) uint64 {
		var w uint64
		for i := len(b) - 1; i >= 0; i-- {
			w = w<<8 | uint64(b[i])
		}
		return w
	}
	const c1, c2 = 0x87c37b91114253d5, 0x4cf5ad432745937f
	h1, h2 := seed, seed
	nblocks := len(data) / 16
	for b := range nblocks {
		k1, k2 := word(data[16*b:16*b+8]), word(data[16*b+8:16*b+16])
		k1 *= c1
		k1 = rotl(k1, 31)
		k1 *= c2
		h1 ^= k1
		h1 = rotl(h1, 27)
		h1 += h2
		h1 = h1*5 + 0x52dce729
		k2 *= c2
		k2 = rotl(k2, 33)
		k2 *= c1
		h2 ^= k2
		h2 = rotl(h2, 31)
		h2 += h1
		h2 = h2*5 + 0x38495ab5
	}
	tail := data[16*nblocks:]
	if len(tail) > 8 {
		k2 := word(tail[8:])
		k2 *= c2
		k2 = rotl(k2, 33)
		k2 *= c1
		h2 ^= k2
	}
	if len(tail) > 0 {
		k1 := word(tail[:min(8, len(tail))])
		k1 *= c1
		k1 = rotl(k1, 31)
		k1 *= c2
		h1 ^= k1
	}
	h1 ^= uint64(len(data))
	h2 ^= uint64(len(data))
	h1 += h2
	h2 += h1
	h1, h2 = fmix64(h1), fmix64(h2)
	h1 += h2
	h2 += h1
	return h1, h2
}

// The 8-byte fast path and every block/tail length agree with the plain
// transcription, for both instantiations.
func TestMurmur3Consistency(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, v := range []uint64{0, 1, 8191, 1 << 63, r.Uint64(), r.Uint64()} {
		for _, seed := range []uint64{0, ThetaSeed, r.Uint64()} {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], v)
			w1, w2 := murmur3(b[:], seed)
			g1, g2 := murmur3Uint64(v, seed)
			if g1 != w1 || g2 != w2 {
				t.Fatalf("murmur3Uint64(%#x, %d) = %#x %#x, want %#x %#x", v, seed, g1, g2, w1, w2)
			}
		}
	}
	buf := make([]byte, 100)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	seen := map[uint64]bool{}
	for n := range len(buf) {
		h1, h2 := murmur3(buf[:n], ThetaSeed)
		s1, s2 := murmur3(string(buf[:n]), ThetaSeed)
		if h1 != s1 || h2 != s2 {
			t.Fatalf("length %d: string and []byte hashes differ", n)
		}
		if r1, r2 := murmur3Ref(buf[:n], ThetaSeed); h1 != r1 || h2 != r2 {
			t.Fatalf("length %d: %#x %#x, reference %#x %#x", n, h1, h2, r1, r2)
		}
		if seen[h1] {
			t.Fatalf("length %d: repeated hash", n)
		}
		seen[h1] = true
		if ThetaHash(buf[:n]) != h1>>1 || thetaHashString(string(buf[:n])) != h1>>1 {
			t.Fatalf("length %d: ThetaHash is not h1 >> 1", n)
		}
	}
}

// --- fixtures ---

func TestThetaJavaFixtures(t *testing.T) {
	for _, name := range thetaFixtures {
		t.Run(name, func(t *testing.T) {
			c := decodeCompact(t, readFixture(t, name))
			if strings.Contains(name, "empty") {
				checkEmptyCompact(t, c)
				return
			}
			checkFixtureValues(t, c)
		})
	}
}

func checkEmptyCompact(t *testing.T, c *CompactTheta) {
	t.Helper()
	if !c.IsEmpty() || c.IsEstimationMode() || c.NumRetained() != 0 || c.Theta() != 1 || c.Estimate() != 0 {
		t.Fatalf("empty=%t estimation=%t retained=%d theta=%v estimate=%v",
			c.IsEmpty(), c.IsEstimationMode(), c.NumRetained(), c.Theta(), c.Estimate())
	}
	for sd := 1; sd <= 3; sd++ {
		if lb, ub := c.LowerBound(sd), c.UpperBound(sd); lb != 0 || ub != 0 {
			t.Fatalf("bounds(%d) = %v, %v; want 0, 0", sd, lb, ub)
		}
	}
}

func checkFixtureValues(t *testing.T, c *CompactTheta) {
	t.Helper()
	if c.IsEmpty() || !c.IsEstimationMode() || c.NumRetained() != fixtureRetained {
		t.Fatalf("empty=%t estimation=%t retained=%d", c.IsEmpty(), c.IsEstimationMode(), c.NumRetained())
	}
	if got := fmt.Sprintf("%.15g", c.Theta()); got != fixtureTheta {
		t.Errorf("theta %s, want %s", got, fixtureTheta)
	}
	if got := fmt.Sprintf("%.15g", c.Estimate()); got != fixtureEstimate {
		t.Errorf("estimate %s, want %s", got, fixtureEstimate)
	}
	if lb := c.LowerBound(2); lb != fixtureLB2 {
		t.Errorf("LowerBound(2) = %.17g, want %.17g", lb, fixtureLB2)
	}
	if ub := c.UpperBound(2); ub != fixtureUB2 {
		t.Errorf("UpperBound(2) = %.17g, want %.17g", ub, fixtureUB2)
	}
	if !slices.IsSorted(c.hashes) {
		t.Errorf("hashes not sorted")
	}
}

// The default update sketch of the integers 0..8191 is, bit for bit, the
// sketch the Java library serialized.
func TestThetaReproducesJava(t *testing.T) {
	got := sketchOf(t, DefaultThetaLgK, 0, 8192)
	for _, name := range thetaFixtures[2:] {
		want := decodeCompact(t, readFixture(t, name))
		if got.theta != want.theta {
			t.Errorf("%s: theta %#x, want %#x", name, got.theta, want.theta)
		}
		if !slices.Equal(got.hashes, want.hashes) {
			t.Fatalf("%s: retained hashes differ (%d vs %d)", name, len(got.hashes), len(want.hashes))
		}
		if got.Estimate() != want.Estimate() {
			t.Errorf("estimate %v, want %v", got.Estimate(), want.Estimate())
		}
		for sd := 1; sd <= 3; sd++ {
			if got.LowerBound(sd) != want.LowerBound(sd) || got.UpperBound(sd) != want.UpperBound(sd) {
				t.Errorf("bounds(%d) differ", sd)
			}
		}
	}
	checkFixtureValues(t, got)
}

// Re-encoding the Java v2 fixture as v3 changes only the version byte and
// the unused p field, which Java wrote as 1.0f and now writes as 0.
func TestThetaFixtureAsV3(t *testing.T) {
	in := readFixture(t, "theta_compact_estimation_from_java_v2.sk")
	out := marshalCompact(t, decodeCompact(t, in))
	want := slices.Clone(in)
	want[1] = 3
	clear(want[12:16])
	if !bytes.Equal(out, want) {
		t.Fatalf("v3 encoding differs from the v2 fixture beyond version and p")
	}
	for _, name := range thetaFixtures {
		c := decodeCompact(t, readFixture(t, name))
		back := decodeCompact(t, marshalCompact(t, c))
		if !sameCompact(c, back) {
			t.Errorf("%s: v3 round trip changed the sketch", name)
		}
	}
	empty := marshalCompact(t, decodeCompact(t, readFixture(t, "theta_compact_empty_from_java_v1.sk")))
	if want := []byte{1, 3, 3, 0, 0, 0x1e, 0xcc, 0x93}; !bytes.Equal(empty, want) {
		t.Errorf("empty sketch encodes as % x, want % x", empty, want)
	}
}

// --- update sketch ---

// refTheta models the QuickSelect sketch with a map and a sort: only the
// counts that trigger a resize or a rebuild matter for the retained set.
type refTheta struct {
	lgK, lgCur int
	theta      uint64
	set        map[uint64]bool
}

func newRefTheta(lgK int) *refTheta {
	return &refTheta{lgK: lgK, lgCur: int(startLgTable(lgK)), theta: thetaMax, set: map[uint64]bool{}}
}

func (r *refTheta) add(h uint64) {
	if h == 0 || h >= r.theta || r.set[h] {
		return
	}
	r.set[h] = true
	capacity := int(math.Floor(0.5 * float64(int(1)<<r.lgCur)))
	if r.lgCur > r.lgK {
		capacity = int(math.Floor(15.0 / 16.0 * float64(int(1)<<r.lgCur)))
	}
	if len(r.set) <= capacity {
		return
	}
	if r.lgCur <= r.lgK {
		r.lgCur = min(r.lgCur+3, r.lgK+1)
		return
	}
	all := slices.Sorted(mapKeys(r.set))
	k := 1 << r.lgK
	r.theta = all[k]
	for _, h := range all[k:] {
		delete(r.set, h)
	}
}

func mapKeys(m map[uint64]bool) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestThetaMatchesModel(t *testing.T) {
	for _, lgK := range []int{4, 5, 6, 7, 9, 10, 12} {
		for _, n := range []int{0, 1, 15, 16, 17, 31, 33, 65, 200, 1000, 20000} {
			s := mustTheta(t, lgK)
			ref := newRefTheta(lgK)
			r := rand.New(rand.NewPCG(uint64(lgK), uint64(n)))
			for i := range n {
				v := r.Uint64() % uint64(2*n+1) // with repeats
				if i%7 == 0 {
					v = uint64(i)
				}
				s.AddUint64(v)
				ref.add(thetaHashUint64(v))
				if s.lgCur != uint8(ref.lgCur) {
					t.Fatalf("lgK %d n %d after %d: table 2^%d, want 2^%d", lgK, n, i, s.lgCur, ref.lgCur)
				}
			}
			c := s.Compact()
			want := slices.Sorted(mapKeys(ref.set))
			if c.theta != ref.theta && !(c.empty && ref.theta == thetaMax) {
				t.Fatalf("lgK %d n %d: theta %#x, want %#x", lgK, n, c.theta, ref.theta)
			}
			if !slices.Equal(c.hashes, want) && !(len(c.hashes) == 0 && len(want) == 0) {
				t.Fatalf("lgK %d n %d: %d hashes, want %d", lgK, n, len(c.hashes), len(want))
			}
			if s.NumRetained() != len(want) {
				t.Fatalf("NumRetained %d, want %d", s.NumRetained(), len(want))
			}
		}
	}
}

func TestThetaTableGrowth(t *testing.T) {
	tests := []struct{ lgK, start int }{{4, 5}, {5, 6}, {6, 7}, {7, 5}, {8, 6}, {12, 7}, {26, 6}}
	for _, tc := range tests {
		if got := startLgTable(tc.lgK); int(got) != tc.start {
			t.Errorf("startLgTable(%d) = %d, want %d", tc.lgK, got, tc.start)
		}
	}
	s := mustTheta(t, 12)
	steps := []struct{ adds, lgCur, count int }{{64, 7, 64}, {65, 10, 65}, {512, 10, 512}, {513, 13, 513}, {7680, 13, 7680}, {7681, 13, 4096}}
	added := 0
	for _, st := range steps {
		for ; added < st.adds; added++ {
			s.AddHash(uint64(added + 1))
		}
		if int(s.lgCur) != st.lgCur || s.count != st.count {
			t.Fatalf("after %d adds: table 2^%d with %d, want 2^%d with %d", added, s.lgCur, s.count, st.lgCur, st.count)
		}
	}
	if s.theta != 4097 {
		t.Fatalf("theta after the rebuild %d, want 4097", s.theta)
	}
}

func TestThetaScreening(t *testing.T) {
	s := mustTheta(t, 4)
	s.AddBytes(nil)
	s.AddBytes([]byte{})
	s.AddString("")
	if !s.IsEmpty() {
		t.Fatal("empty input made the sketch non-empty")
	}
	checkEmptyCompact(t, s.Compact())
	s.AddHash(0)
	s.AddHash(thetaMax)
	s.AddHash(1 << 63)
	if s.IsEmpty() || s.NumRetained() != 0 {
		t.Fatalf("screened hashes: empty %t, retained %d", s.IsEmpty(), s.NumRetained())
	}
	// As in DataSketches, no hash and theta 1.0 compacts to an empty sketch.
	checkEmptyCompact(t, s.Compact())
	s.AddHash(5)
	s.AddHash(5)
	s.AddString("x")
	s.AddBytes([]byte("x"))
	if s.NumRetained() != 2 || s.Estimate() != 2 {
		t.Fatalf("retained %d, estimate %v; want 2", s.NumRetained(), s.Estimate())
	}
	if ThetaHash([]byte("x")) != thetaHashString("x") {
		t.Fatal("AddString and AddBytes hash differently")
	}
	if _, err := NewTheta(3); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("NewTheta(3): %v", err)
	}
	if _, err := NewTheta(27); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("NewTheta(27): %v", err)
	}
	f := mustTheta(t, 10)
	f.AddFloat64(0)
	f.AddFloat64(math.Copysign(0, -1))
	f.AddFloat64(math.NaN())
	f.AddFloat64(math.Float64frombits(0x7ff0000000000001))
	f.AddFloat64(1.5)
	g := mustTheta(t, 10)
	g.AddInt64(0)
	g.AddUint64(0x7ff8000000000000)
	g.AddUint64(math.Float64bits(1.5))
	if !sameCompact(f.Compact(), g.Compact()) || f.NumRetained() != 3 {
		t.Error("AddFloat64 does not canonicalize -0 and NaN")
	}
	a := mustTheta(t, 10)
	a.AddInt64(-1)
	b := mustTheta(t, 10)
	b.AddUint64(math.MaxUint64)
	if !sameCompact(a.Compact(), b.Compact()) {
		t.Error("AddInt64(-1) and AddUint64(MaxUint64) differ")
	}
}

func TestSelectNth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 3, 10, 100, 7681} {
		for _, order := range []string{"random", "ascending", "descending"} {
			xs := make([]uint64, n)
			for i := range xs {
				xs[i] = r.Uint64()
			}
			switch order {
			case "ascending":
				slices.Sort(xs)
			case "descending":
				slices.Sort(xs)
				slices.Reverse(xs)
			}
			sorted := slices.Sorted(slices.Values(xs))
			k := r.IntN(n)
			selectNth(xs, k)
			if xs[k] != sorted[k] {
				t.Fatalf("n %d %s: xs[%d] = %d, want %d", n, order, k, xs[k], sorted[k])
			}
			for i := range xs {
				if (i < k && xs[i] >= xs[k]) || (i > k && xs[i] <= xs[k]) {
					t.Fatalf("n %d %s: not partitioned at %d", n, order, i)
				}
			}
		}
	}
}

// sortTable must sort whatever the distribution of the hashes: uniform
// (the bucket pass does the work), clustered in one bucket in random order
// (the fallback sort does), or few.
func TestSortTable(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	gens := map[string]func() uint64{
		"uniform":   func() uint64 { return r.Uint64N(thetaMax/3) + 1 },
		"clustered": func() uint64 { return r.Uint64N(1<<20) + 1 },
		"two spots": func() uint64 { return r.Uint64N(1<<14) + 1 + (r.Uint64N(2) << 40) },
	}
	var counts []int32
	for name, gen := range gens {
		for _, n := range []int{0, 1, 63, 64, 65, 1000, 7680} {
			table := make([]uint64, 2*n+16)
			seen := map[uint64]bool{}
			for len(seen) < n {
				h := gen()
				if !seen[h] {
					seen[h] = true
					for {
						i := r.IntN(len(table))
						if table[i] == 0 {
							table[i] = h
							break
						}
					}
				}
			}
			out := make([]uint64, n)
			counts = sortTable(out, table, thetaMax/3+1, counts)
			if want := slices.Sorted(mapKeys(seen)); !slices.Equal(out, want) {
				t.Fatalf("%s n %d: not sorted", name, n)
			}
		}
	}
}

// --- serialization ---

func TestThetaMarshalLayouts(t *testing.T) {
	single := sketchOf(t, 12, 7, 8)
	exact := sketchOf(t, 12, 0, 3)
	estimating := sketchOf(t, 4, 0, 100)
	empty := mustTheta(t, 12).Compact()
	tests := []struct {
		name     string
		c        *CompactTheta
		pre      int
		flags    byte
		size     int
		hashesAt int
	}{
		{"empty", empty, 1, 0x1e, 8, 8},
		{"single", single, 1, 0x3a, 16, 8},
		{"exact", exact, 2, 0x1a, 16 + 3*8, 16},
		{"estimating", estimating, 3, 0x1a, 24 + 8*estimating.NumRetained(), 24},
	}
	for _, tc := range tests {
		b := marshalCompact(t, tc.c)
		if len(b) != tc.size || int(b[0]) != tc.pre || b[1] != 3 || b[2] != 3 || b[3] != 0 || b[4] != 0 || b[5] != tc.flags {
			t.Errorf("%s: header % x, %d bytes", tc.name, b[:8], len(b))
		}
		if binary.LittleEndian.Uint16(b[6:]) != 0x93cc {
			t.Errorf("%s: seed hash % x", tc.name, b[6:8])
		}
		if tc.pre >= 2 {
			if n := binary.LittleEndian.Uint32(b[8:]); int(n) != tc.c.NumRetained() || binary.LittleEndian.Uint32(b[12:]) != 0 {
				t.Errorf("%s: count word % x", tc.name, b[8:16])
			}
		}
		if tc.pre == 3 && binary.LittleEndian.Uint64(b[16:]) != tc.c.theta {
			t.Errorf("%s: theta word % x", tc.name, b[16:24])
		}
		for i, h := range tc.c.hashes {
			if binary.LittleEndian.Uint64(b[tc.hashesAt+8*i:]) != h {
				t.Fatalf("%s: hash %d misplaced", tc.name, i)
			}
		}
		back := decodeCompact(t, b)
		if !sameCompact(back, tc.c) {
			t.Errorf("%s: round trip changed the sketch", tc.name)
		}
		if again := marshalCompact(t, back); !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoding differs", tc.name)
		}
		pre := []byte("prefix")
		app, err := tc.c.AppendBinary(pre)
		if err != nil || !bytes.Equal(app[:len(pre)], pre) || !bytes.Equal(app[len(pre):], b) {
			t.Errorf("%s: AppendBinary mismatch (%v)", tc.name, err)
		}
	}
	var zero CompactTheta
	if _, err := zero.MarshalBinary(); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("zero value MarshalBinary: %v", err)
	}
}

// thetaBytes builds a serialized sketch: the 8-byte first word, then words.
func thetaBytes(pre, ver, fam, flags byte, seedHash uint16, words ...uint64) []byte {
	b := []byte{pre, ver, fam, 0, 0, flags, byte(seedHash), byte(seedHash >> 8)}
	for _, w := range words {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

// countWord is the second preamble word holding n hashes (p = 0).
func countWord(n uint32) uint64 { return uint64(n) }

const (
	fOrd   = thetaFlagReadOnly | thetaFlagCompact | thetaFlagOrdered
	fEmpty = fOrd | thetaFlagEmpty
	sh     = 0x93cc
	th     = uint64(1) << 62
)

func TestThetaUnmarshalMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"nil", nil, ErrTruncated},
		{"seven bytes", thetaBytes(1, 3, 3, fEmpty, sh)[:7], ErrTruncated},
		{"serial version 0", thetaBytes(1, 0, 3, fEmpty, sh), ErrVersion},
		{"serial version 4", thetaBytes(2, 4, 3, fOrd, sh, 1, 5), ErrVersion},
		{"serial version 5", thetaBytes(1, 5, 3, fEmpty, sh), ErrVersion},
		{"family 2 (update sketch)", thetaBytes(3, 3, 2, fOrd, sh, countWord(0), th), ErrType},
		{"family 1 (alpha)", thetaBytes(1, 3, 1, fEmpty, sh), ErrType},
		{"big-endian flag", thetaBytes(2, 3, 3, fOrd|thetaFlagBigEndian, sh, countWord(1), 5), ErrCorrupt},
		{"big-endian flag v2", thetaBytes(2, 2, 3, fOrd|thetaFlagBigEndian, sh, countWord(1), 5), ErrCorrupt},
		{"compact flag missing", thetaBytes(2, 3, 3, thetaFlagOrdered, sh, countWord(1), 5), ErrCorrupt},
		{"preamble 0", thetaBytes(0, 3, 3, fOrd, sh), ErrCorrupt},
		{"preamble 4", thetaBytes(4, 3, 3, fOrd, sh, countWord(0), th, 0), ErrCorrupt},
		{"preamble 0x43", thetaBytes(0x43, 3, 3, fOrd, sh, countWord(0), th), ErrCorrupt},
		{"v1 preamble 2", thetaBytes(2, 1, 3, 0, 0, countWord(0), 0), ErrCorrupt},
		{"v2 preamble 4", thetaBytes(4, 2, 3, 0, sh, countWord(0), th, 0), ErrCorrupt},
		{"single item flag with preamble 3", thetaBytes(3, 3, 3, fOrd|thetaFlagSingleItem, sh, countWord(1), th, 5), ErrCorrupt},
		{"single item flag when empty", thetaBytes(1, 3, 3, fEmpty|thetaFlagSingleItem, sh), ErrCorrupt},
		{"empty with hashes", thetaBytes(2, 3, 3, fEmpty, sh, countWord(1), 5), ErrCorrupt},
		{"seed hash", thetaBytes(2, 3, 3, fOrd, 0x1234, countWord(2), 5, 6), ErrIncompatible},
		{"seed hash single", thetaBytes(1, 3, 3, fOrd, 0x1234, 5), ErrIncompatible},
		{"seed hash v2", thetaBytes(2, 2, 3, fOrd, 0x1234, countWord(1), 5), ErrIncompatible},
		{"theta 0", thetaBytes(3, 3, 3, fOrd, sh, countWord(0), 0), ErrCorrupt},
		{"theta 2^63", thetaBytes(3, 3, 3, fOrd, sh, countWord(1), 1<<63, 5), ErrCorrupt},
		{"v1 theta 0", thetaBytes(3, 1, 3, 0, 0, countWord(0), 0), ErrCorrupt},
		{"hash 0", thetaBytes(2, 3, 3, fOrd, sh, countWord(2), 0, 5), ErrCorrupt},
		{"single hash 0", thetaBytes(1, 3, 3, fOrd, sh, 0), ErrCorrupt},
		{"hash equal to theta", thetaBytes(3, 3, 3, fOrd, sh, countWord(2), th, 5, th), ErrCorrupt},
		{"hash above theta unordered", thetaBytes(3, 3, 3, thetaFlagCompact, sh, countWord(2), th, th+1, 5), ErrCorrupt},
		{"hash with top bit", thetaBytes(2, 3, 3, fOrd, sh, countWord(1), 1<<63), ErrCorrupt},
		{"duplicate", thetaBytes(2, 3, 3, fOrd, sh, countWord(2), 5, 5), ErrCorrupt},
		{"duplicate unordered", thetaBytes(2, 3, 3, thetaFlagCompact, sh, countWord(3), 7, 5, 7), ErrCorrupt},
		{"duplicate v1", thetaBytes(3, 1, 3, 0, 0, countWord(2), thetaMax, 5, 5), ErrCorrupt},
		{"descending but ordered", thetaBytes(2, 3, 3, fOrd, sh, countWord(2), 6, 5), ErrCorrupt},
		{"single truncated", thetaBytes(1, 3, 3, fOrd, sh), ErrTruncated},
		{"count beyond data", thetaBytes(2, 3, 3, fOrd, sh, countWord(3), 5, 6), ErrTruncated},
		{"count 2^32-1", thetaBytes(2, 3, 3, fOrd, sh, countWord(math.MaxUint32), 5), ErrTruncated},
		{"preamble 3 truncated", thetaBytes(3, 3, 3, fOrd, sh, countWord(0)), ErrTruncated},
		{"v1 preamble truncated", thetaBytes(3, 1, 3, 0, 0, countWord(0)), ErrTruncated},
		{"partial hash", thetaBytes(2, 3, 3, fOrd, sh, countWord(2), 5, 6)[:30], ErrTruncated},
		{"trailing bytes", append(thetaBytes(2, 3, 3, fOrd, sh, countWord(2), 5, 6), 0), ErrCorrupt},
		{"trailing word after single", thetaBytes(1, 3, 3, fOrd, sh, 5, 6), ErrCorrupt},
		{"trailing bytes empty", append(thetaBytes(1, 3, 3, fEmpty, sh), 0), ErrCorrupt},
		{"trailing bytes v2 empty", thetaBytes(1, 2, 3, fEmpty, sh, 0), ErrCorrupt},
	}
	receivers := map[string]func() *CompactTheta{
		"zero":      func() *CompactTheta { return &CompactTheta{} },
		"empty":     func() *CompactTheta { return mustTheta(t, 12).Compact() },
		"estimated": func() *CompactTheta { return sketchOf(t, 6, 0, 1000) },
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for rname, mk := range receivers {
				c := mk()
				before := *c
				before.hashes = slices.Clone(c.hashes)
				err := c.UnmarshalBinary(tc.in)
				if !errors.Is(err, tc.want) {
					t.Fatalf("receiver %s: error %v, want %v", rname, err, tc.want)
				}
				if !strings.HasPrefix(err.Error(), "sketch: unmarshal theta: ") {
					t.Fatalf("error %q lacks context prefix", err)
				}
				if !sameCompact(c, &before) {
					t.Fatalf("receiver %s changed by failed UnmarshalBinary", rname)
				}
			}
		})
	}
}

// TestThetaUnmarshalAccepts lists valid encodings that MarshalBinary does
// not produce itself but other writers (or older versions) do.
func TestThetaUnmarshalAccepts(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		empty  bool
		theta  uint64
		hashes []uint64
	}{
		{"C++ single item (no SINGLEITEM flag)", thetaBytes(1, 3, 3, fOrd, sh, 5), false, thetaMax, []uint64{5}},
		{"single item unordered flags", thetaBytes(1, 3, 3, thetaFlagCompact, sh, 5), false, thetaMax, []uint64{5}},
		{"unordered v3 is sorted", thetaBytes(3, 3, 3, thetaFlagCompact, sh, countWord(3), th, 9, 5, 7), false, th, []uint64{5, 7, 9}},
		{"exact mode with 1 hash in 2 longs", thetaBytes(2, 3, 3, fOrd, sh, countWord(1), 5), false, thetaMax, []uint64{5}},
		{"preamble 3 with theta 1.0", thetaBytes(3, 3, 3, fOrd, sh, countWord(2), thetaMax, 5, 6), false, thetaMax, []uint64{5, 6}},
		{"estimation with no hashes", thetaBytes(3, 3, 3, fOrd, sh, countWord(0), th), false, th, nil},
		{"no hashes theta 1.0 is empty", thetaBytes(2, 3, 3, fOrd, sh, countWord(0)), true, thetaMax, nil},
		{"empty with p < 1 (3 longs)", thetaBytes(3, 3, 3, fEmpty, sh, countWord(0), th), true, thetaMax, nil},
		{"empty with another seed hash", thetaBytes(1, 3, 3, fEmpty, 0x1234), true, thetaMax, nil},
		{"v2 empty in 2 longs", thetaBytes(2, 2, 3, 0, sh, countWord(0)), true, thetaMax, nil},
		{"v2 unordered", thetaBytes(2, 2, 3, 0, sh, countWord(2), 9, 5), false, thetaMax, []uint64{5, 9}},
		{"v1 unordered", thetaBytes(3, 1, 3, 0, 0, countWord(2), th, 9, 5), false, th, []uint64{5, 9}},
		{"v1 ignores byte 5", thetaBytes(3, 1, 3, 0xff, 0xffff, countWord(1), th, 5), false, th, []uint64{5}},
		{"v3 reserved flag bits", thetaBytes(1, 3, 3, fOrd|0xc0, sh, 5), false, thetaMax, []uint64{5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := decodeCompact(t, tc.in)
			if c.empty != tc.empty || c.theta != tc.theta || !slices.Equal(c.hashes, tc.hashes) {
				t.Fatalf("got empty %t theta %#x hashes %v", c.empty, c.theta, c.hashes)
			}
			if back := decodeCompact(t, marshalCompact(t, c)); !sameCompact(back, c) {
				t.Fatal("round trip changed the sketch")
			}
		})
	}
}

// --- set operations ---

func mustUnion(t testing.TB, lgK int, cs ...*CompactTheta) *CompactTheta {
	t.Helper()
	u, err := ThetaUnion(lgK, cs...)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func mustIntersect(t testing.TB, a *CompactTheta, rest ...*CompactTheta) *CompactTheta {
	t.Helper()
	x, err := ThetaIntersect(a, rest...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func mustANotB(t testing.TB, a, b *CompactTheta) *CompactTheta {
	t.Helper()
	x, err := ThetaANotB(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestThetaSetOpsExact(t *testing.T) {
	a := sketchOf(t, 12, 0, 1000)
	b := sketchOf(t, 12, 500, 1500)
	c := sketchOf(t, 12, 900, 950)
	empty := mustTheta(t, 12).Compact()
	tests := []struct {
		name string
		got  *CompactTheta
		want *CompactTheta
	}{
		{"a∪b", mustUnion(t, 12, a, b), sketchOf(t, 12, 0, 1500)},
		{"a∪b∪c∪∅", mustUnion(t, 12, a, b, c, empty), sketchOf(t, 12, 0, 1500)},
		{"a∩b", mustIntersect(t, a, b), sketchOf(t, 12, 500, 1000)},
		{"a∩b∩c", mustIntersect(t, a, b, c), sketchOf(t, 12, 900, 950)},
		{"a∩a", mustIntersect(t, a), a},
		{"a−b", mustANotB(t, a, b), sketchOf(t, 12, 0, 500)},
		{"b−a", mustANotB(t, b, a), sketchOf(t, 12, 1000, 1500)},
		{"a−∅", mustANotB(t, a, empty), a},
		{"∅−a", mustANotB(t, empty, a), empty},
		{"a∩∅", mustIntersect(t, a, empty), empty},
		{"∅∪∅", mustUnion(t, 12, empty, empty), empty},
		{"no inputs", mustUnion(t, 12), empty},
		{"c−c", mustANotB(t, c, c), empty},
		{"disjoint ∩", mustIntersect(t, sketchOf(t, 12, 0, 10), sketchOf(t, 12, 10, 20)), empty},
	}
	for _, tc := range tests {
		if !sameCompact(tc.got, tc.want) {
			t.Errorf("%s: got %d hashes (empty %t, theta %v), want %d (empty %t)", tc.name,
				tc.got.NumRetained(), tc.got.IsEmpty(), tc.got.Theta(), tc.want.NumRetained(), tc.want.IsEmpty())
		}
		if tc.got.IsEstimationMode() || tc.got.Estimate() != float64(tc.want.NumRetained()) {
			t.Errorf("%s: estimate %v not exact", tc.name, tc.got.Estimate())
		}
	}
}

// hashesOf returns the ascending distinct Theta hashes of [from, to).
func hashesOf(from, to int64) []uint64 {
	hs := make([]uint64, 0, to-from)
	for v := from; v < to; v++ {
		hs = append(hs, thetaHashUint64(uint64(v)))
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

func filterBelow(hs []uint64, theta uint64, keep func(uint64) bool) []uint64 {
	var out []uint64
	for _, h := range hs {
		if h < theta && keep(h) {
			out = append(out, h)
		}
	}
	return out
}

func checkCovers(t *testing.T, name string, c *CompactTheta, truth float64) {
	t.Helper()
	if lb, ub := c.LowerBound(3), c.UpperBound(3); truth < lb || truth > ub {
		t.Errorf("%s: truth %v outside [%v, %v] (estimate %v)", name, truth, lb, ub, c.Estimate())
	}
}

func TestThetaSetOpsEstimation(t *testing.T) {
	const lgK = 10
	a := sketchOf(t, lgK, 0, 100_000)
	b := sketchOf(t, lgK, 50_000, 150_000)
	ha, hb := hashesOf(0, 100_000), hashesOf(50_000, 150_000)
	inB := func(h uint64) bool { _, ok := slices.BinarySearch(hb, h); return ok }
	theta := min(a.theta, b.theta)
	all := func(uint64) bool { return true }

	u := mustUnion(t, lgK, a, b)
	wantU := filterBelow(hashesOf(0, 150_000), theta, all)
	if len(wantU) > 1<<lgK {
		theta := wantU[1<<lgK]
		if u.theta != theta {
			t.Errorf("union theta %#x, want %#x", u.theta, theta)
		}
		wantU = wantU[:1<<lgK]
	}
	if !slices.Equal(u.hashes, wantU) {
		t.Errorf("union: %d hashes, want %d", len(u.hashes), len(wantU))
	}
	checkCovers(t, "union", u, 150_000)

	x := mustIntersect(t, a, b)
	if x.theta != theta || !slices.Equal(x.hashes, filterBelow(ha, theta, inB)) {
		t.Errorf("intersection: %d hashes, theta %#x", len(x.hashes), x.theta)
	}
	checkCovers(t, "intersection", x, 50_000)

	d := mustANotB(t, a, b)
	notB := func(h uint64) bool { return !inB(h) }
	if d.theta != theta || !slices.Equal(d.hashes, filterBelow(ha, theta, notB)) {
		t.Errorf("a-not-b: %d hashes, theta %#x", len(d.hashes), d.theta)
	}
	checkCovers(t, "a-not-b", d, 50_000)

	// A union of one sketch trims it to k hashes.
	big := sketchOf(t, lgK+2, 0, 100_000)
	one := mustUnion(t, lgK, big)
	if one.NumRetained() != 1<<lgK || one.theta != big.hashes[1<<lgK] || !slices.Equal(one.hashes, big.hashes[:1<<lgK]) {
		t.Errorf("union of one sketch: %d hashes", one.NumRetained())
	}
	// An estimation-mode sketch that retained nothing still carries theta.
	none := mustIntersect(t, sketchOf(t, lgK, 0, 50_000), sketchOf(t, lgK, 1_000_000, 1_050_000))
	if none.IsEmpty() || !none.IsEstimationMode() || none.NumRetained() != 0 || none.UpperBound(2) <= 0 {
		t.Errorf("empty intersection in estimation mode: empty %t, est mode %t, ub %v",
			none.IsEmpty(), none.IsEstimationMode(), none.UpperBound(2))
	}
	if uu := mustUnion(t, lgK, none, sketchOf(t, lgK, 0, 10)); uu.theta != none.theta || uu.NumRetained() != len(filterBelow(hashesOf(0, 10), none.theta, all)) {
		t.Errorf("union with a hashless estimation sketch ignores its theta")
	}
}

func TestThetaSetOpErrors(t *testing.T) {
	a := sketchOf(t, 12, 0, 10)
	if _, err := ThetaUnion(3, a); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("union lgK 3: %v", err)
	}
	if _, err := ThetaUnion(12, a, nil); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("union with nil: %v", err)
	}
	if _, err := ThetaIntersect(&CompactTheta{}, a); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("intersect with zero value: %v", err)
	}
	if _, err := ThetaANotB(a, nil); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("a-not-b with nil: %v", err)
	}
}

// --- bounds ---

// javaExactLB and javaExactUB follow the Java library's exact procedure,
// used there when theta >= n/360: walk m upwards accumulating the
// probability that the n-th success happens at trial m.
func javaExactLB(n int, p, delta float64) float64 {
	q := 1 - p
	term := math.Pow(p, float64(n))
	tot := term
	m := n
	for tot <= delta {
		term = term * q * float64(m) / float64(m+1-n)
		tot += term
		m++
	}
	return float64(m - 1)
}

func javaExactUB(n int, p, delta float64) float64 {
	n++
	q := 1 - p
	term := math.Pow(p, float64(n))
	tot := term
	m := n
	for tot < 1-delta {
		term = term * q * float64(m) / float64(m+1-n)
		tot += term
		m++
	}
	return float64(m)
}

func TestThetaExactBoundsMatchJava(t *testing.T) {
	for n := 1; n <= exactBoundMax; n++ {
		for _, theta := range []float64{float64(n) / 360, 0.4, 0.5, 0.77, 0.9, 0.99} {
			if theta < float64(n)/360 || theta > 1-1e-5 || theta >= 1 {
				continue
			}
			for sd := 1; sd <= 3; sd++ {
				delta := thetaDeltas[sd]
				if n >= 2 {
					if got, want := exactLowerBound(n, theta, delta), javaExactLB(n, theta, delta); got != want {
						t.Errorf("n %d theta %v sd %d: LB %v, Java %v", n, theta, sd, got, want)
					}
				}
				if got, want := exactUpperBound(n, theta, delta), javaExactUB(n, theta, delta); got != want {
					t.Errorf("n %d theta %v sd %d: UB %v, Java %v", n, theta, sd, got, want)
				}
			}
		}
	}
}

// lgammaCDF is P(Binomial(trials, theta) <= m) summed from log-gamma
// terms: an independent check of binomialCDF for moderate trials.
func lgammaCDF(trials float64, m int, theta float64) float64 {
	sum := 0.0
	lt, _ := math.Lgamma(trials + 1)
	for j := 0; j <= m && float64(j) <= trials; j++ {
		lj, _ := math.Lgamma(float64(j) + 1)
		lr, _ := math.Lgamma(trials - float64(j) + 1)
		sum += math.Exp(lt - lj - lr + float64(j)*math.Log(theta) + (trials-float64(j))*math.Log1p(-theta))
	}
	return sum
}

func TestBinomialCDF(t *testing.T) {
	for _, trials := range []float64{1, 5, 50, 333, 4000, 1e6} {
		for _, m := range []int{0, 1, 2, 10, 60, 120} {
			for _, theta := range []float64{1e-5, 0.001, 0.01, 0.3, 0.9} {
				got, want := binomialCDF(trials, m, theta), lgammaCDF(trials, m, theta)
				if math.Abs(got-want) > 1e-9*max(want, 1e-300) && math.Abs(got-want) > 1e-300 {
					t.Errorf("cdf(%v, %d, %v) = %v, want %v", trials, m, theta, got, want)
				}
			}
		}
	}
	// Huge numbers of trials: P(X = 0) underflows but the sum must not.
	if got := binomialCDF(1e20, 100, 1e-18); !(got > 0.4 && got < 0.6) {
		t.Errorf("cdf(1e20, 100, 1e-18) = %v, want near 0.5", got)
	}
}

// TestThetaBoundsDefinition checks the bounds against their definition for
// small counts, including thetas where Java uses its tables.
func TestThetaBoundsDefinition(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 20, 60, 120} {
		for _, theta := range []float64{1e-4, 0.003, 0.02, 0.1, 0.5, 0.95} {
			for sd := 1; sd <= 3; sd++ {
				delta := thetaDeltas[sd]
				lb := binomialLowerBound(uint64(n), theta, sd, delta)
				ub := binomialUpperBound(uint64(n), theta, sd, delta)
				est := float64(n) / theta
				if !(lb <= est && est <= ub && lb >= float64(n)) {
					t.Fatalf("n %d theta %v sd %d: %v <= %v <= %v violated", n, theta, sd, lb, est, ub)
				}
				// Upper bound: P(X <= n) <= delta at ub, > delta at ub-1.
				if n > 0 && ub > est {
					if lgammaCDF(ub, n, theta) > delta*(1+1e-9) || lgammaCDF(ub-1, n, theta) <= delta*(1-1e-9) {
						t.Errorf("n %d theta %v sd %d: UB %v not the smallest N", n, theta, sd, ub)
					}
				}
				// Lower bound: P(X >= n) <= delta at raw lb, > delta at lb+1.
				if n >= 2 && lb > float64(n) && lb < est {
					if 1-lgammaCDF(lb, n-1, theta) > delta*(1+1e-9) || 1-lgammaCDF(lb+1, n-1, theta) <= delta*(1-1e-9) {
						t.Errorf("n %d theta %v sd %d: LB %v not the largest N", n, theta, sd, lb)
					}
				}
				if sd > 1 {
					if binomialLowerBound(uint64(n), theta, sd-1, thetaDeltas[sd-1]) < lb ||
						binomialUpperBound(uint64(n), theta, sd-1, thetaDeltas[sd-1]) > ub {
						t.Errorf("n %d theta %v: bounds not nested in numStdDev", n, theta)
					}
				}
			}
		}
	}
}

func TestThetaBoundsClosedForms(t *testing.T) {
	c := &CompactTheta{theta: thetaMax / 4}
	theta := c.Theta()
	for sd := 1; sd <= 3; sd++ {
		delta := thetaDeltas[sd]
		if got, want := c.UpperBound(sd), math.Ceil(math.Log(delta)/math.Log1p(-theta)); got != want {
			t.Errorf("n 0 UB(%d) = %v, want %v", sd, got, want)
		}
		if c.LowerBound(sd) != 0 || c.Estimate() != 0 {
			t.Errorf("n 0: LB %v, estimate %v", c.LowerBound(sd), c.Estimate())
		}
	}
	one := &CompactTheta{theta: 1 << 60, hashes: []uint64{5}}
	theta = one.Theta()
	for sd := 1; sd <= 3; sd++ {
		raw := math.Floor(math.Log(1-thetaDeltas[sd]) / math.Log1p(-theta))
		if got, want := one.LowerBound(sd), min(1/theta, max(1, raw)); got != want {
			t.Errorf("n 1 LB(%d) = %v, want %v", sd, got, want)
		}
	}
	for _, sd := range []int{0, 4, -1} {
		if !math.IsNaN(one.LowerBound(sd)) || !math.IsNaN(one.UpperBound(sd)) {
			t.Errorf("numStdDev %d: want NaN", sd)
		}
	}
	exact := sketchOf(t, 12, 0, 100)
	if exact.LowerBound(1) != 100 || exact.UpperBound(3) != 100 {
		t.Errorf("exact mode bounds %v %v", exact.LowerBound(1), exact.UpperBound(3))
	}
}

// TestThetaCoverage: the 2-SD interval should hold the true count in about
// 95% of independent sketches.
func TestThetaCoverage(t *testing.T) {
	const trials, n = 200, 20_000
	covered := 0
	for trial := range trials {
		s := mustTheta(t, DefaultThetaLgK)
		base := int64(trial) << 32
		for i := range int64(n) {
			s.AddInt64(base + i)
		}
		c := s.Compact()
		if c.LowerBound(2) <= n && n <= c.UpperBound(2) {
			covered++
		}
	}
	if covered < trials*90/100 {
		t.Fatalf("2-SD interval covered the truth in %d of %d trials", covered, trials)
	}
	t.Logf("2-SD coverage %d/%d", covered, trials)
}
