package rewrite

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// TestRecover checks Rewrite's promise never to panic.
func TestRecover(t *testing.T) {
	panicHook = func(string) { panic("boom") }
	defer func() { panicHook = nil }()
	r := Rewrite("SELECT count(DISTINCT user_id) FROM events", testCatalog(), Session{TimeZone: "UTC", Approx: true})
	if r.Plan != nil || r.Reason != "internal error: boom" {
		t.Errorf("got %+v", r)
	}
}

// TestPlanRecords checks what a plan records for the executor and for a
// plan cache: the session it relied on, the watermark and late window of
// its snapshot, and the parameters of each statement.
func TestPlanRecords(t *testing.T) {
	sess := Session{TimeZone: "UTC", Approx: false, SearchPath: "public", User: "u"}
	sql := "SELECT country, count(DISTINCT user_id), approx_count_distinct(user_id) FROM events " +
		"WHERE created_at >= $1 AND created_at < $2 GROUP BY country HAVING approx_count_distinct(user_id) > $4 LIMIT $3"
	r := Rewrite(sql, testCatalog(), sess)
	if r.Plan == nil {
		t.Fatal(r.Reason)
	}
	p, ok := r.Plan.(*plan.Rollup)
	if !ok {
		t.Fatalf("%s", output(r))
	}
	if p.Session != sess {
		t.Errorf("Session = %+v", p.Session)
	}
	if p.Rollup != "events_hourly" && p.Rollup != "events_daily" {
		t.Errorf("rollup %s", p.Rollup)
	}
	got := fmt.Sprint(p.Params, p.FetchParams, p.ExactParams, p.ShapeParams)
	if got != "4 [1 2] [1 2] [3 4]" {
		t.Errorf("params: %s", got)
	}
	if !strings.Contains(p.FetchSQL, "FROM pgsketch.rollup_defs WHERE name = 'events_daily' AND version >= 7") {
		t.Errorf("fetch does not read the watermark: %s", p.FetchSQL)
	}
	if !p.Watermark.Equal(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Watermark %v", p.Watermark)
	}
	// The late window of the snapshot is exposed.
	r = Rewrite("SELECT count(DISTINCT user_id) FROM events GROUP BY date_trunc('hour', created_at)", testCatalog(),
		Session{TimeZone: "UTC", Approx: true})
	if rp, ok := r.Plan.(*plan.Rollup); !ok || rp.Rollup != "events_hourly" || rp.LateWindow != 3*time.Hour {
		t.Fatalf("%+v", r)
	}
}

// TestApproxUnanswered checks that a statement calling
// APPROX_COUNT_DISTINCT is answered from a rollup, or counted exactly by a
// substitute that calls it no more, or refused saying which form is not
// supported: never passed through to PostgreSQL, which has no such
// function. ApproxUnanswered and the reason say so of a refusal.
func TestApproxUnanswered(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT approx_count_distinct(user_id) FILTER (WHERE country = 'DE') FROM events":                             "plan",
		"SELECT approx_count_distinct(user_id) FILTER (WHERE user_id > 5) FROM events":                                "substitute",
		"SELECT approx_count_distinct(DISTINCT user_id) FILTER (WHERE user_id > 5) FROM users":                        "substitute",
		"SELECT approx_count_distinct(DISTINCT user_id) FROM events":                                                  "plan",
		"SELECT approx_count_distinct(DISTINCT user_id) FROM users":                                                   "substitute",
		"SELECT APPROX_COUNT_DISTINCT(user_id) OVER () FROM events":                                                   "unsupported",
		"SELECT approx_count_distinct(*) FROM events":                                                                 "unsupported",
		"SELECT approx_count_distinct(user_id, 2) FROM users":                                                         "unsupported",
		"CREATE VIEW v AS SELECT approx_count_distinct(user_id) FROM users":                                           "unsupported",
		"SELECT (SELECT approx_count_distinct(user_id) FROM events)":                                                  "substitute",
		"WITH x AS (SELECT approx_count_distinct(user_id) AS n FROM users) SELECT n FROM x":                           "substitute",
		"WITH x AS (SELECT approx_count_distinct(user_id) AS n FROM events) SELECT n FROM x":                          "plan",
		"SELECT count(DISTINCT user_id) FILTER (WHERE country = 'DE') FROM events":                                    "plan",
		"SELECT approx_count_distinct(user_id) FROM events":                                                           "plan",
		"SELECT approx_count_distinct(user_id) FROM events JOIN users USING (user_id)":                                "substitute",
		"SELECT count(DISTINCT user_id) FROM events WHERE country = 'DE' LIMIT (SELECT 1)":                            "plan",
		"SELECT approx_count_distinct(user_id) FROM events WHERE country = 'DE' LIMIT (SELECT 1)":                     "plan",
		"SELECT approx_count_distinct(user_id) FROM events e WHERE EXISTS (SELECT FROM vip v WHERE v.id = e.user_id)": "substitute",
		"SELECT 'approx_count_distinct(user_id)', count(DISTINCT user_id) FROM users":                                 "pass",
		"SELECT other.approx_count_distinct(user_id) FROM users":                                                      "pass",
	} {
		r := Rewrite(sql, testCatalog(), Session{TimeZone: "UTC", Approx: true})
		got := "pass"
		switch {
		case isSubstitute(r.Plan):
			got = "substitute"
			sub := r.Plan.(*plan.Substitute)
			if p, err := syntax.Parse(sub.SQL); err != nil || p.Approx {
				t.Errorf("%s: the substitute calls APPROX_COUNT_DISTINCT: %s", sql, sub.SQL)
			}
		case r.Plan != nil:
			got = "plan"
		case r.Unsupported != "":
			got = "unsupported"
		}
		if got != want {
			t.Errorf("%s: %s, want %s (%s)", sql, got, want, output(r))
		}
		if r.ApproxUnanswered != (want == "unsupported") {
			t.Errorf("%s: ApproxUnanswered = %v (%s)", sql, r.ApproxUnanswered, output(r))
		}
		if want == "unsupported" && !strings.Contains(r.Reason, "APPROX_COUNT_DISTINCT is left unanswered") {
			t.Errorf("%s: reason %q", sql, r.Reason)
		}
		if exact, ok := ExactEquivalent(sql); ok != (want == "substitute" || want == "plan" && strings.Contains(sql, "approx")) {
			t.Errorf("%s: ExactEquivalent = %q, %v", sql, exact, ok)
		}
	}
}

