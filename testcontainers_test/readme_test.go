package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

// readmeFiles are the pages whose code blocks TestReadme runs: the README
// and the reference pages it leads to.
var readmeFiles = []string{"README.md", "docs/proxy.md", "docs/rollups.md", "docs/queries.md", "docs/testing.md", "docs/limitations.md"}

// readmeBlock is one fenced code block of one of readmeFiles.
type readmeBlock struct {
	file  string // the page, from the repository's root
	line  int    // of the opening fence
	lang  string // after the fence
	body  string
	setup string // from a preceding <!-- readme test setup: ... --> comment
	// teardown, from <!-- readme test teardown: ... --> after the setup,
	// undoes what the block leaves outside its database (roles).
	teardown string
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	re := regexp.MustCompile("(?s)(<!-- readme test setup: ([^\n]*?) -->\n)?(<!-- readme test teardown: ([^\n]*?) -->\n)?```(\\w*)\n(.*?)```")
	var out []readmeBlock
	for _, file := range readmeFiles {
		b, err := os.ReadFile("../" + file)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			blk := readmeBlock{file: file, line: strings.Count(s[:m[10]], "\n") + 1, lang: s[m[10]:m[11]], body: s[m[12]:m[13]]}
			if m[4] >= 0 {
				blk.setup = s[m[4]:m[5]]
			}
			if m[8] >= 0 {
				blk.teardown = s[m[8]:m[9]]
			}
			out = append(out, blk)
		}
	}
	return out
}

// mask makes outputs comparable across data sizes and runs: every
// duration (886ms, 1.244s, 2m3.5s) becomes 9ms, every other number 9, runs
// of blanks one space.
func mask(s string) string {
	s = durationRE.ReplaceAllString(s, "9ms")
	s = regexp.MustCompile(`[0-9]+`).ReplaceAllString(s, "9")
	s = regexp.MustCompile(`-{2,}`).ReplaceAllString(s, "--") // psql's rules follow the widths
	return strings.Join(strings.Fields(s), " ")
}

var durationRE = regexp.MustCompile(`\b(?:[0-9]+(?:\.[0-9]+)?(?:h|m|s|ms|µs|ns))+\b`)

