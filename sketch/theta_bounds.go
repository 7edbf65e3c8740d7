package sketch

import "math"

// Confidence bounds of a Theta estimate, after the binomial bounds of
// Apache DataSketches (BinomialBoundsN in Java, binomial_bounds in C++).
//
// A sketch in estimation mode that retains n hashes below theta has seen
// some unknown number N of distinct values, each kept independently with
// probability theta, so n is a draw from Binomial(N, theta). The bounds
// for numStdDev = 1, 2 or 3 are one-sided binomial confidence bounds on N at
// tail probability delta, where delta is the normal tail beyond numStdDev
// standard deviations (the same constants as the libraries):
//
//   - lower bound: the largest N for which P(Binomial(N, theta) >= n) <= delta,
//     that is the largest N that could produce n or more hashes only with
//     probability delta or less;
//   - upper bound: the smallest N for which P(Binomial(N, theta) <= n) <= delta.
//
// How each case is computed:
//
//   - n == 0: the lower bound is 0 and the upper bound is
//     ceil(log(delta) / log(1-theta)), the closed form of the definition.
//   - n == 1: the lower bound is floor(log(1-delta) / log(1-theta)), again
//     the closed form. Both use log1p(-theta) for log(1-theta), as the
//     libraries do not: it only matters for a tiny theta, where log(1-theta)
//     loses all precision (to 0 below about 1e-16, which makes their upper
//     bound for n == 0 collapse to 0).
//   - n > 120: the normal approximation with continuity correction. With
//     nHat = (n ∓ 0.5)/theta and b = numStdDev·sqrt((1-theta)/theta), the
//     bounds are nHat + b²/2 ∓ (b/2)·sqrt(b² + 4·nHat), minus 0.5 for the
//     lower and plus 0.5 for the upper bound. This is bit for bit the
//     libraries' formula.
//   - otherwise (2 <= n <= 120 for the lower bound, 1 <= n <= 120 for the
//     upper one) the definition itself, solved by bisection on N with the
//     binomial CDF summed term by term (binomialCDF). The libraries compute
//     the same exact bound when theta >= n/360 (so there the results agree
//     except for floating-point ties), but for smaller theta they use a
//     normal approximation with tabulated corrections, so in that range our
//     bounds may differ from theirs by a few units.
//
// Finally, as in the libraries, the lower bound is clamped to
// [n, estimate] and the upper bound raised to at least the estimate.

// thetaDeltas[s] is the one-sided normal tail probability beyond s standard
// deviations, with the values (accurate to about 1e-7) that DataSketches
// uses, so that the closed forms agree with it.
var thetaDeltas = [4]float64{
	0.5,
	0.1586553191586026479,
	0.0227502618904135701,
	0.0013498126861731796,
}

// exactBoundMax is the largest retained count for which bounds are computed
// from the binomial distribution itself rather than its normal
// approximation.
const exactBoundMax = 120

func thetaDelta(numStdDev int) (float64, bool) {
	if numStdDev < 1 || numStdDev > 3 {
		return 0, false
	}
	return thetaDeltas[numStdDev], true
}

// boundStart returns what both binomial bounds start from: n as a float
// and the estimate n/theta; done is true when theta settles the bound by
// itself, bound then being NaN for a theta outside (0, 1] and n for 1.
func boundStart(n uint64, theta float64) (nf, est, bound float64, done bool) {
	nf = float64(n)
	switch {
	case !(theta > 0 && theta <= 1):
		return nf, 0, math.NaN(), true
	case theta == 1:
		return nf, nf, nf, true
	}
	return nf, nf / theta, 0, false
}

// binomialLowerBound returns the lower confidence bound on the number of
// distinct values behind n hashes retained with probability theta.
func binomialLowerBound(n uint64, theta float64, numStdDev int, delta float64) float64 {
	nf, est, bound, done := boundStart(n, theta)
	if done {
		return bound
	}
	return min(est, max(nf, lowerBound(n, theta, numStdDev, delta)))
}

// lowerBound is the binomial lower bound for theta in (0, 1) before it is
// held between n and the estimate.
func lowerBound(n uint64, theta float64, numStdDev int, delta float64) float64 {
	switch {
	case n == 0:
		return 0
	case n == 1:
		return math.Floor(math.Log(1-delta) / math.Log1p(-theta))
	case n > exactBoundMax:
		return contClassicLB(float64(n), theta, float64(numStdDev)) - 0.5
	default:
		return exactLowerBound(int(n), theta, delta)
	}
}

