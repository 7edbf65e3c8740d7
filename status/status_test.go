package status

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRecorderKeepsTheLast(t *testing.T) {
	r := NewRecorder(3, 2)
	for i := range 5 {
		r.Query(Query{SQL: string(rune('a' + i)), Rewritten: i%2 == 0})
		r.Sample(Sample{Exact: float64(i + 1), Approx: float64(i + 1)})
	}
	r.Sample(Sample{Exact: 0}) // no exact count: no relative error
	s := r.Snapshot()
	got := func(qs []Query) (out string) {
		for _, q := range qs {
			out += q.SQL
		}
		return out
	}
	if got(s.Rewritten) != "eca" || got(s.Passed) != "db" || s.TotalRewritten != 3 || s.TotalPassed != 2 {
		t.Fatalf("rewritten %q passed %q totals %d %d", got(s.Rewritten), got(s.Passed), s.TotalRewritten, s.TotalPassed)
	}
	if len(s.Samples) != 2 || s.Samples[0].Exact != 5 || s.Samples[1].Exact != 4 {
		t.Fatalf("samples %+v", s.Samples)
	}
	r.Query(Query{SQL: strings.Repeat("x", MaxSQL+10)})
	if q := r.Snapshot().Passed[0]; len(q.SQL) > MaxSQL+len("…") {
		t.Fatalf("SQL kept at %d bytes", len(q.SQL))
	}
	var nilRec *Recorder
	nilRec.Query(Query{}) // a nil recorder records nothing, without a panic
}

// countingPlan is a plan that counts its printings.
type countingPlan struct{ n *int }

func (p countingPlan) String() string { *p.n++; return "plan text" }

// TestPlanPrintedWhenRead checks that a recorded plan is printed only when
// the queries are read, and the metrics never print one.
func TestPlanPrintedWhenRead(t *testing.T) {
	r := NewRecorder(3, 2)
	var n int
	r.Query(Query{SQL: "q", Rewritten: true, Plan: countingPlan{&n}})
	var b strings.Builder
	if err := r.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("plan printed %d times before the queries were read", n)
	}
	q := r.Snapshot().Rewritten[0]
	if q.Detail != "plan text" || q.Plan != nil || n != 1 {
		t.Fatalf("detail %q, plan %v, printed %d times", q.Detail, q.Plan, n)
	}
}

func TestPage(t *testing.T) {
	wm := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	rec := NewRecorder(10, 10)
	rec.Query(Query{Time: wm, SQL: "SELECT country, count(DISTINCT user_id) FROM events GROUP BY 1", Rewritten: true,
		Rollup: "events_daily", Detail: "rollup: events_daily", Latency: 12 * time.Millisecond})
	rec.Query(Query{Time: wm, SQL: "SELECT <script>alert(1)</script>", Detail: "no COUNT(DISTINCT ...)", Latency: time.Millisecond})
	rec.Sample(Sample{Rollup: "events_daily", Exact: 1000, Approx: 1010, StdErr: 0.0081})
	rec.Sample(Sample{Rollup: "events_daily", Exact: 1000, Approx: 1100, StdErr: 0.0081})
	p := &Page{Recorder: rec, Upstream: "127.0.0.1:5432", Now: func() time.Time { return wm },
		Rollups: func(context.Context) ([]Rollup, error) {
			return []Rollup{{Name: "events_daily", Source: "public.events", Grain: "day", TimeZone: "UTC",
				Dimensions: []string{"country", "device"}, Measures: []string{"distinct_user_id: hll(user_id)"},
				Watermark: &wm, Rows: 5400, Bytes: 56 << 20, Version: 3, Lag: "1 day"}}, nil
		}}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	body := w.Body.String()
	for _, want := range []string{
		`<tr class="rollup"><td><b>events_daily</b>`, "56.0 MB", "2026-04-01 00:00 UTC", "country, device",
		`<tr class="rewritten">`, "12.0 ms", "rollup: events_daily",
		`<tr class="passed">`, "&lt;script&gt;", "no COUNT(DISTINCT ...)",
		`<svg id="error-chart"`, `class="sample"`, "+1.000%", `fill="#d93025"`, "2 samples",
		"1 queries answered from rollups, 1 passed through",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("query text not escaped")
	}
	// No database, an error from it, and nothing recorded yet.
	for _, pg := range []*Page{{}, {Rollups: func(context.Context) ([]Rollup, error) { return nil, errors.New("boom") }}} {
		w := httptest.NewRecorder()
		pg.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 200 || !strings.Contains(w.Body.String(), "None yet.") {
			t.Errorf("empty page: %d %s", w.Code, w.Body.String())
		}
	}
}

