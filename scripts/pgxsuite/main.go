// Command pgxsuite compares two runs of a Go test suite recorded with
// `go test -json`: one directly against PostgreSQL, one through
// pgsketch-proxy. scripts/pgx-suite.sh runs the jackc/pgx test suite both
// ways and then this program.
//
//	go run ./scripts/pgxsuite -direct direct.json -proxy proxy.json [-details N]
//
// It prints the counts of each run (tests including subtests, and top-level
// tests alone), then, each sorted by package and full test name (the random
// part of a t.TempDir() path in a subtest's name replaced by N, so that the
// runs can be compared):
//
//   - the tests that pass directly but fail through the proxy (or never
//     finish there: a panic or a timeout ends the package's test binary, or
//     are missing there), with the last lines of their output through the
//     proxy; and the packages that are ok directly but fail through the proxy
//     without a failing test to show for it;
//   - the tests that pass directly and are skipped through the proxy;
//   - the tests that fail in both runs (the environment: a missing extension,
//     a variable left unset, a slow machine), and the packages that fail in
//     both;
//   - the tests that fail directly but not through the proxy (flaky tests,
//     mostly);
//   - any other difference in outcome.
//
// Exit status: 0 when nothing passes directly and fails through the proxy,
// 1 when something does, 2 when a file cannot be read.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Outcomes of a test or package. A test that started but has no result (its
// binary panicked or timed out) is unfinished; one that did not run at all in
// a run is absent.
const (
	pass       = "pass"
	fail       = "fail"
	skip       = "skip"
	unfinished = "unfinished"
	absent     = "absent"
)

// event is one line of `go test -json` (cmd/test2json), with the build events
// of Go 1.24 and later.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// test is one test or subtest of one run.
type test struct {
	pkg, name string
	outcome   string
	output    []string
}

// pkgResult is one package of one run.
type pkgResult struct {
	outcome string // pass, fail, skip (no test files), or "" (no result)
	output  []string
}

// run is everything one `go test -json` output holds.
type run struct {
	tests   map[string]*test // by key(pkg, name)
	pkgs    map[string]*pkgResult
	builds  map[string][]string // build output by import path
	garbage []string            // lines that are not test2json events
}

func key(pkg, name string) string { return pkg + "\x00" + name }

// tempDirName matches a t.TempDir() path in a subtest's name, such as
// TestParseConfigSSLCertMode/servicefile='/tmp/TestParseConfigSSLCertMode2053693273/001/pg_service.conf':
// the random number differs from run to run, so it becomes "N".
var tempDirName = regexp.MustCompile(`(/Test[^/]*?)[0-9]+/([0-9]{3})/`)

func normalize(name string) string { return tempDirName.ReplaceAllString(name, "${1}N/$2/") }

