package sketch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func mustNew(t testing.TB, log2m, regwidth int) *HLL {
	t.Helper()
	h, err := NewHLL(log2m, regwidth)
	if err != nil {
		t.Fatalf("NewHLL(%d, %d): %v", log2m, regwidth, err)
	}
	return h
}

func build(t testing.TB, log2m, regwidth int, hashes []uint64) *HLL {
	t.Helper()
	h := mustNew(t, log2m, regwidth)
	for _, x := range hashes {
		h.AddHash(x)
	}
	return h
}

func mustMarshal(t testing.TB, h *HLL) []byte {
	t.Helper()
	b, err := h.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return b
}

func mustUnmarshal(t testing.TB, b []byte) *HLL {
	t.Helper()
	var h HLL
	if err := h.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary(%x): %v", b, err)
	}
	return &h
}

func randomHashes(seed uint64, n int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	xs := make([]uint64, n)
	for i := range xs {
		xs[i] = r.Uint64()
	}
	return xs
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// hashFor returns a hash that sets register idx to val (val >= 1) for log2m.
func hashFor(log2m int, idx uint64, val int) uint64 {
	return idx | uint64(1)<<(val-1)<<log2m
}

func TestNewHLLParams(t *testing.T) {
	tests := []struct {
		log2m, regwidth int
		ok              bool
	}{
		{4, 1, true}, {4, 5, true}, {10, 4, true}, {14, 5, true}, {17, 5, true},
		{3, 5, false}, {18, 5, false}, {0, 5, false}, {-1, 5, false},
		{14, 0, false}, {14, 6, false}, {14, 8, false},
	}
	for _, tc := range tests {
		h, err := NewHLL(tc.log2m, tc.regwidth)
		if tc.ok {
			if err != nil {
				t.Errorf("NewHLL(%d, %d): %v", tc.log2m, tc.regwidth, err)
				continue
			}
			if h.Log2m() != tc.log2m || h.Regwidth() != tc.regwidth {
				t.Errorf("NewHLL(%d, %d) reports %d, %d", tc.log2m, tc.regwidth, h.Log2m(), h.Regwidth())
			}
			continue
		}
		if !errors.Is(err, ErrInvalidParams) || h != nil {
			t.Errorf("NewHLL(%d, %d) = %v, %v; want nil, ErrInvalidParams", tc.log2m, tc.regwidth, h, err)
		}
	}
}

// TestSpecVectors checks bytes derived by hand from the storage
// specification and the extension's register rule, not from this package.
func TestSpecVectors(t *testing.T) {
	tests := []struct {
		name            string
		log2m, regwidth int
		header          string // if set, start from this EMPTY sketch instead of NewHLL
		hashes          []uint64
		want            string
	}{
		{
			name: "empty 14/5", log2m: 14, regwidth: 5,
			want: "118e7f",
		},
		{
			name: "empty 10/4", log2m: 10, regwidth: 4,
			want: "116a7f",
		},
		{
			name: "empty 17/5", log2m: 17, regwidth: 5,
			want: "11917f",
		},
		{
			// The spec's example values, ascending by signed comparison:
			// 0xcba7... is negative, so it precedes 1.
			name: "explicit signed order", log2m: 14, regwidth: 5,
			hashes: []uint64{1, 0xcba79700677cdeaa, 1},
			want:   "128e7f cba79700677cdeaa 0000000000000001",
		},
		{
			name: "explicit extremes", log2m: 10, regwidth: 5,
			hashes: []uint64{0, 1 << 63, 1<<63 - 1, math.MaxUint64},
			want:   "128a7f 8000000000000000 ffffffffffffffff 0000000000000000 7fffffffffffffff",
		},
		{
			// log2m 11, regwidth 5 registers (11, 6) and (1099, 19): 16-bit
			// words 00000001011 00110 and 10001001011 10011. Explicit cutoff
			// code 0 (header 0x40: sparse on) skips the EXPLICIT stage.
			name: "sparse 16-bit words", log2m: 11, regwidth: 5, header: "118b40",
			hashes: []uint64{hashFor(11, 1099, 19), hashFor(11, 11, 6)},
			want:   "138b40 0166 8973",
		},
		{
			// log2m 11, regwidth 4: 15-bit words 00000001011 0110 and
			// 10001001011 1111 (19 capped at 15), then 2 padding bits:
			// 0000000101101101 0001001011111100.
			name: "sparse capped and padded", log2m: 11, regwidth: 4, header: "116b40",
			hashes: []uint64{hashFor(11, 11, 6), hashFor(11, 1099, 19)},
			want:   "136b40 016d 12fc",
		},
		{
			// The spec's FULL example with registers 0, 1, 2, 3 at regwidth 5,
			// here with 16 registers and sparse off (C = 0x3f): 80 bits, no
			// padding. 00000 00001 00010 00011 then zeros.
			name: "full from spec", log2m: 4, regwidth: 5, header: "11843f",
			hashes: []uint64{hashFor(4, 1, 1), hashFor(4, 2, 2), hashFor(4, 3, 3)},
			want:   "14843f 0044300000 0000000000",
		},
		{
			// Register value cap and a hash whose bits above log2m are zero
			// (value 0: no trace). Sparse off, cutoff 0, log2m 4, regwidth 3:
			// register 15 gets 1 + 40 trailing zeros, capped at 7; register
			// 9 gets nothing. 3-bit registers: 15 zeros then 111.
			name: "cap and zero shifted hash", log2m: 4, regwidth: 3, header: "114400",
			hashes: []uint64{15 | 1<<44, 9},
			want:   "144400 000000 000007",
		},
		{
			// Words narrower than a byte: log2m 4, regwidth 1 gives 5-bit
			// words (0,1) = 00001 and (5,1) = 01011, then 6 padding bits.
			// The extension writes exactly this (hll_add_agg over 16, 21).
			name: "narrow sparse words", log2m: 4, regwidth: 1,
			hashes: []uint64{16, 21},
			want:   "13047f 0ac0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h *HLL
			if tc.header != "" {
				h = mustUnmarshal(t, unhex(t, tc.header))
			} else {
				h = mustNew(t, tc.log2m, tc.regwidth)
			}
			for _, x := range tc.hashes {
				h.AddHash(x)
			}
			got := mustMarshal(t, h)
			want := unhex(t, tc.want)
			if !bytes.Equal(got, want) {
				t.Fatalf("bytes %x, want %x", got, want)
			}
			back := mustUnmarshal(t, got)
			if again := mustMarshal(t, back); !bytes.Equal(again, want) {
				t.Fatalf("re-marshalled %x, want %x", again, want)
			}
			if !sameState(h, back) {
				t.Fatalf("decoded state differs from encoded state")
			}
		})
	}
}