// binomialUpperBound returns the upper confidence bound on the number of
// distinct values behind n hashes retained with probability theta.
func binomialUpperBound(n uint64, theta float64, numStdDev int, delta float64) float64 {
	_, est, bound, done := boundStart(n, theta)
	if done {
		return bound
	}
	return max(est, upperBound(n, theta, numStdDev, delta))
}

// upperBound is the binomial upper bound for theta in (0, 1) before it is
// held at or above the estimate.
func upperBound(n uint64, theta float64, numStdDev int, delta float64) float64 {
	switch {
	case n == 0:
		return math.Ceil(math.Log(delta) / math.Log1p(-theta))
	case n > exactBoundMax:
		return contClassicUB(float64(n), theta, float64(numStdDev)) + 0.5
	default:
		return exactUpperBound(int(n), theta, delta)
	}
}

// contClassicLB and contClassicUB are the ends of the normal-approximation
// interval with continuity correction. The operation order matters: it is
// the libraries', so the results are identical.
func contClassicLB(n, theta, numStdDev float64) float64 {
	nHat := (n - 0.5) / theta
	b := numStdDev * math.Sqrt((1.0-theta)/theta)
	d := 0.5 * b * math.Sqrt((b*b)+(4.0*nHat))
	center := nHat + (0.5 * (b * b))
	return center - d
}

func contClassicUB(n, theta, numStdDev float64) float64 {
	nHat := (n + 0.5) / theta
	b := numStdDev * math.Sqrt((1.0-theta)/theta)
	d := 0.5 * b * math.Sqrt((b*b)+(4.0*nHat))
	center := nHat + (0.5 * (b * b))
	return center + d
}

// exactLowerBound returns the largest N >= n-1 with
// P(Binomial(N, theta) >= n) <= delta, i.e. P(Binomial(N, theta) <= n-1) >=
// 1-delta. That probability falls as N grows, so N is found by bisection
// between n-1 (where it is 1) and a point where it is below 1-delta.
func exactLowerBound(n int, theta, delta float64) float64 {
	within := func(trials float64) bool { return binomialCDF(trials, n-1, theta) >= 1-delta }
	lo := float64(n - 1)
	hi := math.Ceil(float64(n) / theta)
	for i := 0; within(hi) && i < 64; i++ {
		lo, hi = hi, 2*hi
	}
	lo, _ = bisect(lo, hi, within)
	return lo
}

// exactUpperBound returns the smallest N >= n with
// P(Binomial(N, theta) <= n) <= delta, by bisection between n (where the
// probability is 1) and a point where it is at most delta.
func exactUpperBound(n int, theta, delta float64) float64 {
	above := func(trials float64) bool { return binomialCDF(trials, n, theta) > delta }
	lo := float64(n)
	hi := 2 * math.Ceil(float64(n+1)/theta)
	for i := 0; above(hi) && i < 64; i++ {
		lo, hi = hi, 2*hi
	}
	_, hi = bisect(lo, hi, above)
	return hi
}

// bisect narrows integers lo < hi with pred(lo) true and pred(hi) false
// until they are adjacent (or, beyond 2^53, as close as float64 allows),
// assuming pred is true up to some point and false after it.
func bisect(lo, hi float64, pred func(float64) bool) (float64, float64) {
	for hi-lo > 1 {
		mid := math.Floor(lo/2 + hi/2)
		if mid <= lo || mid >= hi {
			break
		}
		if pred(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, hi
}

// binomialCDF returns P(X <= m) for X ~ Binomial(trials, theta), 0 < theta
// < 1, trials a whole number. It sums the m+1 probabilities from P(X = 0) =
// (1-theta)^trials upwards with the ratio P(X = j+1)/P(X = j) =
// (trials-j)/(j+1) · theta/(1-theta). For large trials P(X = 0) underflows,
// so the sum is kept relative to a scale held as a logarithm: the terms
// start at 1 with scale log P(X = 0), and whenever a term gets large it is
// folded into the scale. Terms rise and then fall, so terms too small to
// matter are those after the peak, and their underflow is harmless.
func binomialCDF(trials float64, m int, theta float64) float64 {
	if trials <= float64(m) {
		return 1
	}
	logScale := trials * math.Log1p(-theta)
	odds := theta / (1 - theta)
	term, sum := 1.0, 1.0
	for j := range m {
		term *= (trials - float64(j)) / float64(j+1) * odds
		sum += term
		if term > 1e200 {
			logScale += math.Log(term)
			sum /= term
			term = 1
		}
	}
	return min(1, math.Exp(logScale+math.Log(sum)))
}
