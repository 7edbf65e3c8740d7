package sketch

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// denseSketch returns a log2m sketch (regwidth 5) filled with n random hashes.
func denseSketch(tb testing.TB, log2m, n int, seed uint64) *HLL {
	tb.Helper()
	h, err := NewHLL(log2m, 5)
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	for range n {
		h.AddHash(r.Uint64())
	}
	if h.kind != kindDense {
		tb.Fatalf("sketch with %d values is not dense", n)
	}
	return h
}

func BenchmarkAddHash(b *testing.B) {
	h := denseSketch(b, 14, 100_000, 1)
	r := rand.New(rand.NewPCG(2, 2))
	xs := make([]uint64, 1<<16)
	for i := range xs {
		xs[i] = r.Uint64()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		h.AddHash(xs[i&(len(xs)-1)])
	}
}

func BenchmarkAdd8Bytes(b *testing.B) {
	h := denseSketch(b, 14, 100_000, 1)
	var buf [8]byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := uint64(0); b.Loop(); i++ {
		binary.LittleEndian.PutUint64(buf[:], i)
		h.Add(buf[:])
	}
}

func BenchmarkUnion14(b *testing.B) {
	x := denseSketch(b, 14, 1_000_000, 1)
	y := denseSketch(b, 14, 1_000_000, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := x.Union(y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEstimate14(b *testing.B) {
	h := denseSketch(b, 14, 1_000_000, 1)
	b.ReportAllocs()
	b.ResetTimer()
	var sink float64
	for b.Loop() {
		sink += h.Estimate()
	}
	_ = sink
}

func BenchmarkMarshalFull14(b *testing.B) {
	h := denseSketch(b, 14, 1_000_000, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalFull14(b *testing.B) {
	data, err := denseSketch(b, 14, 1_000_000, 1).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	if data[0] != 0x14 {
		b.Fatalf("not FULL: type byte %#x", data[0])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var h HLL
		if err := h.UnmarshalBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}