func sameState(a, b *HLL) bool {
	return a.log2m == b.log2m && a.regwidth == b.regwidth && a.cutoff == b.cutoff &&
		a.sparseOn == b.sparseOn && a.maxVal == b.maxVal && a.kind == b.kind &&
		slices.Equal(a.explicit, b.explicit) && slices.Equal(a.regs, b.regs)
}

func typeOf(b []byte) byte { return b[0] & 0x0f }

// TestExplicitCutoff checks the automatic threshold: the number of 8-byte
// values that fit in the FULL size, floor(ceil(m*regwidth/8)/8).
func TestExplicitCutoff(t *testing.T) {
	tests := []struct{ log2m, regwidth, limit int }{
		{10, 5, 80}, {10, 4, 64}, {12, 5, 320}, {14, 5, 1280}, {14, 4, 1024},
		{17, 5, 10240}, {17, 4, 8192}, {4, 5, 1}, {4, 1, 0}, {5, 3, 1}, {6, 1, 1},
	}
	for _, tc := range tests {
		hashes := randomHashes(uint64(tc.log2m*10+tc.regwidth), tc.limit+1)
		h := build(t, tc.log2m, tc.regwidth, hashes[:tc.limit])
		if tc.limit == 0 {
			if h.kind != kindEmpty {
				t.Errorf("%d/%d: no values added but kind %d", tc.log2m, tc.regwidth, h.kind)
			}
		} else if b := mustMarshal(t, h); typeOf(b) != typeExplicit || len(b) != 3+8*tc.limit {
			t.Errorf("%d/%d with %d values: type %d, %d bytes; want EXPLICIT", tc.log2m, tc.regwidth, tc.limit, typeOf(b), len(b))
		}
		// Duplicates never promote.
		for _, x := range hashes[:tc.limit] {
			h.AddHash(x)
		}
		if tc.limit > 0 && h.kind != kindExplicit {
			t.Errorf("%d/%d: re-adding values promoted the sketch", tc.log2m, tc.regwidth)
		}
		h.AddHash(hashes[tc.limit])
		if b := mustMarshal(t, h); typeOf(b) != typeSparse && typeOf(b) != typeFull {
			t.Errorf("%d/%d with %d values: type %d, want SPARSE or FULL", tc.log2m, tc.regwidth, tc.limit+1, typeOf(b))
		}
	}
}

