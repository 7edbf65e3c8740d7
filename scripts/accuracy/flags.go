package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
)

// options are the command line's flags, with their defaults filled in.
type options struct {
	quick   bool
	outDir  string
	maxN    int
	trials  []int // per configuration, in configs order
	seed    uint64
	workers int
}

// parseFlags reads the options, with the defaults of a full or a -quick
// run.
func parseFlags(args []string, logw io.Writer) (options, error) {
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(logw)
	quick := fs.Bool("quick", false, "fast smoke run: few trials, n up to 10^5, output to a temporary directory unless -out is given")
	out := fs.String("out", "", "output directory for accuracy.md and accuracy.png (default docs, or a temporary directory with -quick)")
	maxN := fs.Int("maxn", 0, "largest cardinality (default 10^7, 10^5 with -quick)")
	trials := fs.String("trials", "", "trials per configuration for log2m 10,12,14 (default 1000,1000,1000; 40,40,20 with -quick)")
	seed := fs.Uint64("seed", 1, "base seed of the hash streams")
	workers := fs.Int("workers", runtime.NumCPU(), "parallel workers")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	o := options{quick: *quick, outDir: *out, maxN: *maxN, seed: *seed, workers: max(1, *workers)}
	if o.maxN == 0 {
		o.maxN = 10_000_000
		if o.quick {
			o.maxN = 100_000
		}
	}
	o.trials = []int{1000, 1000, 1000}
	if o.quick {
		o.trials = []int{40, 40, 20}
	}
	if *trials != "" {
		var t [3]int
		if n, err := fmt.Sscanf(*trials, "%d,%d,%d", &t[0], &t[1], &t[2]); n != 3 || err != nil {
			return o, fmt.Errorf("-trials %q: want three comma-separated counts", *trials)
		}
		o.trials = t[:]
	}
	if o.outDir == "" {
		o.outDir = "docs"
		if o.quick {
			dir, err := os.MkdirTemp("", "pgsketch-accuracy-")
			if err != nil {
				return o, err
			}
			o.outDir = dir
		}
	}
	return o, nil
}
