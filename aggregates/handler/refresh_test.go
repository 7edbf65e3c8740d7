package handler

import (
	"fmt"
	"testing"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite"
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

func TestCatalogCache(t *testing.T) {
	var cc catalogCache
	a, b := catalog.NewSnapshot(nil), catalog.NewSnapshot(nil)
	if cc.get("db", "x") != nil {
		t.Fatal("empty cache answered")
	}
	cc.put("db", "x", a)
	cc.put("other", "x", b)
	if cc.get("db", "x") != a || cc.get("other", "x") != b || cc.get("db", "y") != nil {
		t.Fatal("wrong snapshot")
	}
	for i := range maxSnapshots + 1 {
		cc.put("db", fmt.Sprint(i), a)
	}
	if n := len(cc.m["db"]); n > maxSnapshots {
		t.Fatalf("%d snapshots kept, want at most %d", n, maxSnapshots)
	}
}

// TestPlanStatement: the one planning path answers, for every protocol,
// with a plan or a reason to pass the statement through.
func TestPlanStatement(t *testing.T) {
	h := New(nil)
	st := sessionSettings{rw: rewrite.Session{Approx: true, TimeZone: "UTC"}}
	none := catalog.NewSnapshot(nil)
	if pd := h.planStatement("SELECT 1; SELECT count(DISTINCT user_id) FROM events", none, st); !pd.multi || pd.plan != nil {
		t.Errorf("two statements: %+v", pd)
	}
	if pd := h.planStatement("SELECT count(DISTINCT user_id) FROM events", none, st); pd.plan != nil || pd.pass == "" {
		t.Errorf("no rollup: %+v", pd)
	}
	if pd := h.planStatement("SELECT approx_count_distinct(user_id) FROM events", none, st); pd.plan == nil || pd.plan.Kind != rewrite.Substitute {
		t.Errorf("approx_count_distinct without a rollup: %+v, want a substitute plan", pd)
	}
}
