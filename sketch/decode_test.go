package sketch

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

var sentinels = []error{ErrTruncated, ErrVersion, ErrType, ErrCorrupt, ErrInvalidParams}

// receivers returns valid sketches in each in-memory state, used as decode
// targets that must survive a failed UnmarshalBinary unchanged.
func receivers(t testing.TB) map[string]*HLL {
	t.Helper()
	undef := &HLL{}
	if err := undef.UnmarshalBinary([]byte{0x10, 0x8e, 0x7f}); err != nil {
		t.Fatal(err)
	}
	return map[string]*HLL{
		"zero":      {},
		"empty":     mustNew(t, 14, 5),
		"explicit":  build(t, 14, 5, randomHashes(1, 100)),
		"sparse":    build(t, 14, 5, randomHashes(2, 2000)),
		"full":      build(t, 14, 5, randomHashes(3, 100000)),
		"full 17/4": build(t, 17, 4, randomHashes(4, 300000)),
		"undefined": undef,
	}
}

func repeatHex(unit string, n int) string { return strings.Repeat(unit, n) }

func TestUnmarshalMalformed(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		want error
	}{
		{"nil", "", ErrTruncated},
		{"one byte", "11", ErrTruncated},
		{"two bytes", "118e", ErrTruncated},
		{"version 0", "018e7f", ErrVersion},
		{"version 2", "218e7f", ErrVersion},
		{"version 15 full", "f48e7f", ErrVersion},
		{"type 5", "158e7f", ErrType},
		{"type 15", "1f8e7f", ErrType},
		{"cutoff byte top bit", "118eff", ErrCorrupt},
		{"log2m 0", "11807f", ErrInvalidParams},
		{"log2m 3", "11837f", ErrInvalidParams},
		{"log2m 18", "11927f", ErrInvalidParams},
		{"log2m 31", "119f7f", ErrInvalidParams},
		{"regwidth 6", "11ae7f", ErrInvalidParams},
		{"regwidth 8", "11ee7f", ErrInvalidParams},
		{"regwidth 6 full", "14ae7f" + repeatHex("00", 12288), ErrInvalidParams},
		{"empty with cutoff 2^14", "118e4f", ErrInvalidParams},
		{"explicit with cutoff 2^61", "128e7e0000000000000001", ErrInvalidParams},
		{"empty with trailing byte", "118e7f00", ErrCorrupt},
		{"undefined with trailing byte", "108e7f00", ErrCorrupt},
		{"explicit partial value", "128e7f00000001", ErrTruncated},
		{"explicit 9 bytes", "128e7f000000000000000100", ErrTruncated},
		{"explicit duplicate", "128e7f" + "0000000000000001" + "0000000000000001", ErrCorrupt},
		{"explicit descending", "128e7f" + "0000000000000002" + "0000000000000001", ErrCorrupt},
		{"explicit unsigned order", "128e7f" + "0000000000000001" + "ffffffffffffffff", ErrCorrupt},
		{"explicit too many values", "128e7f" + explicitRun(maxExplicit+1), ErrCorrupt},
		{"sparse descending index", "138b40" + "8973" + "0166", ErrCorrupt},
		{"sparse duplicate index", "138b40" + "0166" + "0166", ErrCorrupt},
		{"sparse zero value", "138b40" + "0160", ErrCorrupt},
		{"sparse non-zero padding", "136b40" + "016d12fd", ErrCorrupt},
		{"sparse whole padding byte", "136b40" + "016d12fc00", ErrCorrupt},
		{"sparse narrow word zero value", "13047f" + "0ac4", ErrCorrupt},
		{"sparse more words than registers", "13047f" + repeatHex("ff", 20), ErrCorrupt},
		{"full short", "148e7f" + repeatHex("00", 10239), ErrTruncated},
		{"full empty data", "148e7f", ErrTruncated},
		{"full long", "148e7f" + repeatHex("00", 10241), ErrCorrupt},
		{"full 4/4 short", "146440" + repeatHex("11", 7), ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := unhex(t, tc.hex)
			for rname, h := range receivers(t) {
				before := h.Clone()
				err := h.UnmarshalBinary(in)
				if err == nil {
					t.Fatalf("receiver %s: no error", rname)
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("receiver %s: error %v, want %v", rname, err, tc.want)
				}
				if !strings.HasPrefix(err.Error(), "sketch: unmarshal: ") {
					t.Fatalf("error %q lacks context prefix", err)
				}
				if !sameState(h, before) {
					t.Fatalf("receiver %s changed by failed UnmarshalBinary", rname)
				}
			}
		})
	}
}

func explicitRun(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("00000000")
		b.WriteString(strings.ToLower(hex8(uint32(i))))
	}
	return b.String()
}

func hex8(v uint32) string {
	const digits = "0123456789abcdef"
	var out [8]byte
	for i := 7; i >= 0; i-- {
		out[i] = digits[v&15]
		v >>= 4
	}
	return string(out[:])
}

