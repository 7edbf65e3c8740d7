package rewrite

import (
	"slices"
	"strings"
	"testing"

	"github.com/pgsketch/pgsketch/rewrite/plan"
)

// TestCacheability: a rollup arm whose keys or filters read the clock, the
// session beyond the cache's scope, or a quoted relative time is kept from
// the cache; the parameters they read are listed, for the executor to
// check their values. (Volatile functions such as random() or nextval()
// are not planned at all.)
func TestCacheability(t *testing.T) {
	sess := Session{TimeZone: "UTC", Approx: true}
	for _, c := range []struct {
		where     string
		cacheable bool
		params    []int
	}{
		{"country = 'DE'", true, nil},
		{"country = $1 AND device = $2", true, []int{1, 2}},
		{"created_at >= now() - interval '7 days'", true, nil}, // the bucket range, which the token holds
		{"country = to_char(now(), 'YY')", false, nil},
		{"country = current_user", false, nil},
		{"country = 'today'", false, nil},
		{"country = ' TODAY '", false, nil},
		{"country = 'Tomorrow 10:00'", false, nil},
		{"country = 'yesterday Europe/Berlin'", false, nil},
		{"country = 'Snowdonia'", true, nil},
		{"CAST(country AS regclass) IS NOT NULL", false, nil},
		{"country = CAST(transaction_timestamp() AS text)", false, nil},
		{"country = lower('DE')", true, nil},
		{"country = upper($3)", true, []int{3}},
	} {
		sql := "SELECT country, count(DISTINCT user_id) FROM events WHERE " + c.where + " GROUP BY 1"
		r := Rewrite(sql, testCatalog(), sess)
		p, ok := r.Plan.(*plan.Rollup)
		if !ok {
			t.Errorf("%s: not planned: %s", c.where, r.Reason)
			continue
		}
		if got := p.Cache.Why == ""; got != c.cacheable {
			t.Errorf("%s: cacheable %v (%q), want %v", c.where, got, p.Cache.Why, c.cacheable)
		}
		if c.cacheable && len(p.Cache.Params) != len(c.params) {
			t.Errorf("%s: parameters %v, want %v", c.where, p.Cache.Params, c.params)
		}
	}
}

func TestQuotesRelativeTime(t *testing.T) {
	for sql, want := range map[string]bool{
		`SELECT 1 WHERE t < 'now'`:                      true,
		`SELECT 1 WHERE t >= 'Today 10:00'`:             true,
		`SELECT 1 WHERE d = 'it''s yesterday'`:          true,
		`SELECT 1 WHERE t < now() - interval '1 day'`:   false,
		`SELECT 1 WHERE c = 'Snowdonia' AND t < $1`:     false,
		`SELECT "today" FROM t WHERE c = 'x'`:           false,
		`SELECT 1 WHERE c = 'unterminated tomorrow`:     true,
		`SELECT 1 WHERE c = '' AND d = 'nowhere' OR ''`: false,
	} {
		if got := quotesRelativeTime(sql); got != want {
			t.Errorf("quotesRelativeTime(%q) = %v, want %v", sql, got, want)
		}
	}
}

// TestReparse: a plan of a query quoting a relative time says so, in its
// head and its arms' heads.
func TestReparse(t *testing.T) {
	sess := Session{TimeZone: "UTC", Approx: true}
	r := Rewrite("SELECT count(DISTINCT user_id) FROM events WHERE created_at >= 'today'", testCatalog(), sess)
	if r.Plan == nil || !r.Plan.Header().Reparse {
		t.Fatalf("%s", output(r))
	}
	r = Rewrite("SELECT count(DISTINCT user_id) FROM events WHERE created_at >= $1", testCatalog(), sess)
	if r.Plan == nil || r.Plan.Header().Reparse {
		t.Fatalf("%s", output(r))
	}
}

// TestExplainVerbose: EXPLAIN prints a plan's statements by their size,
// EXPLAIN (VERBOSE) and String in full.
func TestExplainVerbose(t *testing.T) {
	sess := Session{TimeZone: "UTC", Approx: true}
	for sql, verbose := range map[string]bool{
		"EXPLAIN SELECT country, count(DISTINCT user_id) FROM events GROUP BY 1":           false,
		"EXPLAIN (VERBOSE) SELECT country, count(DISTINCT user_id) FROM events GROUP BY 1": true,
		"EXPLAIN (VERBOSE ON) SELECT count(DISTINCT user_id) FROM events":                  true,
		"EXPLAIN (VERBOSE false) SELECT count(DISTINCT user_id) FROM events":               false,
	} {
		r := Rewrite(sql, testCatalog(), sess)
		if r.Plan == nil || !r.Plan.Header().Explain || r.Plan.Header().Verbose != verbose {
			t.Fatalf("%s: %s", sql, output(r))
		}
		shown := r.Plan.Explain(r.Plan.Header().Verbose)
		if full := strings.Contains(shown, "fetch: WITH "); full != verbose {
			t.Errorf("%s: the fetch's SQL shown %v:\n%s", sql, full, shown)
		}
		if !verbose && !strings.Contains(shown, " bytes of SQL (EXPLAIN (VERBOSE) prints it)") {
			t.Errorf("%s: no statement size:\n%s", sql, shown)
		}
		if r.Plan.String() != r.Plan.Explain(true) {
			t.Errorf("%s: String is not the verbose printout", sql)
		}
	}
}

// TestShapeCacheability: the shaping statement's answer may be kept unless
// what it evaluates over the groups reads the clock, the session or a
// quoted relative time; the time range's now() does not count (the
// groups hold it), and the parameters it reads are listed.
func TestShapeCacheability(t *testing.T) {
	sess := Session{TimeZone: "UTC", Approx: true}
	for _, c := range []struct {
		sql       string
		cacheable bool
		params    []int
	}{
		{"SELECT country, count(DISTINCT user_id) FROM events WHERE created_at >= now() - interval '7 days' GROUP BY 1", true, nil},
		{"SELECT country, count(DISTINCT user_id) AS u FROM events GROUP BY 1 ORDER BY u DESC LIMIT $1", true, []int{1}},
		{"SELECT country, count(DISTINCT user_id), now() FROM events GROUP BY 1", false, nil},
		{"SELECT country, count(DISTINCT user_id) FROM events GROUP BY 1 HAVING count(DISTINCT user_id) > extract(epoch FROM now())", false, nil},
		{"SELECT country, count(DISTINCT user_id), current_user FROM events GROUP BY 1", false, nil},
		{"SELECT country, count(DISTINCT user_id), 'today' AS d FROM events GROUP BY 1", false, nil},
	} {
		r := Rewrite(c.sql, testCatalog(), sess)
		p, ok := r.Plan.(*plan.Rollup)
		if !ok {
			t.Errorf("%s: no rollup plan: %s", c.sql, r.Reason)
			continue
		}
		if p.ShapeCache == nil || (p.ShapeCache.Why == "") != c.cacheable || !slices.Equal(p.ShapeCache.Params, c.params) {
			t.Errorf("%s: shape cache %+v, want cacheable %v, params %v", c.sql, p.ShapeCache, c.cacheable, c.params)
		}
	}
}