// TestReadme runs every command and SQL snippet of README.md and the
// reference pages it leads to (readmeFiles), so that the
// README cannot drift from the code:
//   - ```sh blocks of make targets: `make -n` must expand each (make test is
//     what runs this test; what make run runs is TestDemoStopsOnSIGINT);
//   - blocks of `pgsketch-proxy <command>` synopses: each command's --help
//     must list every flag the line shows;
//   - transcripts with `$ ` commands: each runs in bash, against a fresh
//     database with the demo's events table ($DSN) and a proxy in front of it
//     ($PROXY_URL, pgsketch.approx off as in make run), after the block's setup
//     comment; every line of the README's output must appear in the actual
//     output, numbers masked;
//   - transcripts with `=> ` psql input: the SQL runs with psql through the
//     proxy, and the same output check applies;
//   - ```sql blocks: run with psql -f through the proxy, stopping on an error.
//
// Blocks of output only (no prompt) are not commands.
func TestReadme(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	blocks := readmeBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("found %d code blocks in %v", len(blocks), readmeFiles)
	}
	ran := 0
	for _, blk := range blocks {
		switch {
		case blk.lang == "sh":
			for _, l := range strings.Split(strings.TrimSpace(blk.body), "\n") {
				cmd := strings.TrimSpace(strings.SplitN(l, "#", 2)[0])
				target, ok := strings.CutPrefix(cmd, "make ")
				if !ok {
					t.Errorf("%s:%d: a shell line the test cannot run: %q", blk.file, blk.line, l)
					continue
				}
				out, err := exec.Command("make", "-n", "-C", "..", target).CombinedOutput()
				if err != nil {
					t.Errorf("%s:%d: make -n %s: %v\n%s", blk.file, blk.line, target, err, out)
				}
				if target == "run" && !strings.Contains(string(out), "pgsketch-proxy demo") {
					t.Errorf("%s:%d: make run does not run pgsketch-proxy demo:\n%s", blk.file, blk.line, out)
				}
				ran++
			}
		case blk.lang == "sql":
			env := readmeEnv(t, bin, blk.setup)
			if blk.teardown != "" {
				t.Cleanup(func() {
					if out, err := bash(t, bin, env, blk.teardown); err != nil {
						t.Errorf("teardown %q: %v\n%s", blk.teardown, err, out)
					}
				})
			}
			// As a file, as someone pasting it into psql: one statement at a time.
			f := filepath.Join(t.TempDir(), "block.sql")
			if err := os.WriteFile(f, []byte(blk.body), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, errOut, code := psql(t, env.proxyURL, "-v", "ON_ERROR_STOP=1", "-f", f); code != 0 {
				t.Errorf("%s:%d: SQL block failed (exit %d):\n%s\n%s", blk.file, blk.line, code, out, errOut)
			}
			ran++
		case strings.HasPrefix(blk.body, "$ ") || strings.HasPrefix(blk.body, "=> "):
			ran += runTranscript(t, bin, blk)
		case strings.HasPrefix(blk.body, "pgsketch-proxy "):
			for _, l := range strings.Split(strings.TrimSpace(blk.body), "\n") {
				f := strings.Fields(strings.SplitN(l, "#", 2)[0])
				args := []string{f[1], "--help"}
				if strings.HasPrefix(f[1], "<") { // pgsketch-proxy <command> --help
					args = []string{"--help"}
				}
				out, err := exec.Command(bin, args...).CombinedOutput()
				if err != nil {
					t.Errorf("%s:%d: pgsketch-proxy %s --help: %v\n%s", blk.file, blk.line, f[1], err, out)
					continue
				}
				// A command with actions (rollup create|refresh|...): every
				// action's help together.
				if len(f) > 2 && strings.Contains(f[2], "|") && f[1] == "rollup" {
					for _, action := range strings.Split(f[2], "|") {
						o, err := exec.Command(bin, f[1], action, "--help").CombinedOutput()
						if err != nil {
							t.Errorf("%s:%d: pgsketch-proxy %s %s --help: %v\n%s", blk.file, blk.line, f[1], action, err, o)
						}
						out = append(out, o...)
					}
				}
				for _, w := range f[2:] {
					w = strings.Trim(w, "[]")
					if strings.HasPrefix(w, "--") && !strings.Contains(string(out), w) {
						t.Errorf("%s:%d: pgsketch-proxy %s has no flag %s", blk.file, blk.line, f[1], w)
					}
				}
				ran++
			}
		}
	}
	t.Logf("ran %d commands and snippets of %v", ran, readmeFiles)
}

type readmeEnvironment struct{ dsn, proxyURL string }

// readmeEnv makes a fresh database with the catalog and a 100 000-row
// events table, a proxy in front of it, and runs setup (shell) there.
func readmeEnv(t *testing.T, bin, setup string) readmeEnvironment {
	t.Helper()
	db, _ := eventsDB(t, 100_000, 90)
	p := startProxy(t, server.adminURL) // as make run: pgsketch.approx off
	env := readmeEnvironment{dsn: db.DSN, proxyURL: p.URL(db.DSN)}
	if setup != "" {
		if out, err := bash(t, bin, env, setup); err != nil {
			t.Fatalf("setup %q: %v\n%s", setup, err, out)
		}
	}
	return env
}

