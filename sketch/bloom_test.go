package sketch

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"testing"
)

func mustBloom(t testing.TB, n uint64, p float64) *Bloom {
	t.Helper()
	b, err := NewBloom(n, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func bloomItem(prefix string, i int) []byte {
	return strconv.AppendInt([]byte(prefix), int64(i), 10)
}

func TestBloomShape(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		p    float64
		m    uint64
		k    int
		bits float64 // per item, about
	}{
		{1_000_000, 0.01, 9_585_088, 7, 9.59},
		{1_000_000, 0.001, 14_377_600, 10, 14.38},
		{2_000_000, 0.01, 19_170_176, 7, 9.59},
		{1, 0.5, 64, 32, 64}, // a word at least; k capped
		{100, 0.1, 512, 4, 5.12},
	} {
		b := mustBloom(t, c.n, c.p)
		if b.Bits() != c.m || b.Hashes() != c.k {
			t.Errorf("NewBloom(%d, %v): %d bits, %d hashes; want %d, %d", c.n, c.p, b.Bits(), b.Hashes(), c.m, c.k)
		}
		if got := float64(b.Bits()) / float64(c.n); math.Abs(got-c.bits) > 0.01 {
			t.Errorf("NewBloom(%d, %v): %.2f bits an item, want %.2f", c.n, c.p, got, c.bits)
		}
	}
	for _, c := range []struct {
		n uint64
		p float64
	}{{0, 0.01}, {10, 0}, {10, 1}, {10, math.NaN()}, {1 << 40, 0.01}} {
		if _, err := NewBloom(c.n, c.p); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("NewBloom(%d, %v): %v, want ErrInvalidParams", c.n, c.p, err)
		}
	}
}

// TestBloomFalsePositives: no added item is ever missed; the share of
// items never added that are reported matches (1 − e^(−kn/m))^k at the
// design fill, at half of it and past it (twice and four times), within
// 5 binomial standard errors over 200 000 probes.
func TestBloomFalsePositives(t *testing.T) {
	const design, probes = 100_000, 200_000
	for _, p := range []float64{0.01, 0.001} {
		b := mustBloom(t, design, p)
		added := 0
		for _, fill := range []int{design / 2, design, 2 * design, 4 * design} {
			for ; added < fill; added++ {
				b.Add(bloomItem("u", added))
			}
			for i := 0; i < added; i += 97 {
				if !b.Contains(bloomItem("u", i)) {
					t.Fatalf("p %v, %d items: item %d, added, is not contained", p, added, i)
				}
			}
			hits := 0
			for i := range probes {
				if b.Contains(bloomItem("never-", i)) {
					hits++
				}
			}
			got, want := float64(hits)/probes, b.FalsePositiveRate(uint64(added))
			se := math.Sqrt(want * (1 - want) / probes)
			t.Logf("p %v, %d items (%.1f× design): false positives %.5f, formula %.5f, fill %.3f, fill^k %.5f",
				p, added, float64(added)/design, got, want, b.FillRatio(), math.Pow(b.FillRatio(), float64(b.Hashes())))
			if math.Abs(got-want) > 5*se+1e-6 {
				t.Errorf("p %v, %d items: false-positive rate %.5f, formula %.5f (5 SE %.5f)", p, added, got, want, 5*se)
			}
			if fill == design && math.Abs(want-p)/p > 0.1 {
				t.Errorf("p %v: the formula gives %.5f at the design fill", p, want)
			}
		}
	}
}

