package sketch

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzCountMinUnmarshal: decoding arbitrary bytes never panics; a rejected
// input wraps a sentinel and leaves the receiver unchanged; an accepted one
// re-encodes to the same bytes, keeps every row's sum at most N, and
// supports Add, Estimate and Merge.
func FuzzCountMinUnmarshal(f *testing.F) {
	for _, seed := range countMinFuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ref := mustCountMin(t, 0.9, 0.2)
		mustCMAdd(t, ref, []byte("ref"), 5)
		before := marshalCM(t, ref)
		var d CountMin
		if err := d.UnmarshalBinary(in); err != nil {
			if !wrapsSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if ref.UnmarshalBinary(in) == nil || !bytes.Equal(marshalCM(t, ref), before) {
				t.Fatalf("failed UnmarshalBinary changed the receiver")
			}
			return
		}
		if enc := marshalCM(t, &d); !bytes.Equal(enc, in) {
			t.Fatalf("accepted %x, re-encodes as %x", in, enc)
		}
		checkCountMinRows(t, &d)
		if err := d.Merge(d.Clone()); err != nil && !errors.Is(err, ErrOverflow) {
			t.Fatalf("self merge: %v", err)
		}
		if err := d.Add([]byte("x"), 1); err != nil && !errors.Is(err, ErrOverflow) {
			t.Fatalf("Add: %v", err)
		}
		checkCountMinRows(t, &d)
		if est := d.Estimate([]byte("x")); est < 0 || est > d.N() {
			t.Fatalf("Estimate %d, N %d", est, d.N())
		}
	})
}

func checkCountMinRows(t *testing.T, c *CountMin) {
	t.Helper()
	for row := range c.depth {
		var sum int64
		for _, v := range c.cells[row*c.width : (row+1)*c.width] {
			if v < 0 || v > c.n-sum {
				t.Fatalf("row %d: cells sum past N %d", row, c.n)
			}
			sum += v
		}
	}
}

func countMinFuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, p := range [][2]float64{{0.9, 0.2}, {0.5, 0.01}, {0.1, 0.5}} {
		c := mustCountMin(t, p[0], p[1])
		seeds = append(seeds, marshalCM(t, c))
		for i := range uint64(50) {
			mustCMAdd(t, c, key8(i%7), int64(1+i*i*i))
		}
		if err := c.AddNull(2); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, marshalCM(t, c))
	}
	return seeds
}