// TestSparseToFull checks that SPARSE is used while its data bits are
// strictly fewer than FULL's: at log2m 10, regwidth 5, 341 filled registers
// take 5115 bits (< 5120), 342 take 5130.
func TestSparseToFull(t *testing.T) {
	h := mustNew(t, 10, 5)
	for i := range 341 {
		h.AddHash(hashFor(10, uint64(i), 1+i%31))
	}
	b := mustMarshal(t, h)
	if typeOf(b) != typeSparse || len(b) != 3+640 {
		t.Fatalf("341 filled registers: type %d, %d bytes; want SPARSE, 643", typeOf(b), len(b))
	}
	if got := b[len(b)-1] & 0x1f; got != 0 {
		t.Fatalf("padding bits %05b, want 0", got)
	}
	h.AddHash(hashFor(10, 1000, 2))
	b = mustMarshal(t, h)
	if typeOf(b) != typeFull || len(b) != 3+640 {
		t.Fatalf("342 filled registers: type %d, %d bytes; want FULL, 643", typeOf(b), len(b))
	}
	// Equal sizes choose FULL: log2m 4, regwidth 4 with 8 filled registers
	// needs 64 bits either way; cutoff 0 (C = 0x40) skips EXPLICIT.
	eq := mustUnmarshal(t, unhex(t, "116440"))
	for i := range 7 {
		eq.AddHash(hashFor(4, uint64(2*i), 1))
	}
	if b := mustMarshal(t, eq); typeOf(b) != typeSparse || len(b) != 3+7 {
		t.Fatalf("7 of 16 registers: %x, want SPARSE of 7 data bytes", b)
	}
	eq.AddHash(hashFor(4, 15, 3))
	if b, want := mustMarshal(t, eq), unhex(t, "146440 10 10 10 10 10 10 10 03"); !bytes.Equal(b, want) {
		t.Fatalf("8 of 16 registers: %x, want %x", b, want)
	}
	// Sparse disabled: always FULL.
	off := mustUnmarshal(t, unhex(t, "118a3f")) // log2m 10, regwidth 5, sparse off
	for i := range 100 {
		off.AddHash(hashFor(10, uint64(i), 1))
	}
	if b := mustMarshal(t, off); typeOf(b) != typeFull {
		t.Fatalf("sparse off: type %d, want FULL", typeOf(b))
	}
}

// TestRoundTrip encodes sketches of every parameter combination and size
// class, decodes them and checks state and bytes.
func TestRoundTrip(t *testing.T) {
	for log2m := minLog2m; log2m <= maxLog2m; log2m++ {
		for regwidth := minRegwidth; regwidth <= maxRegwidth; regwidth++ {
			m := 1 << log2m
			for _, n := range []int{0, 1, 5, m / 8, m / 2, 2 * m, 8 * m} {
				h := build(t, log2m, regwidth, randomHashes(uint64(n*1000+log2m*10+regwidth), n))
				b := mustMarshal(t, h)
				back := mustUnmarshal(t, b)
				if !sameState(h, back) {
					t.Fatalf("%d/%d n=%d: state differs after round trip", log2m, regwidth, n)
				}
				if again := mustMarshal(t, back); !bytes.Equal(again, b) {
					t.Fatalf("%d/%d n=%d: bytes differ after round trip", log2m, regwidth, n)
				}
				// AppendBinary appends after existing content.
				prefix := []byte("prefix")
				app, err := h.AppendBinary(prefix)
				if err != nil || !bytes.Equal(app[:6], []byte("prefix")) || !bytes.Equal(app[6:], b) {
					t.Fatalf("%d/%d n=%d: AppendBinary = %x, %v", log2m, regwidth, n, app, err)
				}
			}
		}
	}
}

