package rewrite

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// The rule auto follows (documented in the README, "Where sketches are
// merged"):
//
//  1. no sketch to merge: proxy, as there is nothing to merge;
//  2. the database has no hll extension: proxy;
//  3. fewer than ServerMergeRows rollup rows per output group, as
//     estimated by rowsPerGroup: proxy. PostgreSQL's hll_union_agg has a
//     cost per group (it unpacks into a full register set and packs again)
//     that only pays off when it saves shipping and decoding several
//     sketches per group (docs/benchmarks.md, server-side merge: at 3
//     rows per group the proxy was 1.7x faster, at 84 the server 1.7x);
//  4. otherwise, or when the estimate is missing (no statistics, a time
//     range not given by constants): server.
//
// A cached rollup half is used whichever strategy would run: the cache
// holds the merged groups, keyed by the proxy-merge statement.

// ServerMergeRows is the estimated rollup rows per output group from
// which auto merges in PostgreSQL.
const ServerMergeRows = 10

// chooseMerge sets Merge, MergeReason, Fetch.ServerCols and ServerFetchSQL
// of p for a session whose pgsketch.merge is setting, in a database with
// extension hll.
func chooseMerge(p *plan.Rollup, hll catalog.Extension, setting Merge) {
	hasSketch := false
	for _, a := range p.Aggs {
		if a.Op == MergeHLL {
			hasSketch = true
		}
	}
	if hll.Installed() && hasSketch {
		// NULL when the group has no sketch, as array_agg over no rows
		// (an aggregate without GROUP BY over no rollup rows).
		f := &p.Fetch
		f.ServerCols = slices.Clone(f.Cols)
		for _, a := range p.Aggs {
			if a.Op == MergeHLL {
				s, col := syntax.QuoteIdent(hll.Schema)+".", "r."+syntax.QuoteIdent(a.Measure)
				f.ServerCols[a.RollupColumn] = "CASE WHEN count(" + col + ") > 0 THEN ARRAY[" + s + "hll_send(" + s + "hll_union_agg(" + col + "::" + s + "hll))] END"
			}
		}
		p.ServerFetchSQL = f.SQL(true, "")
	}
	switch {
	case slices.ContainsFunc(p.Aggs, func(a plan.Agg) bool { return a.Op == MergeTheta }):
		p.Merge, p.MergeReason = MergeProxy, "Theta sketches are merged in the proxy"
	case slices.ContainsFunc(p.Aggs, func(a plan.Agg) bool { return a.Op == MergeFreq }):
		p.Merge, p.MergeReason = MergeProxy, "frequent-items summaries are merged in the proxy"
	case setting == MergeProxy:
		p.Merge, p.MergeReason = MergeProxy, "pgsketch.merge = proxy"
	case setting == MergeServer && !hasSketch:
		p.Merge, p.MergeReason = MergeProxy, "no sketches to merge"
	case setting == MergeServer:
		p.Merge, p.MergeReason = MergeServer, "pgsketch.merge = server"
		if !hll.Installed() {
			p.MergeReason += ", but the database has no hll extension"
		}
	case !hasSketch:
		p.Merge, p.MergeReason = MergeProxy, "auto: no sketches to merge"
	case !hll.Installed():
		p.Merge, p.MergeReason = MergeProxy, "auto: the database has no hll extension"
	case p.RowsPerGroup > 0 && p.RowsPerGroup < ServerMergeRows:
		p.Merge, p.MergeReason = MergeProxy, "auto: "+p.RowsPerGroupNote
	default:
		p.Merge, p.MergeReason = MergeServer, "auto: "+p.RowsPerGroupNote
	}
}

// grainHours are the lengths of the units a time key or a bucket can
// have, in hours (a month and a quarter on average).
var grainHours = map[string]float64{"hour": 1, "day": 24, "week": 168, "month": 730, "quarter": 2191, "year": 8766}

