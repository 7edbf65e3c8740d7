package plan

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
)

// String prints the plan for EXPLAIN and the golden tests.
func (p *Plan) String() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	if p.Kind == Substitute {
		w("substitute: %s", p.Notice)
		w("sql: %s", p.SubstituteSQL)
		return strings.TrimSuffix(b.String(), "\n")
	}
	if p.Kind == Retention {
		w("retention grid: cells (set 1's period, set 2's period) = the distinct values in both, counted from Theta sketches")
		if p.Explain {
			w("explain: yes")
		}
		w("pairs: %s", p.PeriodCondSQL)
		for i, a := range p.Arms {
			w("set %d:", i+1)
			for _, line := range strings.Split(a.String(), "\n") {
				w("  %s", line)
			}
		}
		w("cells counted exactly: %s", p.CellSQL)
		w("shape: %s", p.ShapeSQL)
		if p.Guard != "" {
			w("guard: %s", p.Guard)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	if p.Kind == TopK {
		p.printTopK(w)
		return strings.TrimSuffix(b.String(), "\n")
	}
	if p.Kind == Nested {
		w("nested: %d aggregate subquer%s answered from rollups, the statement around %s run by PostgreSQL in the same snapshot", len(p.Arms), plural(len(p.Arms), "y", "ies"), plural(len(p.Arms), "it", "them"))
		if p.Explain {
			w("explain: yes")
		}
		for i, a := range p.Arms {
			w("subquery %d:", i+1)
			for _, line := range strings.Split(a.String(), "\n") {
				w("  %s", line)
			}
		}
		w("outer: %s", p.NestedSQL(nestedMarks(len(p.Arms))))
		if p.Guard != "" {
			w("guard: %s", p.Guard)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	if p.Kind == Overlap {
		w("overlap: %s = the distinct values of set 1 %s set 2, counted from Theta sketches", catalog.QuoteIdent(p.OutputName), p.SetOp)
		if p.Explain {
			w("explain: yes")
		}
		if p.Params > 0 {
			w("parameters: $1 to $%d, bound in each set's statements", p.Params)
		}
		for i, a := range p.Arms {
			w("set %d:", i+1)
			for _, line := range strings.Split(a.String(), "\n") {
				w("  %s", line)
			}
		}
		if p.Guard != "" {
			w("guard: %s", p.Guard)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	w("rollup: %s (table %s, grain %s, time zone %s, version %d)", p.Rollup, p.Table, p.Grain, p.TimeZone, p.Version)
	w("source: %s", p.Source)
	if p.Explain {
		w("explain: yes")
	}
	for _, k := range p.Keys {
		w("key %s: %s", k.Name, k.Expr)
	}
	for _, a := range p.Aggs {
		switch a.Op {
		case MergeHLL:
			w("agg %s: %s = hll merge of %s (log2m %d, regwidth %d, hash %s) + base %s", a.Name, a.Expr, a.Measure, a.Log2m, a.Regwidth, a.Hash, a.Base)
		case MergeFreq:
			w("agg %s: %s = summary merge of %s (%d counters) + base %s (%s)", a.Name, a.Expr, a.Measure, 1<<a.Log2m, a.Base, a.ValueForm)
		case MergeTheta:
			w("agg %s: %s = theta union of %s (lg_k %d, hash %s) + base %s (%s)", a.Name, a.Expr, a.Measure, a.Log2m, a.Hash, a.Base, a.ValueForm)
		case Exact:
			w("agg %s: %s = exact", a.Name, a.Expr)
		default:
			base := a.Base
			if base == "" {
				base = "rows"
			}
			w("agg %s: %s = %s of %s + base %s (%s)", a.Name, a.Expr, a.Op, a.Measure, base, a.Type)
		}
	}
	for _, f := range p.Filters {
		w("filter: %s", f)
	}
	var bounds []string
	for _, l := range p.Time.Lower {
		op := ">"
		if l.Inclusive {
			op = ">="
		}
		bounds = append(bounds, op+" "+l.SQL)
	}
	for _, u := range p.Time.Upper {
		op := "<"
		if u.Inclusive {
			op = "<="
		}
		bounds = append(bounds, op+" "+u.SQL)
	}
	if len(bounds) == 0 {
		bounds = []string{"unbounded"}
	}
	wm := p.Watermark.UTC().Format("2006-01-02 15:04:05.999999")
	if p.LateWindow > 0 {
		wm += fmt.Sprintf(", late window %s", p.LateWindow)
	}
	w("time: %s %s; watermark %s (as of the catalog snapshot; the statement reads its own)", catalog.QuoteIdent(p.Time.Column), strings.Join(bounds, ", "), wm)
	w("changes: the range's buckets listed in pgsketch.rollup_dirty read from the base table; pgsketch.capture_check runs the query exactly instead when the change capture is not in place or too many changed")
	if p.Level != nil {
		w("level: %s (table %s): the range's whole %ss read from it, the rest from the rollup table", p.Level.Grain, p.Level.Table, p.Level.Grain)
	}
	switch {
	case p.Merge == MergeServer && p.ServerFetchSQL == "":
		w("merge: server (%s): fails, PostgreSQL cannot merge the sketches", p.MergeReason)
		w("fetch: %s", p.FetchSQL)
	case p.Merge == MergeServer:
		w("merge: server (%s)", p.MergeReason)
		w("fetch: %s", p.ServerFetchSQL)
	default:
		w("merge: proxy (%s)", p.MergeReason)
		w("fetch: %s", p.FetchSQL)
	}
	if p.ExactSQL != "" {
		w("exact: %s", p.ExactSQL)
	}
	w("shape: %s", p.ShapeSQL)
	if p.Guard != "" {
		w("guard: %s", p.Guard)
	}
	if p.Notice != "" {
		w("notice: %s", p.Notice)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// SQL returns every statement the plan would run, for checks.
func (p *Plan) SQL() []string {
	var out []string
	for _, a := range p.Arms {
		out = append(out, a.SQL()...)
	}
	if p.Kind == Nested {
		// The outer statement with each arm a stand-in of one NULL
		// column (so that it parses).
		stand := make([]string, len(p.Arms))
		for i := range stand {
			stand[i] = "SELECT NULL"
		}
		out = append(out, p.NestedSQL(stand))
	}
	sqls := []string{p.FetchSQL, p.ServerFetchSQL, p.ExactSQL, p.ShapeSQL, p.SubstituteSQL, p.Guard, p.CellSQL}
	if p.TopK != nil {
		sqls = append(sqls, p.TopK.CountSQL)
	}
	for _, s := range sqls {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// printTopK prints a TopK plan.
func (p *Plan) printTopK(w func(string, ...any)) {
	t := p.TopK
	switch {
	case t.Threshold > 0:
		w("top-k: the values of %s counted at least %d times, from frequent-items summaries", t.Item, t.Threshold)
	default:
		order := "ties at the cut may be answered by any of the tied rows"
		if t.TotalOrder {
			order = "ORDER BY goes on after the count: an uncounted value tied at the cut must be ruled out"
		}
		w("top-k: the %d largest counts of %s (LIMIT plus OFFSET), from frequent-items summaries; %s", t.Limit, t.Item, order)
	}
	if p.Explain {
		w("explain: yes")
	}
	w("mode: %s", cmp.Or(p.Session.TopK, TopKVerified))
	for i, k := range p.Keys {
		role := "key"
		if i == t.ItemKey {
			role = "item"
		}
		w("%s %s: %s", role, k.Name, k.Expr)
	}
	for _, a := range p.Aggs {
		w("agg %s: %s", a.Name, a.Expr)
	}
	w("summaries:")
	for _, line := range strings.Split(p.Arms[0].String(), "\n") {
		w("  %s", line)
	}
	w("count: %s", t.CountSQL)
	w("shape: %s", p.ShapeSQL)
	if p.Guard != "" {
		w("guard: %s", p.Guard)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// nestedMarks stands for a Nested plan's arms in its printout.
func nestedMarks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("subquery %d", i+1)
	}
	return out
}