func TestFullPackingAllWidths(t *testing.T) {
	// Every register gets a distinct pattern; compare with a bit-by-bit
	// reference packer.
	for regwidth := minRegwidth; regwidth <= maxRegwidth; regwidth++ {
		for _, log2m := range []int{4, 5, 10} {
			m := 1 << log2m
			regs := make([]uint8, m)
			for i := range regs {
				regs[i] = uint8((i*7 + 3) % (1 << regwidth))
			}
			out := make([]byte, m*regwidth/8)
			packFull(out, regs, uint(regwidth))
			want := make([]byte, len(out))
			bit := 0
			for _, v := range regs {
				for k := regwidth - 1; k >= 0; k-- {
					if v>>k&1 != 0 {
						want[bit/8] |= 0x80 >> (bit % 8)
					}
					bit++
				}
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("regwidth %d log2m %d: packed %x, want %x", regwidth, log2m, out, want)
			}
			back := make([]uint8, m)
			unpackFull(back, out, uint(regwidth))
			if !slices.Equal(back, regs) {
				t.Fatalf("regwidth %d log2m %d: unpacked registers differ", regwidth, log2m)
			}
		}
	}
}

func TestRegisterRule(t *testing.T) {
	tests := []struct {
		x        uint64
		log2m    uint8
		regwidth uint8
		idx      uint64
		val      uint8
	}{
		{0, 14, 5, 0, 0},
		{1, 14, 5, 1, 0},         // nothing above the index bits
		{1 << 14, 14, 5, 0, 1},   // lowest value bit set
		{5 | 1<<20, 14, 5, 5, 7}, // 6 trailing zeros
		{1 << 63, 14, 5, 0, 31},  // 49 trailing zeros, capped at 31
		{1 << 63, 14, 4, 0, 15},  // capped at 15
		{0x3fff | 1<<(14+29), 14, 5, 0x3fff, 30},
		{0x3fff | 1<<(14+30), 14, 5, 0x3fff, 31},
		{math.MaxUint64, 17, 5, 1<<17 - 1, 1},
	}
	for _, tc := range tests {
		idx, val := registerValue(tc.x, tc.log2m, uint8(1)<<tc.regwidth-1)
		if idx != tc.idx || val != tc.val {
			t.Errorf("registerValue(%#x, %d, w%d) = %d, %d; want %d, %d", tc.x, tc.log2m, tc.regwidth, idx, val, tc.idx, tc.val)
		}
		// The fast path in AddHash must agree.
		h := mustUnmarshal(t, []byte{0x11, (tc.regwidth-1)<<5 | tc.log2m, 0x00}) // cutoff 0: registers at once
		h.AddHash(tc.x)
		if h.regs[tc.idx] != tc.val {
			t.Errorf("AddHash(%#x): register %d = %d, want %d", tc.x, tc.idx, h.regs[tc.idx], tc.val)
		}
		h.AddHash(tc.x)
		if h.regs[tc.idx] != tc.val {
			t.Errorf("AddHash(%#x) twice: register %d = %d, want %d", tc.x, tc.idx, h.regs[tc.idx], tc.val)
		}
	}
}

func TestAddHashesWithXXHash(t *testing.T) {
	h := mustNew(t, 14, 5)
	h.AddString("")
	h.Add([]byte("42"))
	h.AddString("2024-01-02 03:04:05+00")
	want := []uint64{0xef46db3751d8e999, xxhash.Sum64String("42"), xxhash.Sum64([]byte("2024-01-02 03:04:05+00"))}
	slices.SortFunc(want, cmpSigned)
	if !slices.Equal(h.explicit, want) {
		t.Fatalf("explicit values %x, want %x", h.explicit, want)
	}
	if got := h.Estimate(); got != 3 {
		t.Fatalf("Estimate = %v, want 3", got)
	}
}

