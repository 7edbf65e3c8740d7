package sketch

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

var sketchSentinels = []error{ErrTruncated, ErrVersion, ErrType, ErrCorrupt, ErrInvalidParams}

func wrapsSentinel(err error) bool {
	return slices.ContainsFunc(sketchSentinels, func(s error) bool { return errors.Is(err, s) })
}

// FuzzFreqUnmarshal: decoding arbitrary bytes never panics; a rejected
// input wraps a sentinel and leaves the receiver unchanged; an accepted one
// is the canonical encoding of a summary (it re-encodes to the same
// bytes), keeps the summary invariants, and merges both ways with a
// summary built by adds.
func FuzzFreqUnmarshal(f *testing.F) {
	for _, seed := range freqFuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ref := mustFreq(t, 4)
		newStream(1, 1.2, 50).add(t, ref, newTruth(), 100)
		before := marshalFreq(t, ref)
		var d Freq
		if err := d.UnmarshalBinary(in); err != nil {
			if !wrapsSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			if ref.UnmarshalBinary(in) == nil || !bytes.Equal(marshalFreq(t, ref), before) {
				t.Fatalf("failed UnmarshalBinary changed the receiver")
			}
			return
		}
		if enc := marshalFreq(t, &d); !bytes.Equal(enc, in) {
			t.Fatalf("accepted %x, re-encodes as %x", in, enc)
		}
		checkFreqInvariants(t, &d)
		into, from := ref, &d // the smaller capacity receives
		if d.Capacity() < ref.Capacity() {
			into, from = d.Clone(), ref
		}
		if err := into.Merge(from); err != nil && !errors.Is(err, ErrOverflow) {
			t.Fatalf("Merge with the reference: %v", err)
		}
		checkFreqInvariants(t, into)
		if err := d.Merge(d.Clone()); err != nil && !errors.Is(err, ErrOverflow) {
			t.Fatalf("self merge: %v", err)
		}
		checkFreqInvariants(t, &d)
	})
}

// checkFreqInvariants checks what holds for any summary, without knowing
// the true counts.
func checkFreqInvariants(t *testing.T, f *Freq) {
	t.Helper()
	items := f.Items()
	checkFreqSums(t, f, items)
	if cands, _ := f.Candidates(3); len(cands) > len(items) {
		t.Fatalf("more candidates than items")
	}
}

func freqFuzzSeeds(t testing.TB) [][]byte {
	empty := mustFreq(t, 1)
	exact := mustFreq(t, 8)
	mustAdd(t, exact, []byte("a"), 3)
	mustAdd(t, exact, nil, 1)
	if err := exact.AddNull(2); err != nil {
		t.Fatal(err)
	}
	cut := mustFreq(t, 3)
	newStream(2, 1.1, 100).add(t, cut, newTruth(), 500)
	weighted := mustFreq(t, 16)
	s := newStream(3, 1.5, 1000)
	s.maxCount = 1 << 40
	s.add(t, weighted, newTruth(), 200)
	var seeds [][]byte
	for _, f := range []*Freq{empty, exact, cut, weighted} {
		seeds = append(seeds, marshalFreq(t, f))
	}
	return seeds
}
