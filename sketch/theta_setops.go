package sketch

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Set operations on compact Theta sketches. They follow the DataSketches
// union, intersection and A-not-B operators, specialized to sorted inputs:
// each is a merge of ascending hash lists, linear in the number of hashes
// read. All inputs share ThetaSeed (UnmarshalBinary refuses any other seed),
// so every pair of sketches is compatible. Merges run in pooled scratch
// buffers and the result is copied out at its exact size, which keeps
// garbage (and so garbage collection) low.

var errUninitialized = errors.New("uninitialized compact theta sketch")

// checkInput rejects a nil sketch or a zero CompactTheta, which holds no
// theta.
func checkInput(op string, i int, c *CompactTheta) error {
	if c == nil || c.theta == 0 {
		return fmt.Errorf("sketch: %s: input %d: %w: %w", op, i, errUninitialized, ErrInvalidParams)
	}
	return nil
}

var scratchPool = sync.Pool{New: func() any { return new([]uint64) }}

// getScratch returns a pooled buffer of length n; give it back with
// scratchPool.Put once nothing refers to it.
func getScratch(n int) *[]uint64 {
	p := scratchPool.Get().(*[]uint64)
	if cap(*p) < n {
		*p = make([]uint64, n)
	}
	*p = (*p)[:n]
	return p
}

// ThetaUnion returns the union of the sketches with k = 2^lgK nominal
// entries. Empty inputs are ignored; theta starts as the smallest theta of
// the other inputs and the result holds every distinct hash below it. If
// that is more than k hashes, theta becomes the (k+1)-th smallest of them
// and the k smallest are kept. The result is empty only if every input is
// (or there are none). The result is the one the DataSketches union gives
// for the same inputs and lgK.
func ThetaUnion(lgK int, sketches ...*CompactTheta) (*CompactTheta, error) {
	if err := checkThetaLgK(lgK); err != nil {
		return nil, fmt.Errorf("sketch: theta union: %w", err)
	}
	empty := true
	theta := uint64(thetaMax)
	total := 0
	for i, c := range sketches {
		if err := checkInput("theta union", i, c); err != nil {
			return nil, err
		}
		if !c.empty {
			empty = false
			theta = min(theta, c.theta)
			total += len(c.hashes)
		}
	}
	k := 1 << lgK
	// Only the k+1 smallest hashes below theta can matter, so every merge
	// stops there. acc starts as a view of the first input and then lives
	// in one of two scratch buffers, the other receiving the next merge.
	size := min(k+1, total)
	bufs := [2]*[]uint64{getScratch(size), getScratch(size)}
	defer scratchPool.Put(bufs[0])
	defer scratchPool.Put(bufs[1])
	var acc []uint64
	merged := 0
	for _, c := range sketches {
		if c.empty {
			continue
		}
		hs := below(c.hashes, theta)
		if merged == 0 {
			acc = hs[:min(len(hs), k+1)]
		} else {
			acc = mergeUnion(*bufs[merged%2], acc, hs)
		}
		merged++
	}
	if len(acc) > k {
		theta = acc[k]
		acc = acc[:k]
	}
	return newCompactTheta(empty, theta, slices.Clone(acc)), nil
}

// below returns the prefix of ascending hashes that is below theta.
func below(hashes []uint64, theta uint64) []uint64 {
	n, _ := slices.BinarySearch(hashes, theta)
	return hashes[:n]
}

// mergeUnion writes the smallest elements of the union of ascending,
// distinct a and b to out, as many as fit, and returns the filled prefix.
func mergeUnion(out, a, b []uint64) []uint64 {
	n, i, j := 0, 0, 0
	for n < len(out) && i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		switch {
		case x < y:
			out[n] = x
			i++
		case y < x:
			out[n] = y
			j++
		default:
			out[n] = x
			i++
			j++
		}
		n++
	}
	n += copy(out[n:], a[i:])
	n += copy(out[n:], b[j:])
	return out[:n]
}

// ThetaIntersect returns the intersection of first and the rest. If any
// input is empty the result is empty. Otherwise theta is the smallest input
// theta and the result holds the hashes below it that every input retains;
// a result with no hashes and theta 1.0 is empty.
func ThetaIntersect(first *CompactTheta, rest ...*CompactTheta) (*CompactTheta, error) {
	if err := checkInput("theta intersect", 0, first); err != nil {
		return nil, err
	}
	empty, theta := first.empty, first.theta
	for i, c := range rest {
		if err := checkInput("theta intersect", i+1, c); err != nil {
			return nil, err
		}
		empty = empty || c.empty
		theta = min(theta, c.theta)
	}
	if empty {
		return newCompactTheta(true, thetaMax, nil), nil
	}
	acc := below(first.hashes, theta)
	if len(rest) > 0 {
		// The first merge writes to scratch, the later ones over it.
		buf := getScratch(len(acc))
		defer scratchPool.Put(buf)
		for i, c := range rest {
			dst := acc
			if i == 0 {
				dst = *buf
			}
			acc = mergeIntersect(dst, acc, c.hashes)
		}
	}
	return newCompactTheta(false, theta, slices.Clone(acc)), nil
}

// mergeIntersect writes the ascending hashes present in both a and b to
// out and returns them. out may be a itself: each write lands at or before
// the element of a just read.
func mergeIntersect(out, a, b []uint64) []uint64 {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		switch {
		case x < y:
			i++
		case y < x:
			j++
		default:
			out[n] = x
			n++
			i++
			j++
		}
	}
	return out[:n]
}

// ThetaANotB returns the hashes of a that b does not retain. If a is empty
// the result is empty. Otherwise theta is the smaller of the two thetas and
// the result holds a's hashes below it that are not in b; a result with no
// hashes and theta 1.0 is empty.
func ThetaANotB(a, b *CompactTheta) (*CompactTheta, error) {
	if err := checkInput("theta a-not-b", 0, a); err != nil {
		return nil, err
	}
	if err := checkInput("theta a-not-b", 1, b); err != nil {
		return nil, err
	}
	if a.empty {
		return newCompactTheta(true, thetaMax, nil), nil
	}
	theta := min(a.theta, b.theta) // an empty b has theta 1.0
	as := below(a.hashes, theta)
	buf := getScratch(len(as))
	defer scratchPool.Put(buf)
	diff := mergeDifference(*buf, as, b.hashes)
	return newCompactTheta(false, theta, slices.Clone(diff)), nil
}

// mergeDifference writes the ascending hashes of a that are not in b to
// out, which has room for all of a, and returns them.
func mergeDifference(out, a, b []uint64) []uint64 {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		switch {
		case x < y:
			out[n] = x
			n++
			i++
		case y < x:
			j++
		default:
			i++
			j++
		}
	}
	n += copy(out[n:], a[i:])
	return out[:n]
}