func TestEstimateExact(t *testing.T) {
	h := mustNew(t, 14, 5)
	if h.Estimate() != 0 || h.StdError() != 0 {
		t.Fatalf("empty: Estimate %v StdError %v, want 0, 0", h.Estimate(), h.StdError())
	}
	hashes := randomHashes(7, 1280)
	for i, x := range hashes {
		h.AddHash(x)
		if got := h.Estimate(); got != float64(i+1) {
			t.Fatalf("after %d distinct values Estimate = %v", i+1, got)
		}
		if h.StdError() != 0 {
			t.Fatalf("explicit StdError = %v, want 0", h.StdError())
		}
	}
	h.AddHash(12345)
	if got, want := h.StdError(), 1.04/128; got != want {
		t.Fatalf("StdError = %v, want %v", got, want)
	}
	u := mustUnmarshal(t, unhex(t, "108e7f"))
	if !math.IsNaN(u.Estimate()) || !math.IsNaN(u.StdError()) {
		t.Fatalf("undefined: Estimate %v StdError %v, want NaN", u.Estimate(), u.StdError())
	}
}

// TestErtlClosedForms checks the estimator on register histograms whose
// result can be worked out by hand.
func TestErtlClosedForms(t *testing.T) {
	m := 1 << 10
	// All registers zero: σ(1) = ∞, estimate 0.
	if got := ertlEstimate(hist(32, map[int]int{0: m}), m); got != 0 {
		t.Errorf("all zero: %v, want 0", got)
	}
	// All registers 1 (q = 30): τ(1) = 0, z = m/2 after the loop, σ(0) = 0,
	// estimate α∞ m² / (m/2) = m / ln 2.
	if got, want := ertlEstimate(hist(32, map[int]int{1: m}), m), float64(m)/math.Ln2; math.Abs(got-want) > 1e-9*want {
		t.Errorf("all one: %v, want %v", got, want)
	}
	// All registers saturated: τ(0) = 0 and no other terms: +Inf.
	if got := ertlEstimate(hist(32, map[int]int{31: m}), m); !math.IsInf(got, 1) {
		t.Errorf("all saturated: %v, want +Inf", got)
	}
	// Half the registers zero, half one: z = m/4 + m σ(1/2), with
	// σ(1/2) = 1/2 + Σ_{k≥1} 2^(-2^k) 2^(k-1).
	s := 0.5
	for k := 1; k < 7; k++ {
		s += math.Pow(0.5, math.Pow(2, float64(k))) * math.Pow(2, float64(k-1))
	}
	z := float64(m)/4 + float64(m)*s
	if got, want := ertlEstimate(hist(32, map[int]int{0: m / 2, 1: m / 2}), m), alphaInf*float64(m)*float64(m)/z; math.Abs(got-want) > 1e-9*want {
		t.Errorf("half zero half one: %v, want %v", got, want)
	}
	// τ against its definition for x in (0,1).
	for _, x := range []float64{0.1, 0.5, 0.9} {
		sum := 0.0
		for k := 1; k < 60; k++ {
			d := 1 - math.Pow(x, math.Pow(2, -float64(k)))
			sum += d * d * math.Pow(2, -float64(k))
		}
		want := (1 - x - sum) / 3
		if got := ertlTau(x); math.Abs(got-want) > 1e-12 {
			t.Errorf("τ(%v) = %v, want %v", x, got, want)
		}
	}
}

func hist(size int, counts map[int]int) []uint32 {
	h := make([]uint32, size)
	for k, c := range counts {
		h[k] = uint32(c)
	}
	return h
}

func TestHistogramMatchesNaive(t *testing.T) {
	h := build(t, 10, 5, randomHashes(3, 5000))
	var got [32]uint32
	histogram(h.regs, &got)
	var want [32]uint32
	for _, r := range h.regs {
		want[r]++
	}
	if got != want {
		t.Fatalf("histogram %v, want %v", got, want)
	}
}

// TestEstimateAccuracySmoke checks a few cardinalities lie within 4 standard
// errors; the full study is scripts/accuracy.
func TestEstimateAccuracySmoke(t *testing.T) {
	for _, tc := range []struct{ log2m, n int }{{10, 100}, {10, 5000}, {12, 100000}, {14, 2000}, {14, 300000}} {
		h := build(t, tc.log2m, 5, randomHashes(uint64(tc.n), tc.n))
		rel := h.Estimate()/float64(tc.n) - 1
		if math.Abs(rel) > 4*h.StdError() {
			t.Errorf("log2m %d n %d: relative error %.4f beyond 4 standard errors (%.4f)", tc.log2m, tc.n, rel, h.StdError())
		}
	}
}