// rowsPerGroup estimates how many rows of the rollup (of its level, when
// the plan reads one) one output group of the query merges: the buckets
// per value of the time key (1 when a key truncates the time to the
// grain; the ratio of the units for a coarser date_trunc; without either,
// the buckets of the query's range when constants give it, the watermark
// ending it), times PostgreSQL's estimate of the distinct values of each
// dimension the GROUP BY does not hold nor a WHERE fix to one value. It
// returns 0 with a note saying what is missing when it cannot tell.
func (m *matcher) rowsPerGroup(p *plan.Rollup) (float64, string) {
	grain := m.r.Grain
	if p.Level != nil {
		grain = p.Level.Grain
	}
	var buckets float64
	var how string
	for _, k := range m.keys {
		if m.truncatesToGrain(k.e) {
			buckets, how = 1, "the GROUP BY truncates "+catalog.QuoteIdent(m.r.TimeColumn)+" to the rollup's "+string(m.r.Grain)
		} else if u, ok := m.truncUnit(k.e); ok && buckets == 0 && grainHours[u] >= grainHours[string(grain)] {
			buckets = grainHours[u] / grainHours[string(grain)]
			how = "GROUP BY date_trunc('" + u + "', ...) over " + string(grain) + " buckets"
		}
	}
	if buckets == 0 {
		hours, ok := m.rangeHours()
		if !ok {
			return 0, "rows per group unknown: constants do not bound the time range"
		}
		buckets = max(1, hours/grainHours[string(grain)])
		how = "the time range holds that many " + string(grain) + " buckets"
	}
	n := buckets
	var dims []string
	for _, d := range m.r.Dimensions {
		if m.keyedOrFixed(d.Column) {
			continue
		}
		if d.DistinctValues <= 0 {
			return 0, "rows per group unknown: no statistics of dimension " + catalog.QuoteIdent(d.Column)
		}
		n *= d.DistinctValues
		dims = append(dims, strconv.FormatFloat(d.DistinctValues, 'f', -1, 64)+" values of "+catalog.QuoteIdent(d.Column))
	}
	what := "rollup rows"
	if p.Level != nil {
		what = string(p.Level.Grain) + " level rows"
	}
	note := fmt.Sprintf("about %.0f %s per group (%s", n, what, how)
	if n < 1.5 {
		note = "one " + strings.TrimSuffix(what, "s") + " per group (" + how
	}
	if len(dims) > 0 {
		note += "; " + strings.Join(dims, ", ") + " not grouped"
	}
	return n, note + ")"
}

// truncUnit returns u for a key date_trunc('u', time[, zone]), possibly
// under casts.
func (m *matcher) truncUnit(e syntax.Expr) (string, bool) {
	e = uncast(e)
	f, ok := e.(*syntax.FuncCall)
	if !ok || len(f.Name) == 0 || f.Name[len(f.Name)-1] != "date_trunc" || len(f.Args) < 2 {
		return "", false
	}
	unit, ok := f.Args[0].(*syntax.Const)
	if !ok || unit.Type != "str" || !m.isTime(f.Args[1]) {
		return "", false
	}
	u := strings.ToLower(unit.Val)
	_, known := grainHours[u]
	return u, known
}

// rangeHours is the length in hours of the query's time range when
// constants bound it (the rollup's watermark standing in for a missing
// upper bound).
func (m *matcher) rangeHours() (float64, bool) {
	var lo, hi time.Time
	// On a date column, "> d" starts a day later and "<= d" ends a day
	// later (BETWEEN's upper end); on timestamps a bound's inclusion is
	// a microsecond.
	day := time.Duration(0)
	if m.r.TimeType == catalog.Date {
		day = 24 * time.Hour
	}
	for _, b := range m.lower {
		t, ok := constTime(b.expr)
		if !ok {
			return 0, false
		}
		if !b.Inclusive {
			t = t.Add(day)
		}
		if lo.IsZero() || t.After(lo) {
			lo = t
		}
	}
	hi = m.r.Watermark
	for _, b := range m.upper {
		t, ok := constTime(b.expr)
		if !ok {
			return 0, false
		}
		if b.Inclusive {
			t = t.Add(day)
		}
		if t.Before(hi) {
			hi = t
		}
	}
	if lo.IsZero() || hi.IsZero() {
		return 0, false
	}
	return max(0, hi.Sub(lo).Hours()), true
}

