package handler

import (
	"testing"
)

func TestParseRefresh(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want refreshCall
		ok   bool
	}{
		{"SELECT pgsketch.refresh_rollup('daily')", refreshCall{name: "daily"}, true},
		{"  select PGSKETCH . Refresh_Rollup ( 'daily' ) ; ", refreshCall{name: "daily"}, true},
		{"SELECT pgsketch.refresh_rollup('daily', true)", refreshCall{name: "daily", full: true}, true},
		{"SELECT pgsketch.refresh_rollup('daily', full_rebuild => TRUE)", refreshCall{name: "daily", full: true}, true},
		{"SELECT pgsketch.refresh_rollup('daily', from_time => '2026-01-01', to_time => '2026-01-02')",
			refreshCall{name: "daily", from: "2026-01-01", to: "2026-01-02"}, true},
		{"SELECT pgsketch.refresh_rollup('it''s')", refreshCall{name: "it's"}, true},
		{"SELECT pgsketch.refresh_rollup('a,b')", refreshCall{name: "a,b"}, true},
		{"SELECT pgsketch.refresh_rollup($1)", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('daily', 'yes')", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup(name => 'a', 'b')", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a', name => 'b')", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a', bogus => 'b')", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a'); SELECT 1", refreshCall{}, false},
		{"SELECT 1, pgsketch.refresh_rollup('a')", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('a', true, '1', '2', '3')", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup('unterminated)", refreshCall{}, false},
		{"SELECT pgsketch.refresh_rollup()", refreshCall{}, false},
	} {
		got, ok := parseRefresh(c.sql)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("parseRefresh(%q) = %v, %v; want %v, %v", c.sql, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParseRefresh: any text is recognized or not, never a panic, and the
// handler intercepts whatever it recognizes.
func FuzzParseRefresh(f *testing.F) {
	f.Add("SELECT pgsketch.refresh_rollup('daily', from_time => '2026-01-01')")
	f.Add("select pgsketch.refresh_rollup('a''b', true)")
	f.Fuzz(func(t *testing.T, sql string) {
		_, ok := parseRefresh(sql)
		if got := New(nil).Intercept([]byte(sql)); ok && !got {
			t.Fatalf("Intercept = %v, parseRefresh ok = %v", got, ok)
		}
	})
}
