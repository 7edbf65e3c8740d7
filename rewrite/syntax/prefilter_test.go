package syntax

import (
	"fmt"
	"strings"
	"testing"
)

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
		st := Scan(c.sql, 100, 1000, true)
		if st.Depth != c.depth || fmt.Sprint(st.Params) != fmt.Sprint(c.params) {
			t.Errorf("scan(%q) = depth %d, params %v; want %d, %v", c.sql, st.Depth, st.Params, c.depth, c.params)
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
		"SELECT d, count(*) FROM (SELECT u, min(t)::date AS d FROM e GROUP BY u) x GROUP BY d",
		"cOuNt dIsTiNcT", "coun", "pgsketc", "\xc3count\x80distinct", "count group mi",
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
			has("group") && (has("limit") || has("having") || has("min"))) || has("pgsketch")
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
