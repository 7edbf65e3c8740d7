package status

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strings"
	"time"
)

// Rollup is one row of the rollups table on the page (the pgsketch.rollups
// view).
type Rollup struct {
	Name, Source, Grain, TimeZone string
	Dimensions, Measures          []string
	Watermark, LastRefresh        *time.Time
	Rows, Bytes, Version          int64
	Lag                           string
	// Capture says whether the rollup's change capture is in place and how
	// many buckets changed since its last refresh, or why it is not.
	Capture string
}

// RollupSource lists the rollups; nil when the page has no database to ask.
type RollupSource func(ctx context.Context) ([]Rollup, error)

// Page is the status page, an http.Handler.
type Page struct {
	Recorder *Recorder
	Rollups  RollupSource
	// Refresher is the background refresher's state; nil: no section.
	Refresher RefresherSource
	// Upstream names the PostgreSQL server, for the heading.
	Upstream string
	// Now is the clock (tests set it); time.Now when nil.
	Now func() time.Time
}

type pageData struct {
	Upstream    string
	Generated   string
	Rollups     []Rollup
	RollupsErr  string
	HaveRollups bool
	Refresher   *Refresher
	Snapshot
	Chart template.HTML
}

// ServeHTTP renders the page.
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	d := pageData{Upstream: p.Upstream, Generated: now().UTC().Format("2006-01-02 15:04:05 UTC")}
	if p.Rollups != nil {
		d.HaveRollups = true
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		rs, err := p.Rollups(ctx)
		if err != nil {
			d.RollupsErr = err.Error()
		}
		d.Rollups = rs
	}
	if p.Refresher != nil {
		r := p.Refresher()
		d.Refresher = &r
	}
	if p.Recorder != nil {
		d.Snapshot = p.Recorder.Snapshot()
	}
	d.Chart = errorChart(d.Samples)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTmpl.Execute(w, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

var pageTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"when": func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"size": func(b int64) string {
		switch {
		case b >= 1<<30:
			return fmt.Sprintf("%.1f GB", float64(b)/(1<<30))
		case b >= 1<<20:
			return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
		case b >= 1<<10:
			return fmt.Sprintf("%.0f kB", float64(b)/(1<<10))
		}
		return fmt.Sprintf("%d B", b)
	},
	"ms":   func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) },
	"join": strings.Join,
	"at":   func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pgsketch-proxy status</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:2em}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px ui-monospace,monospace}pre{white-space:pre-wrap;margin:0;max-height:12em;overflow:auto}