func TestCollatedColumns(t *testing.T) {
	snap := testCatalog().WithCollated(map[string][]string{"events_daily": {"country"}, "events_hourly": {"country"}})
	sess := Session{TimeZone: "UTC", Approx: true}
	for _, sql := range []string{
		"SELECT country, count(DISTINCT user_id) FROM events GROUP BY 1 ORDER BY 1 LIMIT 3",
		"SELECT device, count(DISTINCT user_id) FROM events WHERE country = 'DE' GROUP BY 1",
		"SELECT count(DISTINCT user_id) FROM events GROUP BY country HAVING lower(country) > 'm'",
	} {
		if r := Rewrite(sql, snap, sess); r.Plan != nil || !strings.Contains(r.Reason, "collation") {
			t.Errorf("%s: %s", sql, output(r))
		}
	}
	sql := "SELECT device, count(DISTINCT user_id) FROM events GROUP BY 1"
	if r := Rewrite(sql, snap, sess); !isRollup(r.Plan) {
		t.Errorf("%s: %s", sql, output(r))
	}
}

func TestExactEquivalent(t *testing.T) {
	got, ok := ExactEquivalent("SELECT country, approx_count_distinct(user_id) AS users FROM events WHERE created_at > $1 GROUP BY 1")
	if !ok || !strings.Contains(got, "count(DISTINCT") || strings.Contains(strings.ToLower(got), "approx_count_distinct") || !strings.Contains(got, "$1") {
		t.Errorf("ExactEquivalent = %q, %v", got, ok)
	}
	if _, ok := ExactEquivalent("SELECT count(DISTINCT user_id) FROM events"); ok {
		t.Error("a query without APPROX_COUNT_DISTINCT has an exact equivalent")
	}
}

// TestNestedParamsBeyondTheAST: a $n the AST does not reach (a LATERAL
// subquery) still counts, so that the groups' arrays bind after it.
func TestNestedParamsBeyondTheAST(t *testing.T) {
	r := Rewrite("SELECT * FROM (SELECT country, count(DISTINCT user_id) n FROM events GROUP BY 1) d, LATERAL (SELECT $1::text AS tag) l",
		testCatalog(), Session{TimeZone: "UTC", Approx: true})
	if n, ok := r.Plan.(*plan.Nested); !ok || n.Params != 1 || len(n.OuterParams) != 1 {
		t.Fatalf("%s", output(r))
	}
}

// TestStarJoinRefusesExactDistinct: with pgsketch.approx off, a
// COUNT(DISTINCT) beside an APPROX_COUNT_DISTINCT is counted exactly per
// key, which a join's groups cannot add up.
func TestStarJoinRefusesExactDistinct(t *testing.T) {
	r := Rewrite("SELECT c.region, approx_count_distinct(e.user_id), count(DISTINCT e.user_id) FROM events e JOIN countries c ON c.code = e.country GROUP BY 1",
		testCatalog(), Session{TimeZone: "UTC", Approx: false})
	if _, ok := r.Plan.(*plan.Nested); ok {
		t.Fatalf("%s", output(r))
	}
}

func isSubstitute(p Plan) bool { _, ok := p.(*plan.Substitute); return ok }
func isRollup(p Plan) bool     { _, ok := p.(*plan.Rollup); return ok }
