package rewrite

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// FuzzRewrite checks that no input panics, that the caps hold (the parser
// only ever sees texts within syntax.MaxQueryBytes whose trees nest far less deep
// than the depth that overflows its stack, measured on the parser's own
// tree) and that whatever is planned parses again. The seed corpus is every
// golden case plus testdata/fuzz/FuzzRewrite.
func FuzzRewrite(f *testing.F) {
	for _, file := range goldenFiles(f) {
		cases, _ := readGolden(f, file)
		for _, c := range cases {
			f.Add(c.sql, c.session(f).TimeZone, c.session(f).Approx)
		}
	}
	snap := testCatalog()
	var parsed []string
	syntax.ParseHook = func(sql string) { parsed = append(parsed, sql) }
	f.Cleanup(func() { syntax.ParseHook = nil })
	f.Fuzz(func(t *testing.T, sql, tz string, approx bool) {
		parsed = parsed[:0]
		r := Rewrite(sql, snap, Session{TimeZone: tz, Approx: approx})
		if r.Plan == nil && r.Reason == "" {
			t.Fatalf("passthrough without a reason for %q", sql)
		}
		if strings.HasPrefix(r.Reason, "internal error") {
			t.Fatalf("panic inside Rewrite for %q: %s", sql, r.Reason)
		}
		if r.Multi {
			stmts, err := syntax.Split(sql)
			if err != nil || len(stmts) < 2 {
				t.Fatalf("Split of a text Rewrite found several statements in: %d statements, %v\n%q", len(stmts), err, sql)
			}
			for _, st := range stmts {
				if st.SQL == "" || !strings.Contains(sql, st.SQL) {
					t.Fatalf("Split gave %q, not a piece of %q", st.SQL, sql)
				}
			}
		}
		for _, p := range parsed {
			if len(p) > syntax.MaxQueryBytes {
				t.Fatalf("parsed a text of %d bytes", len(p))
			}
			// A tree level is a few JSON levels; the parser dies near
			// 25,000 tree levels.
			if d, err := syntax.TreeDepth(p); err == nil && d > 4*(syntax.MaxNestingDepth+syntax.MaxTokens)+100 {
				t.Fatalf("parsed a tree %d deep: %q", d, p)
			}
		}
		if r.Plan != nil {
			checkParses(t, "fuzz", r)
			_ = r.Plan.String()
		}
	})
}

// dangerousInputs are texts that crash the C parser (overflowing its stack,
// which kills the process) or come close: the caps must refuse every one
// before parsing.
func dangerousInputs() map[string]string {
	pre := "SELECT count(DISTINCT user_id) FROM events WHERE app_version = "
	return map[string]string{
		"plus chain":    pre + strings.Repeat("1+", 25000) + "1",
		"cast chain":    pre + "1" + strings.Repeat("::int", 12000),
		"join chain":    "SELECT count(DISTINCT user_id) FROM events" + strings.Repeat(" JOIN a ON true", 4000),
		"collate chain": "SELECT count(DISTINCT user_id) FROM events WHERE country = 'a'" + strings.Repeat(" COLLATE \"C\"", 5000),
		"at chain":      "SELECT count(DISTINCT user_id) FROM events WHERE created_at = now()" + strings.Repeat(" AT TIME ZONE 'UTC'", 3000),
		"parentheses":   pre + strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000),
		"brackets":      pre + "ARRAY" + strings.Repeat("[", 5000) + "1" + strings.Repeat("]", 5000),
		// Parentheses hidden from a scanner that misreads escape strings
		// and dollar quotes.
		"escape string": pre + "1 AND country = E'\\'' " + strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000) + " --'",
		"dollar quote":  pre + "1 AND country = $$'$$ " + strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000) + " --'",
		"dollar tag":    pre + "1 AND country = $a$'$a$ " + strings.Repeat("(", 10000) + "1" + strings.Repeat(")", 10000) + " --'",
	}
}

