package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite"
)

// TestDecide: the one planning path answers, for every protocol, with a
// plan or a reason to pass the statement through.
func TestDecide(t *testing.T) {
	h := New(nil)
	v := view{st: sessionSettings{rw: rewrite.Session{Approx: true, TimeZone: "UTC"}}, snap: catalog.NewSnapshot(nil)}
	if vd := h.decide(v, statement{sql: "SELECT 1; SELECT count(DISTINCT user_id) FROM events"}); !vd.multi || vd.plan != nil {
		t.Errorf("two statements: %+v", vd)
	}
	if vd := h.decide(v, statement{sql: "SELECT count(DISTINCT user_id) FROM events"}); vd.plan != nil || vd.pass == "" {
		t.Errorf("no rollup: %+v", vd)
	}
	sub := statement{sql: "SELECT approx_count_distinct(user_id) FROM events"}
	if vd := h.decide(v, sub); vd.substitute() == nil {
		t.Errorf("approx_count_distinct without a rollup: %+v, want a substitute plan", vd)
	}
	sub.inText = true
	if vd := h.decide(v, sub); vd.substitute() == nil {
		t.Errorf("a substitute within a text of several statements: %+v, want the substitute plan", vd)
	}
	for _, sql := range []string{"SELECT approx_count_distinct(*) FROM events", "SELECT approx_count_distinct(user_id) OVER () FROM events"} {
		if vd := h.decide(v, statement{sql: sql}); vd.plan != nil || vd.unsupported == "" {
			t.Errorf("%s: %+v, want it refused", sql, vd)
		}
	}
	param := statement{sql: "SELECT approx_count_distinct(user_id) FROM events WHERE user_id > $1"}
	if vd := h.decide(v, param); vd.plan != nil || vd.pass != "parameters in a simple query" {
		t.Errorf("a parameter in a simple query: %+v, want a pass", vd)
	}
	param.extended = true
	if vd := h.decide(v, param); vd.plan == nil {
		t.Errorf("a parameter in the extended protocol: %+v, want a plan", vd)
	}
}

// TestPlanCache: a statement planned again against the same catalog
// snapshot and settings gets the plan already made; another snapshot or
// other settings are planned anew; the cache stays bounded.
func TestPlanCache(t *testing.T) {
	var pc planCache
	snap := catalog.NewSnapshot(nil)
	rw := rewrite.Session{Approx: true, TimeZone: "UTC"}
	sql := "SELECT approx_count_distinct(user_id) FROM events"
	first, exact := pc.rewrite(sql, snap, rw)
	if first.Plan == nil {
		t.Fatalf("no plan: %s", first.Reason)
	}
	if exact != "" {
		t.Errorf("a substitute plan with the exact statement %q: it is its own", exact)
	}
	if again, _ := pc.rewrite(sql, snap, rw); again.Plan != first.Plan {
		t.Error("the same statement, snapshot and settings were planned anew")
	}
	other := rw
	other.TimeZone = "Europe/Paris"
	if res, _ := pc.rewrite(sql, snap, other); res.Plan == first.Plan {
		t.Error("other settings got the plan made for the first")
	}
	if res, _ := pc.rewrite(sql, catalog.NewSnapshot(nil), rw); res.Plan == first.Plan {
		t.Error("another catalog snapshot got the plan made for the first")
	}
	for i := range maxPlans + 10 {
		pc.rewrite(sql+" WHERE user_id > "+string(rune('0'+i%10))+strings.Repeat(" ", i), snap, rw)
	}
	if n := pc.lru.Len(); n != maxPlans || len(pc.items) != maxPlans {
		t.Errorf("%d entries (%d in the map), want %d", n, len(pc.items), maxPlans)
	}
}

// TestPlannedExact: a plan answering a statement comes with the exact
// statement PostgreSQL describes for its answer: the statement itself, or
// with APPROX_COUNT_DISTINCT counted as COUNT(DISTINCT ...) under the same
// column name.
func TestPlannedExact(t *testing.T) {
	snap := catalog.NewSnapshot([]*catalog.Rollup{{
		Name: "daily", Source: catalog.Table{Schema: "public", Name: "events"},
		Table:      catalog.Table{Schema: "pgsketch_rollups", Name: "daily"},
		TimeColumn: "created_at", TimeType: catalog.Timestamptz, Grain: catalog.Day, TimeZone: "UTC",
		Dimensions: []catalog.Dimension{{Column: "country", Type: "text"}},
		Measures: []catalog.Measure{{Column: "distinct_user_id", Aggregate: catalog.HLL, Expression: "user_id", Type: "bigint",
			Log2m: 14, Regwidth: 5, Hash: "xxhash64"}},
		SourceColumns: []string{"created_at", "user_id", "country"},
		Watermark:     time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Version: 2, Rows: 100,
	}})
	rw := rewrite.Session{Approx: true, TimeZone: "UTC"}
	for _, tc := range []struct{ sql, exact string }{
		{"SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country",
			"SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country"},
		{"SELECT country, approx_count_distinct(user_id) FROM events GROUP BY country",
			`SELECT "country" AS "country", count(DISTINCT "user_id") AS "approx_count_distinct" FROM "events" GROUP BY "country"`},
		{"EXPLAIN SELECT country, count(DISTINCT user_id) AS users FROM events GROUP BY country", ""},
	} {
		res, exact := planned(tc.sql, snap, rw)
		if res.Plan == nil {
			t.Fatalf("%s: no plan: %s", tc.sql, res.Reason)
		}
		if exact != tc.exact {
			t.Errorf("%s: exact statement %q, want %q", tc.sql, exact, tc.exact)
		}
	}
}