// TestUnmarshalAccepts lists unusual but valid inputs the extension can
// produce or accept.
func TestUnmarshalAccepts(t *testing.T) {
	tests := []struct {
		name, hex string
		estimate  float64
	}{
		{"undefined", "108e7f", math.NaN()},
		{"explicit with no values", "128e7f", 0},
		{"explicit at the value limit", "128e7f" + explicitRun(maxExplicit), maxExplicit},
		{"sparse with no words", "138e7f", 0},
		{"sparse with sparse flag off", "138b00" + "0166", -1},
		{"full with cutoff code 40", "148428" + repeatHex("00", 10), 0},
		{"full with fixed cutoff", "148e0b" + repeatHex("00", 10240), 0},
		{"empty with cutoff 2^13", "118e4e", 0},
		{"log2m 4 regwidth 1", "11047f", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := unhex(t, tc.hex)
			h := mustUnmarshal(t, in)
			got := h.Estimate()
			switch {
			case math.IsNaN(tc.estimate):
				if !math.IsNaN(got) {
					t.Errorf("Estimate = %v, want NaN", got)
				}
			case tc.estimate >= 0 && got != tc.estimate:
				t.Errorf("Estimate = %v, want %v", got, tc.estimate)
			}
			out := mustMarshal(t, h)
			if tc.name == "sparse with sparse flag off" {
				// Not canonical: the extension would write FULL.
				if typeOf(out) != typeFull {
					t.Errorf("re-encoded as type %d, want FULL", typeOf(out))
				}
				return
			}
			if !bytes.Equal(out, in) {
				t.Errorf("re-encoded %x, want the input", out)
			}
		})
	}
}

// TestNarrowSparsePadding decodes the extension's own bytes for log2m 4,
// regwidth 1 and registers 0 and 5: the zero word hiding in the padding
// must not clear register 0.
func TestNarrowSparsePadding(t *testing.T) {
	h := mustUnmarshal(t, unhex(t, "13047f0ac0"))
	if h.regs[0] != 1 || h.regs[5] != 1 || countNonZero(h.regs) != 2 {
		t.Fatalf("registers %v, want 0 and 5 set", h.regs)
	}
}

func FuzzUnmarshalBinary(f *testing.F) {
	for _, s := range []string{
		"118e7f", "108e7f", "128e7f", "128a7fcba79700677cdeaa0000000000000001",
		"138b400166", "138b4001668973", "136b40016d12fc", "13047f0ac0",
		"14843f00443000000000000000", "144400000000000007", "146440" + repeatHex("10", 7) + "03",
		"13047f", "118e4e", "11047f",
	} {
		f.Add(unhex(f, s))
	}
	for _, n := range []int{1, 100, 300, 3000} {
		b, err := build(f, 10, 5, randomHashes(uint64(n), n)).MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h := build(t, 10, 5, randomHashes(99, 200))
		before := h.Clone()
		if err := h.UnmarshalBinary(in); err != nil {
			wrapped := false
			for _, s := range sentinels {
				if errors.Is(err, s) {
					wrapped = true
				}
			}
			if !wrapped {
				t.Fatalf("error %v wraps no exported sentinel", err)
			}
			if !sameState(h, before) {
				t.Fatalf("failed UnmarshalBinary changed the receiver")
			}
			return
		}
		enc, err := h.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded sketch does not marshal: %v", err)
		}
		var back HLL
		if err := back.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", enc, err)
		}
		if !sameState(h, &back) {
			t.Fatalf("re-encoded sketch decodes to another state")
		}
		if again, _ := back.MarshalBinary(); !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not stable: %x then %x", enc, again)
		}
		// Decoding is strict, so an input of the type we would write is
		// exactly what we would write.
		if typeOf(enc) == typeOf(in) && !bytes.Equal(enc, in) {
			t.Fatalf("accepted %x but would write %x", in, enc)
		}
		est := h.Estimate()
		if est < 0 || (h.kind != kindUndefined && math.IsNaN(est)) {
			t.Fatalf("Estimate = %v", est)
		}
		u := h.Clone()
		if err := u.Union(h); err != nil {
			t.Fatalf("union with itself: %v", err)
		}
		if ue := u.Estimate(); ue != est && !(math.IsNaN(ue) && math.IsNaN(est)) {
			t.Fatalf("h∪h estimate %v, h estimate %v", ue, est)
		}
		other := &HLL{}
		if err := other.UnmarshalBinary([]byte{0x11, in[1], in[2]}); err == nil {
			for _, x := range randomHashes(5, 50) {
				other.AddHash(x)
			}
			if err := other.Union(h); err != nil {
				t.Fatalf("union with a sketch of the same header: %v", err)
			}
			_ = other.Estimate()
		}
		if _, err := h.Fold(minLog2m); err != nil {
			t.Fatalf("Fold(%d): %v", minLog2m, err)
		}
		for _, x := range randomHashes(6, 20) {
			h.AddHash(x)
		}
		if _, err := h.MarshalBinary(); err != nil {
			t.Fatalf("marshal after adds: %v", err)
		}
	})
}