func TestUnion(t *testing.T) {
	a := randomHashes(11, 3000)
	tests := []struct {
		name     string
		x, y     []uint64
		wantType byte
	}{
		{"empty with empty", nil, nil, typeEmpty},
		{"empty with explicit", nil, a[:10], typeExplicit},
		{"explicit with empty", a[:10], nil, typeExplicit},
		{"explicit with explicit, fits", a[:40], a[30:80], typeExplicit},
		{"explicit with explicit, overflows", a[:50], a[40:81], typeSparse},
		{"explicit with itself at the limit", a[:80], a[:80], typeExplicit},
		{"explicit with sparse", a[:5], a[100:300], typeSparse},
		{"sparse with explicit", a[100:300], a[:5], typeSparse},
		{"explicit with full", a[:60], a[500:3000], typeFull},
		{"full with explicit", a[500:3000], a[:60], typeFull},
		{"sparse with sparse into full", a[100:300], a[300:600], typeFull},
		{"full with full", a[:2000], a[1000:3000], typeFull},
		{"empty with full", nil, a[:2000], typeFull},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := build(t, 10, 5, tc.x)
			y := build(t, 10, 5, tc.y)
			yBefore := mustMarshal(t, y)
			if err := x.Union(y); err != nil {
				t.Fatal(err)
			}
			got := mustMarshal(t, x)
			if typeOf(got) != tc.wantType {
				t.Errorf("type %d, want %d", typeOf(got), tc.wantType)
			}
			// The union equals the sketch of the combined values.
			want := mustMarshal(t, build(t, 10, 5, append(slices.Clone(tc.x), tc.y...)))
			if !bytes.Equal(got, want) {
				t.Errorf("union bytes differ from the sketch of the combined values")
			}
			if after := mustMarshal(t, y); !bytes.Equal(after, yBefore) {
				t.Errorf("union modified its argument")
			}
			// Union is not sensitive to operand order.
			y2 := build(t, 10, 5, tc.y)
			if err := y2.Union(build(t, 10, 5, tc.x)); err != nil {
				t.Fatal(err)
			}
			if rev := mustMarshal(t, y2); !bytes.Equal(rev, got) {
				t.Errorf("y∪x differs from x∪y")
			}
		})
	}
}

func TestUnionSelf(t *testing.T) {
	for _, n := range []int{0, 10, 200, 5000} {
		h := build(t, 10, 5, randomHashes(uint64(n), n))
		before := mustMarshal(t, h)
		if err := h.Union(h); err != nil {
			t.Fatal(err)
		}
		if got := mustMarshal(t, h); !bytes.Equal(got, before) {
			t.Errorf("n=%d: h∪h changed h", n)
		}
	}
}

func TestUnionUndefined(t *testing.T) {
	undef := mustUnmarshal(t, unhex(t, "108a7f"))
	for _, n := range []int{0, 10, 5000} {
		h := build(t, 10, 5, randomHashes(1, n))
		if err := h.Union(undef); err != nil {
			t.Fatal(err)
		}
		if got := mustMarshal(t, h); !bytes.Equal(got, unhex(t, "108a7f")) {
			t.Errorf("n=%d ∪ undefined = %x, want 108a7f", n, got)
		}
		u := undef.Clone()
		if err := u.Union(build(t, 10, 5, randomHashes(1, n))); err != nil {
			t.Fatal(err)
		}
		if got := mustMarshal(t, u); !bytes.Equal(got, unhex(t, "108a7f")) {
			t.Errorf("undefined ∪ n=%d = %x, want 108a7f", n, got)
		}
		u.AddHash(42)
		if got := mustMarshal(t, u); !bytes.Equal(got, unhex(t, "108a7f")) {
			t.Errorf("adding to undefined gave %x", got)
		}
	}
}

func TestUnionIncompatible(t *testing.T) {
	base := "118a7f" // log2m 10, regwidth 5, auto, sparse on
	for _, other := range []string{
		"118b7f", // log2m 11
		"116a7f", // regwidth 4
		"118a3f", // sparse off
		"118a48", // explicit cutoff 2^7
	} {
		for _, n := range []int{0, 10, 5000} {
			h := build(t, 10, 5, randomHashes(2, n))
			before := mustMarshal(t, h)
			o := mustUnmarshal(t, unhex(t, other))
			if err := h.Union(o); !errors.Is(err, ErrIncompatible) {
				t.Errorf("%s ∪ %s: error %v, want ErrIncompatible", base, other, err)
			}
			if after := mustMarshal(t, h); !bytes.Equal(after, before) {
				t.Errorf("failed union changed the receiver")
			}
		}
	}
}

