package proxy

import (
	"strings"
	"testing"

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
	first := pc.rewrite(sql, snap, rw)
	if first.Plan == nil {
		t.Fatalf("no plan: %s", first.Reason)
	}
	if again := pc.rewrite(sql, snap, rw); again.Plan != first.Plan {
		t.Error("the same statement, snapshot and settings were planned anew")
	}
	other := rw
	other.TimeZone = "Europe/Paris"
	if res := pc.rewrite(sql, snap, other); res.Plan == first.Plan {
		t.Error("other settings got the plan made for the first")
	}
	if res := pc.rewrite(sql, catalog.NewSnapshot(nil), rw); res.Plan == first.Plan {
		t.Error("another catalog snapshot got the plan made for the first")
	}
	for i := range maxPlans + 10 {
		pc.rewrite(sql+" WHERE user_id > "+string(rune('0'+i%10))+strings.Repeat(" ", i), snap, rw)
	}
	if n := pc.lru.Len(); n != maxPlans || len(pc.items) != maxPlans {
		t.Errorf("%d entries (%d in the map), want %d", n, len(pc.items), maxPlans)
	}
}
