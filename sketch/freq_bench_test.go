package sketch

import (
	"math/rand/v2"
	"testing"
)

// eventKeys returns n user ids of the demo's events table as 8 big-endian
// bytes: floor(2e6 · u³) for uniform u, so a few ids are very frequent and
// most appear once or never.
func eventKeys(n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 0))
	keys := make([][]byte, n)
	for i := range keys {
		u := r.Float64()
		keys[i] = key8(uint64(2e6 * u * u * u))
	}
	return keys
}

// dailyFreq is a capacity-m summary of one day of events (220,000).
func dailyFreq(b *testing.B, m int, seed uint64) *Freq {
	b.Helper()
	f := mustFreq(b, m)
	for _, k := range eventKeys(220_000, seed) {
		mustAdd(b, f, k, 1)
	}
	return f
}

// Each iteration adds one event of the demo's distribution (ns/op is
// ns/event), reductions included.
func BenchmarkFreqAdd(b *testing.B) {
	for _, m := range []int{64, 1024} {
		b.Run(itoa(m), func(b *testing.B) {
			keys := eventKeys(1<<16, 1)
			f := mustFreq(b, m)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := f.Add(keys[i&(1<<16-1)], 1); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// Every item is new: a reduction every m adds (the worst case).
func BenchmarkFreqAddDistinct(b *testing.B) {
	f := mustFreq(b, 1024)
	b.ReportAllocs()
	for i := uint64(0); b.Loop(); i++ {
		if err := f.Add(key8(i), 1); err != nil {
			b.Fatal(err)
		}
	}
}

// fullFreq holds exactly 1024 counters: items base..base+1023 (8 bytes
// each) with counts 1..1000.
func fullFreq(b *testing.B, base uint64) *Freq {
	b.Helper()
	f := mustFreq(b, 1024)
	r := rand.New(rand.NewPCG(base, 1))
	for i := range uint64(1024) {
		mustAdd(b, f, key8(base+i), 1+r.Int64N(1000))
	}
	return f
}

// Merging two full m = 1024 summaries that share half their items: 1536
// counters reduced to 1024. Each iteration clones the receiver first
// (BenchmarkFreqClone is that part alone).
func BenchmarkFreqMerge(b *testing.B) {
	x, y := fullFreq(b, 0), fullFreq(b, 512)
	b.ReportAllocs()
	for b.Loop() {
		if err := x.Clone().Merge(y); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFreqClone(b *testing.B) {
	x := fullFreq(b, 0)
	b.ReportAllocs()
	for b.Loop() {
		_ = x.Clone()
	}
}

// Merging one day of events (an m = 1024 summary) into an accumulator, as
// each of the 90 merges of a 90-day query does.
func BenchmarkFreqMergeDaily(b *testing.B) {
	acc, day := dailyFreq(b, 1024, 1), dailyFreq(b, 1024, 2)
	b.ReportAllocs()
	for b.Loop() {
		if err := acc.Merge(day); err != nil {
			b.Fatal(err)
		}
	}
}

// A full m = 1024 summary of 8-byte items: about 13 KB.
func BenchmarkFreqMarshal(b *testing.B) {
	f := fullFreq(b, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFreqUnmarshal(b *testing.B) {
	data := marshalFreq(b, fullFreq(b, 0))
	b.ReportAllocs()
	for b.Loop() {
		var f Freq
		if err := f.UnmarshalBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(v int) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}
