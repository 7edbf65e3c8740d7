package main

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickRun runs a tiny configuration end to end and checks the report
// and the plot.
func TestQuickRun(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	if err := run([]string{"-quick", "-maxn", "20000", "-trials", "20,20,10", "-out", dir}, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "accuracy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Estimator accuracy",
		"| log2m | m | trials |",
		"## log2m 10 (m = 1024, regwidth 5, 20 trials)",
		"| n | state | ours bias |",
		"| 80 | EXPLICIT | +0.000 % | 0.000 % |",
		"| 81 | registers |",
		"| 20000 | registers |",
		"## log2m 14 (m = 16384, regwidth 5, 10 trials)",
		"| 1280 | EXPLICIT | +0.000 % |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	f, err := os.Open(filepath.Join(dir, "accuracy.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("accuracy.png: %v", err)
	}
	if b := img.Bounds(); b.Dx() != plotW || b.Dy() != plotH {
		t.Errorf("plot is %v, want %dx%d", b, plotW, plotH)
	}
	if !strings.Contains(log.String(), "log2m 14: 10/10 trials") {
		t.Errorf("no progress on stderr:\n%s", log.String())
	}
}

func TestCheckpoints(t *testing.T) {
	ns := checkpoints(10_000_000, 80)
	if len(ns) < 40 || ns[0] != 1 || ns[len(ns)-1] != 10_000_000 {
		t.Fatalf("checkpoints %v", ns)
	}
	for i := 1; i < len(ns); i++ {
		if ns[i] <= ns[i-1] {
			t.Fatalf("checkpoints not ascending at %d: %v", i, ns)
		}
	}
	for _, n := range []int{80, 81} {
		found := false
		for _, x := range ns {
			found = found || x == n
		}
		if !found {
			t.Errorf("checkpoint %d missing", n)
		}
	}
}

// TestClassicEstimate checks the extension's estimator against values
// worked out by hand.
func TestClassicEstimate(t *testing.T) {
	regs := make([]uint8, 16)
	// EXPLICIT with 3 values: exact.
	if est, ex, err := classicEstimate([]byte{0x12, 0x84, 0x7f, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3}, regs); err != nil || !ex || est != 3 {
		t.Errorf("explicit: %v %v %v", est, ex, err)
	}
	// SPARSE log2m 4, regwidth 5 with one register (index 3, value 2):
	// 9-bit word 0011 00010, raw = 0.673·256/(15 + 1/4) < 40: linear
	// counting 16·ln(16/15).
	est, _, err := classicEstimate([]byte{0x13, 0x84, 0x7f, 0x31, 0x00}, regs)
	if want := 16 * math.Log(16.0/15); err != nil || math.Abs(est-want) > 1e-12 {
		t.Errorf("sparse: %v, %v; want %v", est, err, want)
	}
	// FULL log2m 4, regwidth 5, every register 3 (00011 repeated): no
	// zero register, raw = 0.673·256/(16/8) = 86.144.
	full := []byte{0x14, 0x84, 0x7f}
	full = append(full, bytes.Repeat([]byte{0x18, 0xc6, 0x31, 0x8c, 0x63}, 2)...)
	est, _, err = classicEstimate(full, regs)
	if want := 0.673 * 256 / 2; err != nil || math.Abs(est-want) > 1e-9 {
		t.Errorf("full: %v, %v; want %v", est, err, want)
	}
}
