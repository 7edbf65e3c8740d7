package handler

import (
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
	if vd := h.decide(v, sub); vd.plan == nil || vd.plan.Kind != rewrite.Substitute {
		t.Errorf("approx_count_distinct without a rollup: %+v, want a substitute plan", vd)
	}
	sub.inText = true
	if vd := h.decide(v, sub); vd.plan != nil || vd.pass == "" {
		t.Errorf("a substitute within a text of several statements: %+v, want a pass", vd)
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