// constTime reads a time literal ('2026-02-01', '2026-02-01 12:00', ...),
// as UTC: a few hours' difference does not change an estimate of buckets.
func constTime(e syntax.Expr) (time.Time, bool) {
	s, ok := constString(e)
	if !ok {
		return time.Time{}, false
	}
	v := strings.TrimSpace(s)
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05Z07:00",
		"2006-01-02 15:04:05Z07", "2006-01-02 15:04:05.999999", "2006-01-02T15:04:05.999Z", "2006-01-02 15:04:05Z07:00"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// keyedOrFixed reports whether dimension col is a GROUP BY key as it is,
// or fixed to one value by a WHERE conjunct "col = constant".
func (m *matcher) keyedOrFixed(col string) bool {
	isCol := func(e syntax.Expr) bool {
		c, ok := e.(*syntax.ColRef)
		if !ok {
			return false
		}
		name, why := m.column(c)
		return why == "" && name == col
	}
	isConst := func(e syntax.Expr) bool {
		switch e.(type) {
		case *syntax.Const, *syntax.Param:
			return true
		}
		return false
	}
	for _, k := range m.keys {
		if isCol(k.e) {
			return true
		}
	}
	for _, f := range m.pushed {
		switch f := f.(type) {
		case *syntax.OpExpr:
			if f.Op == "=" && f.Schema == "" && (isCol(f.Left) && isConst(f.Right) || isConst(f.Left) && isCol(f.Right)) {
				return true
			}
		case *syntax.In:
			if !f.Not && len(f.List) == 1 && isCol(f.Arg) && isConst(f.List[0]) {
				return true
			}
		}
	}
	return false
}

// truncatesToGrain reports whether key e is date_trunc('<grain>', time)
// (with the rollup's zone, if any), time::date on a daily rollup, or one
// of those under casts: one value per bucket, a different one for each.
func (m *matcher) truncatesToGrain(e syntax.Expr) bool {
	toDate := false
	for {
		c, ok := e.(*syntax.Cast)
		if !ok {
			break
		}
		if len(c.Type.Names) > 0 && c.Type.Names[len(c.Type.Names)-1] == "date" && c.Type.Array == 0 {
			toDate = true
		}
		e = c.Arg
	}
	isTime := m.isTime
	if isTime(e) {
		return toDate && m.r.Grain == catalog.Day
	}
	f, ok := e.(*syntax.FuncCall)
	if !ok || len(f.Name) == 0 || f.Name[len(f.Name)-1] != "date_trunc" || len(f.Args) < 2 || len(f.Args) > 3 {
		return false
	}
	unit, ok := f.Args[0].(*syntax.Const)
	if !ok || unit.Type != "str" || !strings.EqualFold(unit.Val, string(m.r.Grain)) || !isTime(f.Args[1]) {
		return false
	}
	if len(f.Args) == 3 {
		zone, ok := f.Args[2].(*syntax.Const)
		return ok && zone.Type == "str" && zone.Val == m.r.TimeZone
	}
	return true
}

// uncast returns e without the casts around it.
func uncast(e syntax.Expr) syntax.Expr {
	for {
		c, ok := e.(*syntax.Cast)
		if !ok {
			return e
		}
		e = c.Arg
	}
}

// isTime reports whether e is the time column, possibly under casts.
func (m *matcher) isTime(e syntax.Expr) bool {
	e = uncast(e)
	c, ok := e.(*syntax.ColRef)
	if !ok {
		return false
	}
	name, why := m.column(c)
	return why == "" && name == m.r.TimeColumn
}
