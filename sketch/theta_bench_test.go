package sketch

import (
	"encoding/binary"
	"testing"
)

// estimatingTheta returns a default-size update sketch that has seen n
// distinct values starting at base, so it is deep in estimation mode.
func estimatingTheta(b *testing.B, base int64, n int) *Theta {
	b.Helper()
	s := mustTheta(b, DefaultThetaLgK)
	for i := range int64(n) {
		s.AddInt64(base + i)
	}
	return s
}

// Each iteration adds one new distinct value (ns/op is ns/value).
func BenchmarkThetaAddUint64(b *testing.B) {
	s := estimatingTheta(b, 0, 1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := uint64(1 << 40); b.Loop(); i++ {
		s.AddUint64(i)
	}
}

func BenchmarkThetaAddBytes8(b *testing.B) {
	s := estimatingTheta(b, 0, 1_000_000)
	var buf [8]byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := uint64(1 << 40); b.Loop(); i++ {
		binary.LittleEndian.PutUint64(buf[:], i)
		s.AddBytes(buf[:])
	}
}

func BenchmarkThetaAddBytes24(b *testing.B) {
	s := estimatingTheta(b, 0, 1_000_000)
	buf := []byte("2024-01-02 03:04:05+00\x00\x00")
	b.ReportAllocs()
	b.ResetTimer()
	for i := uint64(1 << 40); b.Loop(); i++ {
		binary.LittleEndian.PutUint64(buf[16:], i)
		s.AddBytes(buf)
	}
}

// Adds while the sketch is still exact and growing: every value is stored,
// with the table resizes and the first rebuilds.
func BenchmarkThetaAddUint64Fill(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s := mustTheta(b, DefaultThetaLgK)
		for i := range uint64(16384) {
			s.AddUint64(i)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/16384, "ns/value")
}

func BenchmarkThetaCompact(b *testing.B) {
	s := estimatingTheta(b, 0, 1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = s.Compact()
	}
}

// Two lg_k 12 sketches in estimation mode, half overlapping.
func estimatingPair(b *testing.B) (*CompactTheta, *CompactTheta) {
	b.Helper()
	return estimatingTheta(b, 0, 1_000_000).Compact(), estimatingTheta(b, 500_000, 1_000_000).Compact()
}

func BenchmarkThetaUnion(b *testing.B) {
	x, y := estimatingPair(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ThetaUnion(DefaultThetaLgK, x, y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkThetaIntersect(b *testing.B) {
	x, y := estimatingPair(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ThetaIntersect(x, y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkThetaANotB(b *testing.B) {
	x, y := estimatingPair(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ThetaANotB(x, y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkThetaMarshal(b *testing.B) {
	c := estimatingTheta(b, 0, 1_000_000).Compact()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkThetaUnmarshal(b *testing.B) {
	data, err := estimatingTheta(b, 0, 1_000_000).Compact().MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var c CompactTheta
		if err := c.UnmarshalBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}

// Bounds in the exact binomial range (n <= 120) are the costly ones.
func BenchmarkThetaBoundsSmall(b *testing.B) {
	c := &CompactTheta{theta: thetaMax / 1000, hashes: make([]uint64, 60)}
	b.ReportAllocs()
	b.ResetTimer()
	var sink float64
	for b.Loop() {
		sink += c.LowerBound(2) + c.UpperBound(2)
	}
	_ = sink
}
