package sketch

import "testing"

// dailyCountMin is an ε = 0.001, δ = 0.01 sketch (2719 × 5) of one day of
// events.
func dailyCountMin(b *testing.B, seed uint64) *CountMin {
	b.Helper()
	c := mustCountMin(b, 0.001, 0.01)
	for _, k := range eventKeys(220_000, seed) {
		mustCMAdd(b, c, k, 1)
	}
	return c
}

// ns/op is ns per event (8-byte item) with conservative update.
func BenchmarkCountMinAdd(b *testing.B) {
	keys := eventKeys(1<<16, 1)
	c := mustCountMin(b, 0.001, 0.01)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := c.Add(keys[i&(1<<16-1)], 1); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkCountMinEstimate(b *testing.B) {
	keys := eventKeys(1<<16, 2)
	c := dailyCountMin(b, 1)
	b.ReportAllocs()
	var sink int64
	i := 0
	for b.Loop() {
		sink += c.Estimate(keys[i&(1<<16-1)])
		i++
	}
	_ = sink
}

func BenchmarkCountMinMerge(b *testing.B) {
	acc, day := dailyCountMin(b, 1), dailyCountMin(b, 2)
	b.ReportAllocs()
	for b.Loop() {
		if err := acc.Merge(day); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCountMinMarshal(b *testing.B) {
	c := dailyCountMin(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCountMinUnmarshal(b *testing.B) {
	data := marshalCM(b, dailyCountMin(b, 1))
	b.ReportAllocs()
	for b.Loop() {
		var c CountMin
		if err := c.UnmarshalBinary(data); err != nil {
			b.Fatal(err)
		}
	}
}
