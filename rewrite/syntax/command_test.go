package syntax

import (
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want RefreshCall
		ok   bool
	}{
		{"SELECT pgsketch.refresh_rollup('daily')", RefreshCall{Name: "daily"}, true},
		{"  select PGSKETCH . Refresh_Rollup ( 'daily' ) ; ", RefreshCall{Name: "daily"}, true},
		{"SELECT pgsketch.refresh_rollup('daily', true)", RefreshCall{Name: "daily", Full: true}, true},
		{"SELECT pgsketch.refresh_rollup('daily', false)", RefreshCall{Name: "daily"}, true},
		{"SELECT pgsketch.refresh_rollup('daily', full_rebuild => TRUE)", RefreshCall{Name: "daily", Full: true}, true},
		{"SELECT pgsketch.refresh_rollup('daily', from_time => '2026-01-01', to_time => '2026-01-02')",
			RefreshCall{Name: "daily", From: "2026-01-01", To: "2026-01-02"}, true},
		{"SELECT pgsketch.refresh_rollup(to_time => '2026-01-02', name => 'daily')", RefreshCall{Name: "daily", To: "2026-01-02"}, true},
		{"SELECT pgsketch.refresh_rollup('it''s')", RefreshCall{Name: "it's"}, true},
		{"SELECT pgsketch.refresh_rollup('a,b') -- a comment", RefreshCall{Name: "a,b"}, true},
		{"SELECT pgsketch.refresh_rollup($1)", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('daily', 'yes')", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup(NULL)", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup(name => 'a', 'b')", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a', name => 'b')", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a', bogus => 'b')", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup(full_rebuild => true)", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a'); SELECT 1", RefreshCall{}, false},
		{"SELECT 1, pgsketch.refresh_rollup('a')", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a') AS n", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a') FROM events", RefreshCall{}, false},
		{"SELECT refresh_rollup('a')", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a', true, '1', '2', '3')", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('unterminated)", RefreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup()", RefreshCall{}, false},
	} {
		got, ok := ParseCommand(c.sql)
		if ok != c.ok || ok && (got.Refresh == nil || *got.Refresh != c.want) {
			t.Errorf("ParseCommand(%q) = %+v, %v; want %+v, %v", c.sql, got.Refresh, ok, c.want, c.ok)
		}
	}
	for sql, want := range map[string]string{
		"SHOW pgsketch.approx": "approx", "show PGSKETCH.merge;": "merge", " SHOW pgsketch.topk ": "topk",
		"SHOW pgsketch.other": "", "SHOW TimeZone": "", "SHOW pgsketch.approx; SHOW pgsketch.merge": "",
	} {
		got, ok := ParseCommand(sql)
		if ok != (want != "") || got.Show != want {
			t.Errorf("ParseCommand(%q) = %+v, %v; want SHOW %q", sql, got, ok, want)
		}
	}
}

// TestParseCommandCaps: a text over the caps checked before parsing is no
// command, and is not parsed (the C parser exhausts the stack on deep
// nesting).
func TestParseCommandCaps(t *testing.T) {
	deep := "SHOW pgsketch.approx; SELECT " + strings.Repeat("(", MaxNestingDepth+1) + "1" + strings.Repeat(")", MaxNestingDepth+1)
	parsed := false
	ParseHook = func(string) { parsed = true }
	defer func() { ParseHook = nil }()
	if _, ok := ParseCommand(deep); ok || parsed {
		t.Errorf("ParseCommand of a text nesting deeper than %d: ok %v, parsed %v", MaxNestingDepth, ok, parsed)
	}
}

// FuzzParseCommand: any text is recognized or not, never a panic, and
// the prefilter lets through whatever is recognized.
func FuzzParseCommand(f *testing.F) {
	f.Add("SELECT pgsketch.refresh_rollup('daily', from_time => '2026-01-01')")
	f.Add("select pgsketch.refresh_rollup('a''b', true)")
	f.Add("SHOW pgsketch.merge")
	f.Fuzz(func(t *testing.T, sql string) {
		if _, ok := ParseCommand(sql); ok && !Prefilter(sql) {
			t.Fatalf("recognized, but the prefilter turns it away: %q", sql)
		}
	})
}