// TestCaps checks that the dangerous inputs are refused before parsing, and
// proves that they are dangerous and that Rewrite survives them by running
// each in a child process (a crash there fails the test instead of killing
// it).
func TestCaps(t *testing.T) {
	if name := os.Getenv("PGSKETCH_REWRITE_CAPS_CHILD"); name != "" {
		sql := dangerousInputs()[name]
		if os.Getenv("PGSKETCH_REWRITE_CAPS_PARSE") != "" {
			// Straight into the parser, past the caps.
			_, err := syntax.Parse(sql)
			fmt.Println("parsed, error:", err != nil)
			return
		}
		r := Rewrite(sql, testCatalog(), Session{TimeZone: "UTC", Approx: true})
		fmt.Println("survived:", r.Reason)
		return
	}
	snap := testCatalog()
	for name, sql := range dangerousInputs() {
		r := Rewrite(sql, snap, Session{TimeZone: "UTC", Approx: true})
		var le *syntax.LimitError
		if !errors.As(r.Err, &le) || r.Plan != nil {
			t.Errorf("%s: want a LimitError, got %+v", name, r)
		}
	}
	long := "SELECT count(DISTINCT user_id) FROM events WHERE country IN ('" + strings.Repeat("x", syntax.MaxQueryBytes) + "')"
	if r := Rewrite(long, snap, Session{Approx: true}); r.Err == nil || r.Plan != nil {
		t.Errorf("long text: want a LimitError, got %+v", r)
	}
	// Parentheses inside literals, quoted identifiers and comments do not
	// count, nor do long IN lists of literals.
	for _, sql := range []string{
		"SELECT count(DISTINCT user_id) FROM events WHERE country = '" + strings.Repeat("(", 500) + "' -- " + strings.Repeat("(", 500) + "\n/* ((( /* ((( */ */",
		"SELECT count(DISTINCT user_id) FROM events WHERE country = E'\\'" + strings.Repeat("(", 500) + "'",
		"SELECT count(DISTINCT user_id) FROM events WHERE country = $$" + strings.Repeat("(", 500) + "$$ OR country = $x$" + strings.Repeat("(", 500) + "$x$",
		"SELECT count(DISTINCT user_id) FROM events WHERE app_version IN (" + strings.Repeat("1, ", 10000) + "2)",
	} {
		if r := Rewrite(sql, snap, Session{TimeZone: "UTC", Approx: true}); r.Plan == nil {
			t.Errorf("harmless text refused: %s", r.Reason)
		}
	}
	if testing.Short() {
		return
	}
	// In child processes: the parser alone crashes on the plus chain (so
	// the test guards a real danger), and Rewrite survives every input.
	run := func(name string, parse bool) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCaps$")
		cmd.Env = append(os.Environ(), "PGSKETCH_REWRITE_CAPS_CHILD="+name)
		if parse {
			cmd.Env = append(cmd.Env, "PGSKETCH_REWRITE_CAPS_PARSE=1")
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("plus chain", true); err == nil && strings.Contains(out, "parsed") {
		t.Logf("the parser survived the plus chain in this environment; the cap is only a margin here")
	} else {
		t.Logf("the parser alone dies on the plus chain: %v", err)
	}
	for name := range dangerousInputs() {
		out, err := run(name, false)
		if err != nil || !strings.Contains(out, "survived:") {
			t.Errorf("%s: Rewrite in a child process: %v\n%.500s", name, err, out)
		}
	}
}

func TestDeterministic(t *testing.T) {
	snap := testCatalog()
	for _, file := range goldenFiles(t) {
		cases, _ := readGolden(t, file)
		for _, c := range cases {
			a := output(Rewrite(c.sql, snap, c.session(t)))
			b := output(Rewrite(c.sql, snap, c.session(t)))
			if a != b {
				t.Fatalf("%s:%d: two runs differ", c.file, c.line)
			}
		}
	}
}
