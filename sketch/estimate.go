package sketch

import "math"

// alphaInf is the limit of the HyperLogLog bias-correction constant for
// m → ∞: 1 / (2 ln 2).
const alphaInf = 0.5 / math.Ln2

// Estimate returns the estimated number of distinct hash values added.
//
// While the sketch is EMPTY or EXPLICIT the count is exact. Once it uses
// registers, Estimate applies Otmar Ertl's improved raw estimator ("New
// cardinality estimation algorithms for HyperLogLog sketches", 2017,
// algorithm 6) with q = 2^regwidth − 2 (register values are capped at q+1),
// without bias tables or a linear-counting switch. Estimate returns NaN for
// an undefined sketch (the extension returns NULL there) and +Inf when every
// register is saturated (the cardinality is beyond the sketch's range). It
// does not allocate.
func (h *HLL) Estimate() float64 {
	switch h.kind {
	case kindEmpty:
		return 0
	case kindExplicit:
		return float64(len(h.explicit))
	case kindUndefined:
		return math.NaN()
	}
	var hist [1 << maxRegwidth]uint32
	histogram(h.regs, &hist)
	return ertlEstimate(hist[:int(h.maxVal)+1], len(h.regs))
}

// histogram counts register values. Four count tables break the
// store-to-load dependency between equal neighbouring registers.
func histogram(regs []uint8, hist *[1 << maxRegwidth]uint32) {
	var c0, c1, c2, c3 [256]uint32
	n := len(regs) &^ 7
	for i := 0; i < n; i += 8 {
		w := le64(regs[i:])
		c0[uint8(w)]++
		c1[uint8(w>>8)]++
		c2[uint8(w>>16)]++
		c3[uint8(w>>24)]++
		c0[uint8(w>>32)]++
		c1[uint8(w>>40)]++
		c2[uint8(w>>48)]++
		c3[uint8(w>>56)]++
	}
	for _, r := range regs[n:] {
		c0[r]++
	}
	for k := range hist {
		hist[k] = c0[k] + c1[k] + c2[k] + c3[k]
	}
}

// ertlEstimate implements the improved raw estimator for m registers whose
// value histogram is c[0..q+1].
func ertlEstimate(c []uint32, m int) float64 {
	q := len(c) - 2
	mf := float64(m)
	z := mf * ertlTau(1-float64(c[q+1])/mf)
	for k := q; k >= 1; k-- {
		z = 0.5 * (z + float64(c[k]))
	}
	z += mf * ertlSigma(float64(c[0])/mf)
	return alphaInf * mf * mf / z
}

// ertlSigma computes σ(x) = x + Σ_{k≥1} x^(2^k) 2^(k−1), summed until the
// terms no longer change the result.
func ertlSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y := 1.0
	z := x
	for {
		x *= x
		prev := z
		z += x * y
		y += y
		if z == prev {
			return z
		}
	}
}

// ertlTau computes τ(x) = (1 − x − Σ_{k≥1} (1 − x^(2^−k))² 2^−k) / 3, summed
// until the terms no longer change the result.
func ertlTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y := 1.0
	z := 1 - x
	for {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		d := 1 - x
		z -= d * d * y
		if z == prev {
			return z / 3
		}
	}
}
