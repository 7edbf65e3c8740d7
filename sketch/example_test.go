package sketch_test

import (
	"fmt"
	"strconv"

	"github.com/pgsketch/pgsketch/sketch"
)

// Count distinct values, merge two sketches and store the result in the
// postgresql-hll format.
func Example() {
	monday, err := sketch.NewHLL(14, 5)
	if err != nil {
		panic(err)
	}
	tuesday, _ := sketch.NewHLL(14, 5)
	for i := range 100_000 {
		monday.AddString("user-" + strconv.Itoa(i)) // canonical text of the value
	}
	for i := 50_000; i < 150_000; i++ {
		tuesday.AddString("user-" + strconv.Itoa(i))
	}
	if err := monday.Union(tuesday); err != nil {
		panic(err)
	}
	est := monday.Estimate()
	fmt.Printf("within 3 standard errors of 150000: %t\n", abs(est/150_000-1) < 3*monday.StdError())
	fmt.Printf("standard error: %.2f%%\n", 100*monday.StdError())

	b, _ := monday.MarshalBinary()
	fmt.Printf("header: %x, %d bytes\n", b[:3], len(b))
	// Output:
	// within 3 standard errors of 150000: true
	// standard error: 0.81%
	// header: 148e7f, 10243 bytes
}

// Small sets are kept exactly, in the EXPLICIT representation.
func ExampleHLL_Estimate() {
	h, _ := sketch.NewHLL(14, 5)
	for _, v := range []string{"fr", "de", "fr", "it"} {
		h.AddString(v)
	}
	fmt.Println(h.Estimate(), h.StdError())
	// Output: 3 0
}

// The bytes of a sketch built from hash values are those of the extension's
// hll_add_agg(h::hll_hashval, 10, 5) over the same values.
func ExampleHLL_MarshalBinary() {
	h, _ := sketch.NewHLL(10, 5)
	h.AddHash(1)
	h.AddHash(0xcba79700677cdeaa) // negative as int64: sorts first
	b, _ := h.MarshalBinary()
	fmt.Printf("%x\n", b)
	// Output: 128a7fcba79700677cdeaa0000000000000001
}

// Sketches of different precision are merged by folding the finer one.
func ExampleHLL_Fold() {
	fine, _ := sketch.NewHLL(14, 5)
	coarse, _ := sketch.NewHLL(12, 5)
	for i := range 20_000 {
		fine.AddString(strconv.Itoa(i))
		coarse.AddString(strconv.Itoa(i + 10_000))
	}
	folded, _ := fine.Fold(12)
	if err := folded.Union(coarse); err != nil {
		panic(err)
	}
	fmt.Println(folded.Log2m(), abs(folded.Estimate()/30_000-1) < 3*folded.StdError())
	// Output: 12 true
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
