package main

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestQuickRun runs a tiny configuration end to end and checks the table.
func TestQuickRun(t *testing.T) {
	var out, log bytes.Buffer
	err := run([]string{"-trials", "10", "-jaccard", "0.2,0.01", "-union", "20000", "-parts", "4"}, &out, &log)
	if err != nil && !errors.Is(err, errFailed) {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	for _, want := range []string{
		"| op | Jaccard |",
		"| INTERSECT | 0.2 | 12000 | 4000 |",
		"| EXCEPT | 0.01 | 10100 | 9900 |",
		"- INTERSECT: ",
		"- EXCEPT: lowest Jaccard index with at least 50 % of trials answered: 0.01",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		j                   float64
		union, common, side int
	}{
		{0.5, 100000, 50000, 25000},
		{0.001, 100000, 100, 49950},
		{0.1, 99, 11, 44}, // 9.9 rounds to 10, one more for an even split
	} {
		if common, side := sizes(c.j, c.union); common != c.common || side != c.side {
			t.Errorf("sizes(%v, %d) = %d, %d; want %d, %d", c.j, c.union, common, side, c.common, c.side)
		}
	}
}

func TestStatedRelErr(t *testing.T) {
	for _, c := range []struct{ est, lower, upper, want float64 }{
		{100, 90, 120, 0.2},
		{100, 70, 120, 0.3},
		{5, 5, 5, 0},
		{0, 0, 0, 0},
		{0, 0, 3, math.Inf(1)},
	} {
		if got := statedRelErr(c.est, c.lower, c.upper); got != c.want {
			t.Errorf("statedRelErr(%v, %v, %v) = %v; want %v", c.est, c.lower, c.upper, got, c.want)
		}
	}
}
