package rewrite

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// FuzzRewrite checks that no input panics, that the caps hold (the parser
// only ever sees texts within MaxQueryBytes whose trees nest far less deep
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
	parseHook = func(sql string) { parsed = append(parsed, sql) }
	f.Cleanup(func() { parseHook = nil })
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
			stmts, err := Split(sql)
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
			if len(p) > MaxQueryBytes {
				t.Fatalf("parsed a text of %d bytes", len(p))
			}
			// A tree level is a few JSON levels; the parser dies near
			// 25,000 tree levels.
			if d, err := treeDepth(p); err == nil && d > 4*(MaxNestingDepth+MaxTokens)+100 {
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
			_, err := parseSQL(sql)
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
		var le *LimitError
		if !errors.As(r.Err, &le) || r.Plan != nil {
			t.Errorf("%s: want a LimitError, got %+v", name, r)
		}
	}
	long := "SELECT count(DISTINCT user_id) FROM events WHERE country IN ('" + strings.Repeat("x", MaxQueryBytes) + "')"
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

// TestScan checks the lexing of the depth and token scanner.
func TestScan(t *testing.T) {
	for _, c := range []struct {
		sql    string
		depth  int
		params []int
	}{
		{"SELECT ((1))", 2, nil},
		{"SELECT '(('", 0, nil},
		{"SELECT 'it''s ((' , ($1)", 1, []int{1}},
		{`SELECT E'\'((' , ($2)`, 1, []int{2}},
		{`SELECT e'\\' , (($1))`, 2, []int{1}},
		{`SELECT '\' , ((1))`, 2, nil},
		{"SELECT $$(($1$$, ($3)", 1, []int{3}},
		{"SELECT $tag$ (( $$ (( $tag$, [$2]", 1, []int{2}},
		{"SELECT a$b$c, ((1))", 2, nil},
		{"SELECT \"((\" , (1)", 1, nil},
		{"SELECT 1 -- ((\n, (1)", 1, nil},
		{"SELECT /* (( /* (( */ (( */ (1)", 1, nil},
		{"SELECT x'((', b'((' , date '((', ($10)", 1, []int{10}},
		{"SELECT somee'((' , (1)", 1, nil},
	} {
		st := scan(c.sql, 100, 1000, true)
		if st.depth != c.depth || fmt.Sprint(st.params) != fmt.Sprint(c.params) {
			t.Errorf("scan(%q) = depth %d, params %v; want %d, %v", c.sql, st.depth, st.params, c.depth, c.params)
		}
	}
}

func TestPrefilter(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT count(DISTINCT x) FROM t":                                    true,
		"select COUNT ( distinct x ) from t":                                 true,
		"SELECT APPROX_COUNT_DISTINCT(x)":                                    true,
		"SELECT pgsketch.rollups()":                                          true,
		"SELECT * FROM users WHERE id = $1":                                  false,
		"SELECT count(*) FROM t":                                             false,
		"SELECT DISTINCT x FROM t":                                           false,
		"SELECT count(*) FROM (SELECT a FROM t INTERSECT SELECT a FROM u) x": true,
		"SELECT a FROM t EXCEPT SELECT a FROM u":                             false,
		"":                                                                   false,
		"BEGIN":                                                              false,
		"UPDATE accounts SET n = n + 1 WHERE id = $1":                        false,
	} {
		if got := Prefilter(sql); got != want {
			t.Errorf("Prefilter(%q) = %v, want %v", sql, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { sink = Prefilter("SELECT * FROM users WHERE id = $1") }); n != 0 {
		t.Errorf("Prefilter allocates %v times", n)
	}
}

var sink bool

// FuzzPrefilter checks the one-pass prefilter against its rule written
// plainly: each word searched for on its own in an ASCII-lowered copy.
func FuzzPrefilter(f *testing.F) {
	for _, s := range []string{
		"SELECT count(DISTINCT x) FROM t", "SELECT APPROX_COUNT_DISTINCT(x)", "select pgsketch.refresh()",
		"SELECT abalance FROM pgbench_accounts WHERE aid = 1;", "SELECT a, count(*) FROM t GROUP BY a LIMIT 5",
		"SELECT a, COUNT(*) FROM t GROUP BY a HAVING count(*) > 1", "SELECT count(*) FROM (SELECT 1 EXCEPT SELECT 2) x",
		"cOuNt dIsTiNcT", "coun", "pgsketc", "\xc3count\x80distinct",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		lower := []byte(sql)
		for i, c := range lower {
			if c >= 'A' && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		has := func(w string) bool { return strings.Contains(string(lower), w) }
		want := has("count") && (has("distinct") || has("intersect") || has("except") ||
			has("group") && (has("limit") || has("having"))) || has("pgsketch")
		if got := Prefilter(sql); got != want {
			t.Errorf("Prefilter(%q) = %v, want %v", sql, got, want)
		}
	})
}

// BenchmarkPrefilter: the relay asks it of every simple-protocol query
// (pgbench -S's here, which holds "count" inside "accounts").
func BenchmarkPrefilter(b *testing.B) {
	sql := "SELECT abalance FROM pgbench_accounts WHERE aid = 123456;"
	b.SetBytes(int64(len(sql)))
	for b.Loop() {
		sink = Prefilter(sql)
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
