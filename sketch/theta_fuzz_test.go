package sketch

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"
)

var thetaSentinels = []error{ErrTruncated, ErrVersion, ErrType, ErrCorrupt, ErrIncompatible}

// FuzzThetaUnmarshal: decoding arbitrary bytes never panics; a rejected
// input leaves the receiver unchanged and wraps a sentinel; an accepted one
// is a valid sketch that re-encodes stably, and set operations and bounds
// work on it.
func FuzzThetaUnmarshal(f *testing.F) {
	for _, name := range thetaFixtures {
		f.Add(readFixture(f, name))
	}
	for _, c := range []*CompactTheta{
		mustTheta(f, 12).Compact(),
		sketchOf(f, 12, 3, 4),
		sketchOf(f, 12, 0, 5),
		sketchOf(f, 4, 0, 40),
		mustIntersect(f, sketchOf(f, 5, 0, 500), sketchOf(f, 5, 1000, 1500)),
	} {
		f.Add(marshalCompact(f, c))
	}
	f.Add(thetaBytes(3, 3, 3, thetaFlagCompact, sh, countWord(3), th, 9, 5, 7))
	f.Add(thetaBytes(3, 1, 3, 0, 0, countWord(2), th, 9, 5))
	f.Add(thetaBytes(2, 4, 3, fOrd, sh, 1, 5))
	ref := sketchOf(f, 6, 0, 300)
	f.Fuzz(func(t *testing.T, in []byte) {
		c := sketchOf(t, 5, 0, 100)
		before := *c
		var d CompactTheta
		if err := d.UnmarshalBinary(in); err != nil {
			if !slices.ContainsFunc(thetaSentinels, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("error %v wraps no exported sentinel", err)
			}
			if err2 := c.UnmarshalBinary(in); err2 == nil || !sameCompact(c, &before) {
				t.Fatalf("failed UnmarshalBinary changed the receiver")
			}
			return
		}
		checkCompactInvariants(t, &d)
		enc := marshalCompact(t, &d)
		back := decodeCompact(t, enc)
		if !sameCompact(&d, back) {
			t.Fatalf("re-encoded sketch decodes to another state")
		}
		if again := marshalCompact(t, back); !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not stable: %x then %x", enc, again)
		}
		for sd := 1; sd <= 3; sd++ {
			lb, est, ub := d.LowerBound(sd), d.Estimate(), d.UpperBound(sd)
			if !(0 <= lb && lb <= est && est <= ub) || math.IsInf(ub, 0) {
				t.Fatalf("bounds(%d): %v <= %v <= %v violated", sd, lb, est, ub)
			}
		}
		for _, x := range []*CompactTheta{
			mustUnion(t, 8, &d, ref),
			mustIntersect(t, &d, ref),
			mustANotB(t, &d, ref),
			mustANotB(t, ref, &d),
		} {
			checkCompactInvariants(t, x)
		}
	})
}

func checkCompactInvariants(t *testing.T, c *CompactTheta) {
	t.Helper()
	if c.theta == 0 || c.theta > thetaMax {
		t.Fatalf("theta %#x", c.theta)
	}
	if c.empty && (c.theta != thetaMax || len(c.hashes) != 0) {
		t.Fatalf("empty sketch with theta %#x and %d hashes", c.theta, len(c.hashes))
	}
	if !c.empty && c.theta == thetaMax && len(c.hashes) == 0 {
		t.Fatalf("non-empty sketch with no hashes and theta 1.0")
	}
	var prev uint64
	for _, h := range c.hashes {
		if h <= prev || h >= c.theta {
			t.Fatalf("hash %#x after %#x with theta %#x", h, prev, c.theta)
		}
		prev = h
	}
}
