package sketch

import (
	"bytes"
	"testing"
)

// unionRef is what UnionFull must match: b decoded into another sketch and
// united into a copy of h.
func unionRef(h *HLL, b []byte) (*HLL, error) {
	var s HLL
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	u := h.Clone()
	if err := u.Union(&s); err != nil {
		return nil, err
	}
	return u, nil
}

// checkUnionFull runs UnionFull(b) on a copy of h and checks it against
// unionRef: the same state where it merges, h unchanged where it does not,
// and a merge wherever b is a FULL sketch Union takes into an EMPTY or
// register h of regwidth 5.
func checkUnionFull(t *testing.T, h *HLL, b []byte) bool {
	t.Helper()
	got := h.Clone()
	merged := got.UnionFull(b)
	want, err := unionRef(h, b)
	if !merged {
		if !sameState(got, h) {
			t.Fatalf("UnionFull(%x…) returned false but changed the sketch", b[:min(len(b), 3)])
		}
		if err == nil && len(b) > 0 && typeOf(b) == typeFull && h.regwidth == 5 && (h.kind == kindEmpty || h.kind == kindDense) {
			t.Fatalf("UnionFull(%x…) refused a FULL sketch Union takes into a %v sketch", b[:3], h.kind)
		}
		return false
	}
	if err != nil {
		t.Fatalf("UnionFull(%x…) merged what Union refuses: %v", b[:min(len(b), 3)], err)
	}
	if !sameState(got, want) {
		t.Fatalf("UnionFull(%x…) gave another state than UnmarshalBinary and Union", b[:3])
	}
	return true
}

func TestUnionFull(t *testing.T) {
	full := mustMarshal(t, denseSketch(t, 11, 50_000, 7))
	if typeOf(full) != typeFull {
		t.Fatalf("not FULL: %x", full[:3])
	}
	full14 := mustMarshal(t, denseSketch(t, 14, 200_000, 8))
	header := func(b []byte, i int, v byte) []byte {
		c := bytes.Clone(b)
		c[i] = v
		return c
	}
	targets := map[string]*HLL{
		"empty":         mustNew(t, 11, 5),
		"dense":         denseSketch(t, 11, 30_000, 9),
		"explicit":      build(t, 11, 5, randomHashes(3, 5)),
		"sparse values": build(t, 11, 5, randomHashes(4, 40)),
		"undefined":     mustUnmarshal(t, unhex(t, "108b7f")),
		"regwidth 4":    mustNew(t, 11, 4),
		"log2m 14":      mustNew(t, 14, 5),
	}
	inputs := map[string][]byte{
		"full":            full,
		"full log2m 14":   full14,
		"sparse":          mustMarshal(t, build(t, 11, 5, randomHashes(5, 40))),
		"explicit":        mustMarshal(t, build(t, 11, 5, randomHashes(6, 3))),
		"empty":           mustMarshal(t, mustNew(t, 11, 5)),
		"truncated":       full[:len(full)-1],
		"trailing byte":   append(bytes.Clone(full), 0),
		"header only":     full[:3],
		"version 2":       header(full, 0, 0x24),
		"sparse flag off": header(full, 2, full[2]&^0x40),
		"cutoff 5":        header(full, 2, full[2]&0x40|5),
		"top bit of C":    header(full, 2, full[2]|0x80),
		"regwidth 4":      header(full, 1, 3<<5|11),
	}
	for tn, h := range targets {
		for in, b := range inputs {
			t.Run(tn+"/"+in, func(t *testing.T) {
				merged := checkUnionFull(t, h, b)
				wantMerged := (tn == "empty" || tn == "dense") && in == "full"
				if tn == "log2m 14" && in == "full log2m 14" {
					wantMerged = true
				}
				if merged != wantMerged {
					t.Fatalf("merged %t, want %t", merged, wantMerged)
				}
			})
		}
	}
	// Merged in turn into one sketch, as a fetch's rows are.
	u := mustNew(t, 14, 5)
	ref := mustNew(t, 14, 5)
	for seed := range uint64(5) {
		s := denseSketch(t, 14, 100_000, 20+seed)
		if !u.UnionFull(mustMarshal(t, s)) {
			t.Fatalf("sketch %d not merged", seed)
		}
		if err := ref.Union(s); err != nil {
			t.Fatal(err)
		}
	}
	if !sameState(u, ref) {
		t.Fatalf("five FULL sketches merged in turn differ from their Union")
	}
}

func FuzzUnionFull(f *testing.F) {
	full := mustMarshal(f, denseSketch(f, 8, 5_000, 1))
	f.Add(full, uint8(0))
	f.Add(full, uint8(1))
	f.Add(full[:10], uint8(1))
	f.Add(mustMarshal(f, build(f, 8, 5, randomHashes(2, 20))), uint8(1))
	f.Fuzz(func(t *testing.T, in []byte, target uint8) {
		var h *HLL
		switch target % 4 {
		case 0:
			h = mustNew(t, 8, 5)
		case 1:
			h = denseSketch(t, 8, 3_000, 2)
		case 2:
			h = build(t, 8, 5, randomHashes(3, 4))
		default:
			h = mustNew(t, 8, 4)
		}
		checkUnionFull(t, h, in)
	})
}

func BenchmarkMergeFull14(b *testing.B) {
	var sketches [][]byte
	for seed := range uint64(3) {
		sketches = append(sketches, mustMarshal(b, denseSketch(b, 14, 1_000_000, 40+seed)))
	}
	b.Run("decode and union", func(b *testing.B) {
		b.ReportAllocs()
		var s HLL
		for b.Loop() {
			h, _ := NewHLL(14, 5)
			for _, e := range sketches {
				if err := s.UnmarshalBinary(e); err != nil {
					b.Fatal(err)
				}
				if err := h.Union(&s); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("UnionFull", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h, _ := NewHLL(14, 5)
			for _, e := range sketches {
				if !h.UnionFull(e) {
					b.Fatal("not merged")
				}
			}
		}
	})
}
