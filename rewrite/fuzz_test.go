package rewrite

import (
	"strings"
	"testing"
)

// FuzzRewrite checks that no input panics, that the caps hold (a text over
// them is refused before parsing) and that whatever is planned parses again.
// The seed corpus is every golden case plus testdata/fuzz/FuzzRewrite.
func FuzzRewrite(f *testing.F) {
	for _, file := range goldenFiles(f) {
		cases, _ := readGolden(f, file)
		for _, c := range cases {
			f.Add(c.sql, c.session(f).TimeZone, c.session(f).Approx)
		}
	}
	snap := testCatalog()
	f.Fuzz(func(t *testing.T, sql, tz string, approx bool) {
		r := Rewrite(sql, snap, Session{TimeZone: tz, Approx: approx})
		if r.Plan == nil && r.Reason == "" {
			t.Fatalf("passthrough without a reason for %q", sql)
		}
		if r.Plan != nil {
			if len(sql) > MaxQueryBytes || nestingDepth(sql, MaxNestingDepth) > MaxNestingDepth {
				t.Fatalf("planned a text over the caps: %q", sql)
			}
			checkParses(t, "fuzz", r)
			_ = r.Plan.String()
		}
	})
}

func TestCaps(t *testing.T) {
	snap := testCatalog()
	long := "SELECT count(DISTINCT user_id) FROM events WHERE country IN ('" + strings.Repeat("x", MaxQueryBytes) + "')"
	if r := Rewrite(long, snap, Session{Approx: true}); r.Err == nil || r.Plan != nil {
		t.Errorf("long text: want a LimitError, got %+v", r)
	}
	deep := "SELECT count(DISTINCT user_id) FROM events WHERE " + strings.Repeat("(", 10000) + "true" + strings.Repeat(")", 10000)
	if r := Rewrite(deep, snap, Session{Approx: true}); r.Err == nil {
		t.Errorf("deep text: want a LimitError, got %+v", r)
	}
	// Parentheses inside literals, quoted identifiers and comments do not
	// count.
	lit := "SELECT count(DISTINCT user_id) FROM events WHERE country = '" + strings.Repeat("(", 500) + "' -- " + strings.Repeat("(", 500) + "\n/* ((( /* ((( */ */"
	if r := Rewrite(lit, snap, Session{Approx: true}); r.Plan == nil {
		t.Errorf("parentheses in literals counted: %s", r.Reason)
	}
	// Long operator chains are refused by the parser, not fatal to it.
	chain := "SELECT count(DISTINCT user_id) FROM events WHERE app_version = " + strings.Repeat("1+", 20000) + "1"
	if r := Rewrite(chain, snap, Session{Approx: true}); r.Plan != nil {
		t.Errorf("operator chain planned")
	}
}

func TestPrefilter(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT count(DISTINCT x) FROM t":             true,
		"select COUNT ( distinct x ) from t":          true,
		"SELECT APPROX_COUNT_DISTINCT(x)":             true,
		"SELECT pgsketch.rollups()":                   true,
		"SELECT * FROM users WHERE id = $1":           false,
		"SELECT count(*) FROM t":                      false,
		"SELECT DISTINCT x FROM t":                    false,
		"":                                            false,
		"BEGIN":                                       false,
		"UPDATE accounts SET n = n + 1 WHERE id = $1": false,
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