// parse reads one `go test -json` output.
func parse(path string) (*run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &run{tests: map[string]*test{}, pkgs: map[string]*pkgResult{}, builds: map[string][]string{}}
	pkg := func(name string) *pkgResult {
		p := r.pkgs[name]
		if p == nil {
			p = &pkgResult{}
			r.pkgs[name] = p
		}
		return p
	}
	tst := func(p, name string) *test {
		k := key(p, name)
		t := r.tests[k]
		if t == nil {
			t = &test{pkg: p, name: name}
			r.tests[k] = t
		}
		return t
	}
	rd := bufio.NewReader(f)
	for {
		line, err := rd.ReadString('\n')
		if len(line) > 0 {
			var e event
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
				r.garbage = append(r.garbage, strings.TrimRight(line, "\n"))
			} else {
				switch {
				case e.Action == "build-output":
					r.builds[e.ImportPath] = append(r.builds[e.ImportPath], strings.TrimRight(e.Output, "\n"))
				case e.Action == "build-fail":
					r.builds[e.ImportPath] = append(r.builds[e.ImportPath], "(build failed)")
				case e.Package == "":
				case e.Test == "":
					p := pkg(e.Package)
					switch e.Action {
					case "output":
						p.output = append(p.output, strings.TrimRight(e.Output, "\n"))
					case pass, fail, skip:
						p.outcome = e.Action
					}
				default:
					pkg(e.Package)
					t := tst(e.Package, normalize(e.Test))
					switch e.Action {
					case "output":
						t.output = append(t.output, strings.TrimRight(e.Output, "\n"))
					case pass, fail, skip:
						t.outcome = e.Action
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	for _, t := range r.tests {
		if t.outcome == "" {
			t.outcome = unfinished
		}
	}
	return r, nil
}

// pkgOutcome is package p's outcome in the run, "no result" for none.
func (r *run) pkgOutcome(p string) string {
	if pr := r.pkgs[p]; pr != nil && pr.outcome != "" {
		return pr.outcome
	}
	return "no result"
}

func (r *run) outcome(k string) string {
	if t := r.tests[k]; t != nil {
		return t.outcome
	}
	return absent
}

// counts prints one run's line of the counts table.
func (r *run) counts(label string) string {
	var all, top = map[string]int{}, map[string]int{}
	for _, t := range r.tests {
		all[t.outcome]++
		if !strings.Contains(t.name, "/") {
			top[t.outcome]++
		}
	}
	ok, failed := 0, 0
	for _, p := range r.pkgs {
		switch p.outcome {
		case pass, skip:
			ok++
		default:
			failed++
		}
	}
	c := func(o string) string { return fmt.Sprintf("%d (%d)", all[o], top[o]) }
	return fmt.Sprintf("  %-8s %-14s %-11s %-12s %-12s %d/%d", label, c(pass), c(fail), c(skip), c(unfinished), ok, failed)
}

// short names a package by its directory in the module: "./" for the module
// itself.
var modulePath string

func short(pkg string) string {
	if pkg == modulePath {
		return "./"
	}
	if rest, ok := strings.CutPrefix(pkg, modulePath+"/"); ok {
		return "./" + rest
	}
	return pkg
}

// interesting drops the lines of a test's output that only say it ran.
func interesting(lines []string) []string {
	var out []string
	for _, l := range lines {
		s := strings.TrimSpace(l)
		if s == "" || strings.HasPrefix(s, "=== RUN") || strings.HasPrefix(s, "=== PAUSE") ||
			strings.HasPrefix(s, "=== CONT") || strings.HasPrefix(s, "=== NAME") ||
			strings.HasPrefix(s, "--- PASS") || strings.HasPrefix(s, "--- FAIL") || strings.HasPrefix(s, "--- SKIP") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func tail(lines []string, n int) []string {
	if n >= 0 && len(lines) > n {
		return append([]string{fmt.Sprintf("    ... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return lines
}

func head(lines []string, n int) []string {
	if n >= 0 && len(lines) > n {
		return append(lines[:n:n], fmt.Sprintf("    ... (%d lines after)", len(lines)-n))
	}
	return lines
}

func main() {
	directPath := flag.String("direct", "", "`go test -json` output of the run directly against PostgreSQL")
	proxyPath := flag.String("proxy", "", "`go test -json` output of the run through the proxy")
	details := flag.Int("details", 12, "lines of output to show for each test that fails through the proxy only (-1: all, 0: none)")
	flag.StringVar(&modulePath, "module", "github.com/jackc/pgx/v5", "module path, left out of the package names printed")
	flag.Parse()
	if *directPath == "" || *proxyPath == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: pgxsuite -direct DIRECT.json -proxy PROXY.json [-details N] [-module PATH]")
		os.Exit(2)
	}
	c := compareRuns(mustParse(*directPath), mustParse(*proxyPath))
	c.printCounts()
	c.printLists()
	if *details != 0 && c.failed() {
		c.printDetails(*details)
	}
	for _, g := range [][]string{c.direct.garbage, c.proxy.garbage} {
		if len(g) > 0 {
			fmt.Fprintf(os.Stderr, "pgxsuite: %d lines that are not go test -json events, e.g. %q\n", len(g), g[0])
		}
	}
	if c.failed() {
		os.Exit(1)
	}
}

// mustParse is parse, ending the program with status 2 when the file
// cannot be read.
func mustParse(path string) *run {
	r, err := parse(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgxsuite:", err)
		os.Exit(2)
	}
	return r
}

// regression is a test that passes directly but not through the proxy.
type regression struct{ key, note string }

// comparison is how the two runs differ: the lists the report prints.
type comparison struct {
	direct, proxy                                 *run
	width                                         int // of the package names in the lists
	regressions                                   []regression
	skippedProxy, bothFail, directOnlyFail, other []string // lines
	// Packages ok directly that fail through the proxy without a failing
	// test to show for it, and packages that fail in both runs.
	pkgRegressions, pkgBoth []string
}

func compareRuns(direct, proxy *run) *comparison {
	c := &comparison{direct: direct, proxy: proxy}
	keys := map[string]bool{}
	for _, r := range []*run{direct, proxy} {
		for k := range r.tests {
			keys[k] = true
		}
	}
	for k := range keys {
		d, x := direct.outcome(k), proxy.outcome(k)
		if p, _ := name(k); len(p) > c.width && (d != x || d == fail || d == unfinished) {
			c.width = len(p)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		c.compareTest(k)
	}
	c.comparePackages()
	return c
}

// name is a test's package, shortened, and name.
func name(k string) (string, string) {
	pkg, n, _ := strings.Cut(k, "\x00")
	return short(pkg), n
}

// line is a test's line in the lists, with a note.
func (c *comparison) line(k, note string) string {
	p, n := name(k)
	s := fmt.Sprintf("  %-*s  %s", c.width, p, n)
	if note != "" {
		s += "  [" + note + "]"
	}
	return s
}

// compareTest puts test k in the list its outcomes belong to, if any.
func (c *comparison) compareTest(k string) {
	d, p := c.direct.outcome(k), c.proxy.outcome(k)
	switch {
	case d == p:
		if d == fail || d == unfinished {
			note := ""
			if d == unfinished {
				note = "not finished in either run"
			}
			c.bothFail = append(c.bothFail, c.line(k, note))
		}
	case d == pass && (p == fail || p == unfinished || p == absent):
		note := ""
		switch p {
		case unfinished:
			note = "not finished through the proxy"
		case absent:
			note = "not run through the proxy"
		}
		c.regressions = append(c.regressions, regression{k, note})
	case d == pass && p == skip:
		c.skippedProxy = append(c.skippedProxy, c.line(k, ""))
	case (d == fail || d == unfinished) && (p == pass || p == skip):
		c.directOnlyFail = append(c.directOnlyFail, c.line(k, "direct "+d+", proxy "+p))
	case (d == fail || d == unfinished) && (p == fail || p == unfinished):
		c.bothFail = append(c.bothFail, c.line(k, "direct "+d+", proxy "+p))
	default:
		c.other = append(c.other, c.line(k, "direct "+d+", proxy "+p))
	}
}

// comparePackages finds the packages that fail through the proxy without
// a failing test: a package can fail so (a build error, a panic in
// TestMain or outside a test, a timeout); and those that fail in both.
func (c *comparison) comparePackages() {
	pkgs := map[string]bool{}
	for _, r := range []*run{c.direct, c.proxy} {
		for p := range r.pkgs {
			pkgs[p] = true
		}
	}
	// failingTests: the packages with a test that fails or does not finish
	// through the proxy, which says why the package failed.
	failingTests := map[string]bool{}
	for _, t := range c.proxy.tests {
		if t.outcome == fail || t.outcome == unfinished {
			failingTests[t.pkg] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		d, x := c.direct.pkgOutcome(p), c.proxy.pkgOutcome(p)
		dOK, xOK := d == pass || d == skip, x == pass || x == skip
		switch {
		case dOK && !xOK && !failingTests[p]:
			c.pkgRegressions = append(c.pkgRegressions, p)
		case !dOK && !xOK:
			c.pkgBoth = append(c.pkgBoth, p)
		}
	}
}

// failed reports whether something passes directly and fails through the
// proxy.
func (c *comparison) failed() bool { return len(c.regressions) > 0 || len(c.pkgRegressions) > 0 }

func (c *comparison) printCounts() {
	fmt.Println("counts: tests including subtests (top-level tests in parentheses)")
	fmt.Printf("  %-8s %-14s %-11s %-12s %-12s %s\n", "run", "pass", "fail", "skip", "not finished", "packages ok/failed")
	fmt.Println(c.direct.counts("direct"))
	fmt.Println(c.proxy.counts("proxy"))
	fmt.Println()
}

func (c *comparison) printLists() {
	fmt.Printf("pass directly, FAIL through the proxy (%d):\n", len(c.regressions))
	for _, r := range c.regressions {
		fmt.Println(c.line(r.key, r.note))
	}
	if len(c.pkgRegressions) > 0 {
		fmt.Printf("packages ok directly, FAILED through the proxy without a failing test (%d):\n", len(c.pkgRegressions))
		for _, p := range c.pkgRegressions {
			fmt.Printf("  %s (%s)\n", short(p), c.proxy.pkgOutcome(p))
		}
	}
	fmt.Println()
	printList("pass directly, skipped through the proxy (%d):\n", c.skippedProxy, false)
	printList("fail in both runs (the environment, or flaky) (%d):\n", c.bothFail, true)
	if len(c.pkgBoth) > 0 {
		fmt.Printf("packages failed in both runs (%d):\n", len(c.pkgBoth))
		for _, p := range c.pkgBoth {
			fmt.Printf("  %s (direct %s, proxy %s)\n", short(p), c.direct.pkgOutcome(p), c.proxy.pkgOutcome(p))
		}
	}
	printList("fail directly only (flaky?) (%d):\n", c.directOnlyFail, false)
	printList("other differences (%d):\n", c.other, false)
}

// printList prints a heading with the count of lines, and the lines; an
// empty list only when always.
func printList(heading string, lines []string, always bool) {
	if len(lines) > 0 || always {
		fmt.Printf(heading, len(lines))
		printLines(lines)
	}
}

// printDetails prints the output through the proxy of what fails there
// only: the last details lines of each (of a test that did not finish,
// the first).
func (c *comparison) printDetails(details int) {
	fmt.Println()
	fmt.Println("output through the proxy of what fails there only:")
	for _, r := range c.regressions {
		t := c.proxy.tests[r.key]
		if t == nil {
			continue
		}
		lines := interesting(t.output)
		if len(lines) == 0 {
			continue // a parent test whose subtests say why
		}
		p, n := name(r.key)
		fmt.Printf("--- %s %s (%s)\n", p, n, t.outcome)
		if t.outcome == unfinished {
			// A panic or a timeout: its message comes first, the goroutines after.
			printLines(head(lines, details))
		} else {
			printLines(tail(lines, details))
		}
	}
	for _, p := range c.pkgRegressions {
		fmt.Printf("--- package %s (%s)\n", short(p), c.proxy.pkgOutcome(p))
		var lines []string
		if pr := c.proxy.pkgs[p]; pr != nil {
			lines = interesting(pr.output)
		}
		lines = append(lines, c.proxy.builds[p]...)
		printLines(tail(lines, details))
	}
}

func printLines(lines []string) {
	for _, l := range lines {
		fmt.Println(l)
	}
}