func TestBloomMerge(t *testing.T) {
	a, b := mustBloom(t, 1000, 0.01), mustBloom(t, 1000, 0.01)
	for i := range 500 {
		a.Add(bloomItem("a", i))
		b.Add(bloomItem("b", i))
	}
	u := a.Clone()
	if err := u.Merge(b); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if !u.Contains(bloomItem("a", i)) || !u.Contains(bloomItem("b", i)) {
			t.Fatalf("item %d of a or b missing from their union", i)
		}
	}
	if u.Count() != 1000 || a.Count() != 500 {
		t.Errorf("counts %d and %d, want 1000 and 500 (the clone independent)", u.Count(), a.Count())
	}
	if err := a.Merge(mustBloom(t, 2000, 0.01)); !errors.Is(err, ErrIncompatible) {
		t.Errorf("merging other shapes: %v, want ErrIncompatible", err)
	}
	if err := a.Merge(&Bloom{}); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("merging the zero value: %v, want ErrInvalidParams", err)
	}
}

func TestBloomEncoding(t *testing.T) {
	empty := newBloom(64, 3)
	enc, err := empty.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(enc); got != "42014003000000000000000000" {
		t.Errorf("empty 64-bit filter: %s", got)
	}
	b := mustBloom(t, 10_000, 0.01)
	for i := range 10_000 {
		b.Add(bloomItem("u", i))
	}
	enc, err = b.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var d Bloom
	if err := d.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	again, _ := d.MarshalBinary()
	if !bytes.Equal(enc, again) || d.Count() != 10_000 || !d.Contains(bloomItem("u", 9999)) {
		t.Errorf("round trip changed the filter")
	}
	if _, err := (&Bloom{}).MarshalBinary(); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("marshal of the zero value: %v", err)
	}
	for name, c := range map[string]struct {
		in   string
		want error
	}{
		"empty":          {"", ErrTruncated},
		"tag":            {"43014003000000000000000000", ErrType},
		"version":        {"42024003000000000000000000", ErrVersion},
		"bits not words": {"42014103000000000000000000", ErrInvalidParams},
		"no hashes":      {"42014000000000000000000000", ErrInvalidParams},
		"33 hashes":      {"42014021000000000000000000", ErrInvalidParams},
		"too large":      {"4201c0808080200300", ErrInvalidParams},
		"cut short":      {"420140030000000000000000", ErrTruncated},
		"trailing":       {"4201400300000000000000000000", ErrCorrupt},
		"long varint":    {"4201c00003000000000000000000", ErrCorrupt},
		"bits of none":   {"42014003000100000000000000", ErrCorrupt},
		"4 bits by 1":    {"42014003010f00000000000000", ErrCorrupt},
	} {
		in, err := hex.DecodeString(c.in)
		if err != nil {
			t.Fatal(err)
		}
		keep := b.Clone()
		if err := keep.UnmarshalBinary(in); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		if got, _ := keep.MarshalBinary(); !bytes.Equal(got, enc) {
			t.Errorf("%s: a failed decode changed the receiver", name)
		}
	}
	var ok Bloom
	if err := ok.UnmarshalBinary(mustHex(t, "42014003010700000000000000")); err != nil {
		t.Errorf("3 bits set by 1 item of 3 hashes: %v", err)
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzBloomUnmarshal: decoding arbitrary bytes never panics; a rejected
// input wraps a sentinel; an accepted one re-encodes to the same bytes and
// supports Add, Contains and Merge.
func FuzzBloomUnmarshal(f *testing.F) {
	b, _ := NewBloom(20, 0.1)
	for i := range 20 {
		b.Add(bloomItem("u", i))
	}
	enc, _ := b.MarshalBinary()
	for _, seed := range [][]byte{enc, mustHex(f, "42014003000000000000000000"), mustHex(f, "42014003010700000000000000"), {}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var d Bloom
		if err := d.UnmarshalBinary(in); err != nil {
			if !wrapsSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if out, err := d.MarshalBinary(); err != nil || !bytes.Equal(out, in) {
			t.Fatalf("accepted %x, re-encodes as %x (%v)", in, out, err)
		}
		if err := d.Merge(d.Clone()); err != nil {
			t.Fatalf("self merge: %v", err)
		}
		d.Add([]byte("x"))
		if !d.Contains([]byte("x")) {
			t.Fatal("an added item is not contained")
		}
	})
}