// TestFallbacks: fallbacks are counted by reason (an unknown reason as
// other), listed newest first, shown on the page and written as metrics.
func TestFallbacks(t *testing.T) {
	at := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	rec := NewRecorder(2, 2)
	for _, f := range []Fallback{
		{Time: at, SQL: "SELECT approx_count_distinct(user_id) FROM events", Rollup: "events_daily", Reason: ReasonPrivilege,
			Code: "42501", Message: "permission denied for table events_daily"},
		{Time: at, SQL: "SELECT 2", Rollup: "events_daily", Reason: ReasonNotReady, Code: "55000", Message: "pgsketch: rollup events_daily not used"},
		{Time: at, SQL: "SELECT 3", Rollup: "events_daily", Reason: ReasonPrivilege, Code: "42501", Message: "permission denied"},
		{Time: at, SQL: "SELECT <b>4</b>", Rollup: "events_daily", Reason: "no such reason", Message: "odd"},
	} {
		rec.Fallback(f)
	}
	s := rec.Snapshot()
	counts := map[string]int64{}
	for _, c := range s.FallbackCounts {
		counts[c.Reason] = c.N
	}
	if len(s.FallbackCounts) != len(FallbackReasons) || counts[ReasonPrivilege] != 2 || counts[ReasonNotReady] != 1 ||
		counts[ReasonOther] != 1 || counts[ReasonData] != 0 || s.TotalFallbacks != 4 {
		t.Fatalf("counts %+v, total %d", s.FallbackCounts, s.TotalFallbacks)
	}
	if len(s.Fallbacks) != 2 || s.Fallbacks[0].SQL != "SELECT <b>4</b>" || s.Fallbacks[0].Reason != ReasonOther {
		t.Fatalf("fallbacks %+v", s.Fallbacks)
	}

	w := httptest.NewRecorder()
	(&Page{Recorder: rec, Now: func() time.Time { return at }}).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	body := w.Body.String()
	for _, want := range []string{
		"4 rollup answers not used since start", `id="fallbacks-privilege">2<`, `id="fallbacks-not_ready">1<`,
		`id="fallbacks-data">0<`, `<tr class="fallback">`, "SELECT &lt;b&gt;4&lt;/b&gt;", "(SQLSTATE 42501)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	var m strings.Builder
	if err := rec.WritePrometheus(&m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE pgsketch_rollup_fallbacks_total counter\n",
		`pgsketch_rollup_fallbacks_total{reason="privilege"} 2` + "\n",
		`pgsketch_rollup_fallbacks_total{reason="not_ready"} 1` + "\n",
		`pgsketch_rollup_fallbacks_total{reason="refused"} 0` + "\n",
		`pgsketch_rollup_fallbacks_total{reason="other"} 1` + "\n",
		`pgsketch_queries_total{outcome="rollup"} 0` + "\n",
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, m.String())
		}
	}
	var nilRec *Recorder
	nilRec.Fallback(Fallback{}) // a nil recorder records nothing, without a panic
}

// TestRefresherSection: the page shows what the background refresher does
// or why it cannot, its counters and its last error (escaped), and the
// metrics count its rounds and refreshes by result.
func TestRefresherSection(t *testing.T) {
	at := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	r := Refresher{Refreshing: true, Note: "refreshing 1 rollup(s) of database analytics as role owner every 1m0s: events_daily",
		Interval: time.Minute, Rounds: 7, Refreshed: 5, GaveWay: 1, Failed: 1, LastRound: at, LastRefresh: at,
		LastError: "2026-04-01 11:59:00: events_daily: <boom>"}
	page := func(r Refresher) string {
		w := httptest.NewRecorder()
		(&Page{Refresher: func() Refresher { return r }}).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w.Body.String()
	}
	body := page(r)
	for _, want := range []string{
		`<p id="refresher-note" class="refreshing">refreshing 1 rollup(s) of database analytics`,
		`id="refresher-rounds">7<`, `id="refresher-refreshed">5<`, `id="refresher-gave-way">1<`, `id="refresher-failed">1<`,
		"2026-04-01 12:00:00 UTC", "events_daily: &lt;boom&gt;",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	body = page(Refresher{Note: "role reader owns none of the rollups of database analytics"})
	if !strings.Contains(body, `class="err">Not refreshing: role reader owns none`) || !strings.Contains(body, "never") {
		t.Errorf("page of a refresher that cannot refresh:\n%s", body)
	}
	if body = page(Refresher{}); !strings.Contains(body, `id="refresher"`) {
		t.Error("no refresher section")
	}
	w := httptest.NewRecorder()
	(&Page{}).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if strings.Contains(w.Body.String(), `id="refresher"`) {
		t.Error("a refresher section without a refresher")
	}

	var m strings.Builder
	if err := r.WritePrometheus(&m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pgsketch_refresher_refreshing 1\n", "# TYPE pgsketch_refresher_rounds_total counter\n", "pgsketch_refresher_rounds_total 7\n",
		`pgsketch_refresher_refreshes_total{result="ok"} 5` + "\n", `pgsketch_refresher_refreshes_total{result="gave_way"} 1` + "\n",
		`pgsketch_refresher_refreshes_total{result="failed"} 1` + "\n",
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, m.String())
		}
	}
}