// bash runs script with pgsketch-proxy (the binary under test) and psql on
// PATH and DSN and PROXY_URL set, returning stdout and stderr together.
func bash(t *testing.T, bin string, env readmeEnvironment, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = append(os.Environ(), "DSN="+env.dsn, "PROXY_URL="+env.proxyURL,
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "PGCONNECT_TIMEOUT=20")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runTranscript runs the commands of a `$ ` or `=> ` transcript block and
// checks the README's output lines appear in what they print.
func runTranscript(t *testing.T, bin string, blk readmeBlock) int {
	t.Helper()
	env := readmeEnv(t, bin, blk.setup)
	lines := strings.Split(strings.TrimRight(blk.body, "\n"), "\n")
	ran := 0
	// A psql session: its statements run in one session, as typed.
	var script strings.Builder
	var scriptWant []string
	for i := 0; i < len(lines); {
		l := lines[i]
		var command string
		psqlInput := strings.HasPrefix(l, "=> ")
		switch {
		case strings.HasPrefix(l, "$ "):
			command = strings.TrimPrefix(l, "$ ")
		case psqlInput:
			command = strings.TrimPrefix(l, "=> ")
		default:
			t.Fatalf("%s:%d: output before any command: %q", blk.file, blk.line, l)
		}
		i++
		// Continuation: a trailing backslash, an open quote, or SQL up to ';'.
		for i < len(lines) && (strings.HasSuffix(command, "\\") || strings.Count(command, `"`)%2 == 1 ||
			psqlInput && !strings.HasSuffix(strings.TrimSpace(command), ";")) {
			command += "\n" + lines[i]
			i++
		}
		var want []string
		for i < len(lines) && !strings.HasPrefix(lines[i], "$ ") && !strings.HasPrefix(lines[i], "=> ") {
			if strings.TrimSpace(lines[i]) != "" {
				want = append(want, lines[i])
			}
			i++
		}
		var out string
		var err error
		if psqlInput {
			script.WriteString(command + "\n")
			scriptWant = append(scriptWant, want...)
			ran++
			continue
		} else {
			out, err = bash(t, bin, env, command)
		}
		if err != nil {
			t.Errorf("%s:%d: %s\nfailed: %v\n%s", blk.file, blk.line, command, err, out)
			continue
		}
		got := map[string]bool{}
		for _, o := range strings.Split(out, "\n") {
			got[mask(o)] = true
		}
		for _, w := range want {
			if !got[mask(w)] {
				t.Errorf("%s:%d: %s\nprinted no line like %q; it printed:\n%s", blk.file, blk.line, command, w, out)
			}
		}
		ran++
	}
	if script.Len() > 0 {
		f := filepath.Join(t.TempDir(), "session.sql")
		if err := os.WriteFile(f, []byte(script.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		o, e, code := psql(t, env.proxyURL, "-v", "ON_ERROR_STOP=1", "-f", f)
		out := o + e
		if code != 0 {
			t.Errorf("%s:%d: psql session failed (exit %d):\n%s", blk.file, blk.line, code, out)
			return ran
		}
		got := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			// psql -f prefixes notices with the file and line.
			l = regexp.MustCompile(`^psql:[^:]*:[0-9]+: `).ReplaceAllString(l, "")
			got[mask(l)] = true
		}
		for _, w := range scriptWant {
			if !got[mask(w)] {
				t.Errorf("%s:%d: the psql session printed no line like %q; it printed:\n%s", blk.file, blk.line, w, out)
			}
		}
	}
	return ran
}

// TestDocLinks: every relative link of the README, CONTRIBUTING.md and the
// pages under docs/ names a file of the repository and, into a Markdown
// page, a heading it has (as GitHub makes anchors), so that moving a
// section cannot leave a link behind.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../CONTRIBUTING.md")
	fence := regexp.MustCompile("(?s)```.*?```")
	heading := regexp.MustCompile(`(?m)^#{1,6} (.*)$`)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		a, seen := map[string]bool{}, map[string]int{}
		for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
			id := strings.Map(func(r rune) rune {
				switch {
				case r == ' ':
					return '-'
				case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
					return unicode.ToLower(r)
				}
				return -1
			}, strings.TrimSpace(m[1]))
			if n := seen[id]; n > 0 {
				a[id+"-"+strconv.Itoa(n)] = true
			} else {
				a[id] = true
			}
			seen[id]++
		}
		anchors[page] = a
		return a
	}
	n := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, ":") {
				continue // a URL
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := page
			if path != "" {
				dest = filepath.Join(filepath.Dir(page), path)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
				t.Errorf("%s: link %s: %s has no such heading", page, target, dest)
			}
			n++
		}
	}
	if n < 20 {
		t.Fatalf("checked %d links", n)
	}
	t.Logf("%d links checked", n)
}