func TestUnionKeepsOversizedExplicit(t *testing.T) {
	// An EXPLICIT sketch above the automatic cutoff is accepted as is (the
	// extension accepts it); a union that adds nothing keeps it EXPLICIT, a
	// union that adds a value promotes it, as in the extension.
	vals := randomHashes(5, 100)
	slices.SortFunc(vals, cmpSigned)
	b := unhex(t, "128a7f")
	for _, x := range vals {
		b = append(b, byte(x>>56), byte(x>>48), byte(x>>40), byte(x>>32), byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	h := mustUnmarshal(t, b)
	if err := h.Union(build(t, 10, 5, vals[:10])); err != nil {
		t.Fatal(err)
	}
	if got := mustMarshal(t, h); !bytes.Equal(got, b) {
		t.Fatalf("union adding nothing changed the oversized EXPLICIT sketch")
	}
	if err := h.Union(build(t, 10, 5, []uint64{42})); err != nil {
		t.Fatal(err)
	}
	if h.kind != kindDense {
		t.Fatalf("union adding a value kept an oversized EXPLICIT sketch")
	}
	h2 := mustUnmarshal(t, b)
	h2.AddHash(vals[3])
	if h2.kind != kindExplicit {
		t.Fatalf("re-adding a present value promoted the sketch")
	}
	h2.AddHash(42)
	if h2.kind != kindDense {
		t.Fatalf("adding a value kept an oversized EXPLICIT sketch")
	}
}

func TestFold(t *testing.T) {
	for _, n := range []int{0, 1, 50, 300, 2000, 100000} {
		hashes := randomHashes(uint64(n)+77, n)
		for _, regwidth := range []int{3, 4, 5} {
			h := build(t, 14, regwidth, hashes)
			for _, to := range []int{14, 13, 10, 4} {
				f, err := h.Fold(to)
				if err != nil {
					t.Fatal(err)
				}
				want := mustMarshal(t, build(t, to, regwidth, hashes))
				if got := mustMarshal(t, f); !bytes.Equal(got, want) {
					t.Fatalf("n=%d w=%d fold 14→%d differs from building at %d", n, regwidth, to, to)
				}
			}
		}
	}
	h := mustNew(t, 12, 5)
	for _, to := range []int{13, 3, 0} {
		if _, err := h.Fold(to); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("Fold(%d) of log2m 12: error %v, want ErrInvalidParams", to, err)
		}
	}
	u := mustUnmarshal(t, unhex(t, "108e7f"))
	f, err := u.Fold(10)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustMarshal(t, f); !bytes.Equal(got, unhex(t, "108a7f")) {
		t.Errorf("fold of undefined = %x, want 108a7f", got)
	}
}

func TestClone(t *testing.T) {
	for _, n := range []int{0, 10, 5000} {
		h := build(t, 10, 5, randomHashes(9, n))
		c := h.Clone()
		before := mustMarshal(t, h)
		for _, x := range randomHashes(10, 3000) {
			c.AddHash(x)
		}
		if after := mustMarshal(t, h); !bytes.Equal(after, before) {
			t.Errorf("n=%d: changing a clone changed the original", n)
		}
	}
}

func TestZeroValue(t *testing.T) {
	var h HLL
	if _, err := h.MarshalBinary(); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("MarshalBinary of zero HLL: %v, want ErrInvalidParams", err)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("AddHash on a zero HLL did not panic")
		}
	}()
	h.AddHash(1)
}

func TestNoAllocs(t *testing.T) {
	x := denseSketch(t, 14, 100000, 1)
	y := denseSketch(t, 14, 100000, 2)
	if n := testing.AllocsPerRun(100, func() { x.AddHash(0x123456789) }); n != 0 {
		t.Errorf("AddHash allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = x.Union(y) }); n != 0 {
		t.Errorf("Union allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = x.Estimate() }); n != 0 {
		t.Errorf("Estimate allocates %v times", n)
	}
}