.muted{color:#777}.err{color:#b00}
</style></head><body>
<h1>pgsketch-proxy</h1>
<p class="muted">upstream {{.Upstream}} · {{.Generated}} · {{.TotalRewritten}} queries answered from rollups, {{.TotalPassed}} passed through, {{.TotalFallbacks}} rollup answers not used since start</p>

<h2 id="rollups">Rollups</h2>
{{if not .HaveRollups}}<p class="muted">No database to list rollups from (serve --status-dsn).</p>
{{else if .RollupsErr}}<p class="err">{{.RollupsErr}}</p>
{{else if not .Rollups}}<p class="muted">No rollups yet: create one with pgsketch.create_rollup or pgsketch-proxy rollup create.</p>
{{else}}<table><tr><th>rollup</th><th>source</th><th>grain</th><th>dimensions</th><th>measures</th><th>watermark</th><th>last refresh</th><th>lag</th><th>changes</th><th>rows</th><th>size</th></tr>
{{range .Rollups}}<tr class="rollup"><td><b>{{.Name}}</b> <span class="muted">v{{.Version}}</span></td><td>{{.Source}}</td><td>{{.Grain}} ({{.TimeZone}})</td><td>{{join .Dimensions ", "}}</td><td>{{join .Measures "; "}}</td><td>{{when .Watermark}}</td><td>{{when .LastRefresh}}</td><td>{{.Lag}}</td><td>{{.Capture}}</td><td class="n">{{.Rows}}</td><td class="n">{{size .Bytes}}</td></tr>
{{end}}</table>{{end}}
{{with .Refresher}}
<h2 id="refresher">Background refresher</h2>
<p id="refresher-note" class="{{if .Refreshing}}refreshing{{else}}err{{end}}">{{if .Refreshing}}{{.Note}}{{else}}Not refreshing: {{.Note}}{{end}}</p>
<table><tr><th>rounds</th><th>refreshed</th><th>gave way (lock timeout)</th><th>failed</th><th>last round</th><th>last refresh</th></tr>
<tr><td class="n" id="refresher-rounds">{{.Rounds}}</td><td class="n" id="refresher-refreshed">{{.Refreshed}}</td><td class="n" id="refresher-gave-way">{{.GaveWay}}</td><td class="n" id="refresher-failed">{{.Failed}}</td><td>{{stamp .LastRound}}</td><td>{{stamp .LastRefresh}}</td></tr></table>
{{if .LastError}}<p class="err" id="refresher-error">{{.LastError}}</p>{{end}}
{{end}}
<h2 id="rewritten">Answered from rollups</h2>
{{if not .Rewritten}}<p class="muted">None yet.</p>{{else}}
<table><tr><th>at</th><th>query</th><th>rollup</th><th>plan</th><th>latency</th></tr>
{{range .Rewritten}}<tr class="rewritten"><td>{{at .Time}}</td><td><pre>{{.SQL}}</pre>{{if .Err}}<div class="err">{{.Err}}</div>{{end}}</td><td>{{.Rollup}}</td><td><pre>{{.Detail}}</pre></td><td class="n">{{ms .Latency}}</td></tr>
{{end}}</table>{{end}}

<h2 id="passed">Passed through</h2>
{{if not .Passed}}<p class="muted">None yet.</p>{{else}}
<table><tr><th>at</th><th>query</th><th>reason</th><th>latency</th></tr>
{{range .Passed}}<tr class="passed"><td>{{at .Time}}</td><td><pre>{{.SQL}}</pre>{{if .Err}}<div class="err">{{.Err}}</div>{{end}}</td><td>{{.Detail}}</td><td class="n">{{ms .Latency}}</td></tr>
{{end}}</table>{{end}}

<h2 id="fallbacks">Rollup answers not used</h2>
<p class="muted">A rollup answer that failed when it ran (its fetch statement raised an error, or the proxy refused the answer): the statement was answered exactly by PostgreSQL, with a NOTICE saying why.</p>
<table><tr>{{range .FallbackCounts}}<th>{{.Reason}}</th>{{end}}</tr>
<tr>{{range .FallbackCounts}}<td class="n fallback-count" id="fallbacks-{{.Reason}}">{{.N}}</td>{{end}}</tr></table>
{{if .Fallbacks}}<table><tr><th>at</th><th>query</th><th>rollup</th><th>reason</th><th>error</th></tr>
{{range .Fallbacks}}<tr class="fallback"><td>{{at .Time}}</td><td><pre>{{.SQL}}</pre></td><td>{{.Rollup}}</td><td>{{.Reason}}</td><td>{{.Message}}{{if .Code}} <span class="muted">(SQLSTATE {{.Code}})</span>{{end}}</td></tr>
{{end}}</table>{{end}}

<h2 id="accuracy">Observed relative error</h2>
<p class="muted">Where one query computed a distinct count both exactly (COUNT(DISTINCT)) and from a rollup (APPROX_COUNT_DISTINCT): (approximate − exact) / exact, newest on the right; the band is ±3 standard errors.</p>
{{.Chart}}
</body></html>
`))

// errorChart draws the samples' relative errors, oldest first, as an SVG
// scatter plot with the ±1 and ±3 standard error bands.
func errorChart(samples []Sample) template.HTML {
	if len(samples) == 0 {
		return `<p class="muted">No samples yet: run a query with both COUNT(DISTINCT x) and APPROX_COUNT_DISTINCT(x).</p>`
	}
	const w, h, pad = 900.0, 260.0, 60.0
	se := samples[0].StdErr
	limit := 4 * se
	for _, s := range samples {
		limit = math.Max(limit, math.Abs((s.Approx-s.Exact)/s.Exact)*1.1)
	}
	if limit == 0 {
		limit = 0.01
	}
	y := func(v float64) float64 { return h/2 - v/limit*(h/2-pad/2) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="error-chart" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="relative error of approximate distinct counts">`, w, h, w, h)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.0f" height="%.1f" fill="#e8f0fe"/>`, pad, y(3*se), w-pad, y(-3*se)-y(3*se))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.0f" height="%.1f" fill="#c6dafc"/>`, pad, y(se), w-pad, y(-se)-y(se))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#888"/>`, pad, y(0), w, y(0))
	for _, v := range []float64{limit, limit / 2, 0, -limit / 2, -limit} {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="10" text-anchor="end" fill="#555">%+.2f%%</text>`, pad-4, y(v)+3, 100*v)
	}
	n := len(samples)
	for i := range samples {
		s := samples[n-1-i] // oldest first
		rel := (s.Approx - s.Exact) / s.Exact
		x := pad + (w-pad)*(float64(i)+0.5)/float64(n)
		color := "#1a73e8"
		if s.StdErr > 0 && math.Abs(rel) > 3*s.StdErr {
			color = "#d93025"
		}
		fmt.Fprintf(&b, `<circle class="sample" cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: exact %.0f, approximate %.0f (%+.3f%%)</title></circle>`,
			x, y(rel), color, template.HTMLEscapeString(s.Rollup), s.Exact, s.Approx, 100*rel)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" fill="#555">%d samples; standard error %.2f%%</text></svg>`, pad, h-6, n, 100*se)
	return template.HTML(b.String())
}
