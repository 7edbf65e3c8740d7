package rewrite

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Top-k: the most frequent values of a column that is not a rollup
// dimension, asked in either of two forms over one table:
//
//	SELECT [keys,] item, count(*) [AS n] FROM t WHERE ...
//	GROUP BY [keys,] item ORDER BY count(*) | n | 2 DESC [, ...] LIMIT k [OFFSET o]
//
//	SELECT [keys,] item, count(*) FROM t WHERE ...
//	GROUP BY [keys,] item HAVING count(*) >= T | > T [ORDER BY ...] [LIMIT ...]
//
// answered from a rollup's frequent-items summaries of item (a TopK
// measure), the other keys being the rollup's dimensions or time buckets.
// The summaries are planned as the arm SELECT keys, <summary of item> FROM
// t WHERE ... GROUP BY keys: the usual matching rules, the range split
// between whole buckets and base rows, changed buckets read raw. The
// executor draws candidates from the merged summaries; in verified mode it
// counts them with the query's own FROM and WHERE (TopKSpec.CountSQL) and
// returns the answer only when the summaries' bounds prove that no
// uncounted item could change it. PostgreSQL then shapes the counts with
// the query's own select list, ORDER BY and LIMIT (ShapeSQL).
//
// The proof needs an ORDER BY that starts with the count, descending, so
// that LIMIT keeps the largest counts; or a HAVING that is one threshold on
// the count, so that only items above it are kept. Any other HAVING could
// drop rows the proof counts on: passed through.

// topkShape reports whether s has the outer shape of a top-k: GROUP BY,
// LIMIT or HAVING, and no aggregate but count(*). Only then does planTopK
// decide.
func topkShape(s *syntax.Select) bool {
	if len(s.GroupBy) == 0 || s.SetOp != "" || (s.Limit == nil && s.Having == nil) {
		return false
	}
	rows, other := false, false
	eachAggCall(s, func(f *syntax.FuncCall) {
		switch classifyAgg(f) {
		case notAgg:
		case countRows:
			rows = true
		default:
			other = true
		}
	})
	return rows && !other
}

// eachAggCall calls f on each function call where aggregates may be: in
// the select list, HAVING and ORDER BY.
func eachAggCall(s *syntax.Select, f func(*syntax.FuncCall)) {
	visit := func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if c, ok := x.(*syntax.FuncCall); ok {
				f(c)
			}
			return true
		})
	}
	for _, t := range s.Targets {
		visit(t.Expr)
	}
	visit(s.Having)
	for _, o := range s.OrderBy {
		visit(o.Expr)
	}
}

// planTopK plans a top-k statement (topkShape holds), or says why it is
// not answered.
func planTopK(s *syntax.Select, snap *catalog.Snapshot, sess env) (*built, string) {
	switch {
	case sess.TopK == TopKOff:
		return nil, "pgsketch.topk is off"
	case s.Unsupported != "":
		return nil, "query uses " + s.Unsupported
	case s.Distinct:
		return nil, "a top-k with SELECT DISTINCT"
	}
	if why := unanswerable(s, sess); why != "" {
		return nil, why
	}
	spec, why := topkClauses(s)
	if why != "" {
		return nil, why
	}
	fi := s.From[0]
	table, rollups := resolveTable(fi, snap, sess)
	if len(rollups) == 0 {
		return nil, "no rollup reads table " + table
	}
	best, why := bestRollup(rollups, func(r *catalog.Rollup) (*built, string) { return matchTopK(s, fi, r, sess, spec) })
	if best == nil {
		return nil, why
	}
	best.Header().Guard = guard(fi, best.Header().Source)
	return best, ""
}

// topkClauses reads the LIMIT, OFFSET, ORDER BY and HAVING of a top-k into
// a spec's Limit, Threshold and TotalOrder.
func topkClauses(s *syntax.Select) (plan.TopKSpec, string) {
	var spec plan.TopKSpec
	if s.Having != nil {
		t, ok := countThreshold(s.Having)
		if !ok {
			return spec, "HAVING other than one threshold count(*) >= T or count(*) > T (T an integer constant of at least 1)"
		}
		spec.Threshold = t
		return spec, ""
	}
	if len(s.OrderBy) == 0 || s.OrderBy[0].Dir != "DESC" || !isCount(s, s.OrderBy[0].Expr) {
		return spec, "a LIMIT without ORDER BY count(*) DESC first"
	}
	limit, ok := intConst(s.Limit)
	if !ok || limit < 1 {
		return spec, "LIMIT is not an integer constant of at least 1"
	}
	offset := int64(0)
	if s.Offset != nil {
		if offset, ok = intConst(s.Offset); !ok || offset < 0 {
			return spec, "OFFSET is not a non-negative integer constant"
		}
	}
	spec.Limit = limit + offset
	spec.TotalOrder = len(s.OrderBy) > 1
	return spec, ""
}

// isCount reports whether an ORDER BY item is the count: count(*) itself,
// the name of a select-list count(*), or its position.
func isCount(s *syntax.Select, e syntax.Expr) bool {
	isRows := func(e syntax.Expr) bool {
		f, ok := e.(*syntax.FuncCall)
		return ok && classifyAgg(f) == countRows
	}
	switch x := e.(type) {
	case *syntax.FuncCall:
		return isRows(x)
	case *syntax.Const:
		n, err := strconv.Atoi(x.Val)
		return x.Type == "int" && err == nil && n >= 1 && n <= len(s.Targets) && isRows(s.Targets[n-1].Expr)
	case *syntax.ColRef:
		if len(x.Parts) != 1 {
			return false
		}
		for _, t := range s.Targets {
			if t.Name == x.Parts[0] {
				return isRows(t.Expr)
			}
		}
	}
	return false
}

// countThreshold reads HAVING count(*) >= T, count(*) > T, T <= count(*)
// or T < count(*), returning the least count kept.
func countThreshold(e syntax.Expr) (int64, bool) {
	o, ok := e.(*syntax.OpExpr)
	if !ok || o.Schema != "" || o.Left == nil {
		return 0, false
	}
	op, agg, val := o.Op, o.Left, o.Right
	if _, isConst := o.Left.(*syntax.Const); isConst {
		agg, val = o.Right, o.Left
		op = map[string]string{"<=": ">=", "<": ">"}[op]
	}
	f, ok := agg.(*syntax.FuncCall)
	if !ok || classifyAgg(f) != countRows {
		return 0, false
	}
	t, ok := intConst(val)
	switch {
	case !ok:
		return 0, false
	case op == ">":
		t++
	case op != ">=":
		return 0, false
	}
	return t, t >= 1
}

// intConst reads an integer constant.
func intConst(e syntax.Expr) (int64, bool) {
	c, ok := e.(*syntax.Const)
	if !ok || c.Type != "int" {
		return 0, false
	}
	n, err := strconv.ParseInt(c.Val, 10, 64)
	return n, err == nil && n < 1<<40
}

// matchTopK plans s over rollup r: it finds the item among the group keys
// (the one column r keeps a TopK measure of and has no dimension for), plans
// the summaries' arm over the other keys, and adds the exact count
// statement and the shape.
func matchTopK(s *syntax.Select, fi syntax.FromItem, r *catalog.Rollup, sess env, spec plan.TopKSpec) (*built, string) {
	m := &matcher{s: s, fi: fi, r: r, sess: sess}
	item, ms, others, why := m.topkKeys(&spec)
	if item == nil {
		return nil, why
	}
	if capacity := int64(1) << ms.Log2m; spec.Limit > capacity/2 {
		return nil, fmt.Sprintf("LIMIT and OFFSET reach %d, more than half the %d items a summary of %s tracks", spec.Limit, capacity, catalog.QuoteIdent(ms.Expression))
	}
	b, why := matchRollup(summaryArm(s, others, item), catalog.TopK, fi, r, sess)
	if b == nil {
		return nil, why
	}
	a := b.rollup()
	if a == nil || len(a.Aggs) != 1 || a.Aggs[0].Op != MergeFreq {
		return nil, "the summaries of " + catalog.QuoteIdent(ms.Expression) + " are not answered for its type"
	}
	// The arm's aggregate is no call of the query's: say what it is.
	a.Aggs[0].Expr = "the top-k summaries of " + m.canon(item)
	// The shape: the query over the counted groups.
	for _, f := range countCalls(s) {
		m.aggs = append(m.aggs, &aggInfo{f: f, canon: m.canon(f), kind: countRows, name: "pgsketch_a" + strconv.Itoa(len(m.aggs)+1)})
	}
	shape, why := m.shapeSQL()
	if why != "" {
		return nil, why
	}
	p := &plan.TopK{Head: plan.Head{Rollup: r.Name, Source: r.Source}, Groups: plan.Groups{ShapeSQL: shape}, Arm: a}
	for i, k := range m.keys {
		key := plan.Key{Name: k.name, Expr: k.canon}
		if i == spec.ItemKey {
			key.Type = ms.Type
		}
		p.Keys = append(p.Keys, key)
	}
	for _, g := range m.aggs {
		p.Aggs = append(p.Aggs, plan.Agg{Name: g.name, Expr: g.canon, Op: AddCounts, Type: "bigint", RollupColumn: -1, BaseColumn: -1, ExactColumn: -1})
	}
	m.countSpec(&spec, item, ms.Type, a.Aggs[0].ValueForm)
	p.Spec = &spec
	return &built{Plan: p, rows: b.rows}, ""
}

// topkKeys records the distinct GROUP BY items of a top-k as m's keys and
// finds the item among them: the first that is a column r keeps a TopK
// measure of and has no dimension for. It returns the item, that measure
// and the other keys, setting spec's ItemKey; or a nil item and why.
func (m *matcher) topkKeys(spec *plan.TopKSpec) (item syntax.Expr, ms catalog.Measure, others []syntax.Expr, why string) {
	for _, g := range m.s.GroupBy {
		e, why := m.resolveGroupItem(g)
		if e == nil {
			return nil, ms, nil, why
		}
		canon := m.canon(e)
		dup := false
		for _, k := range m.keys {
			dup = dup || k.canon == canon
		}
		if dup {
			continue
		}
		m.keys = append(m.keys, &keyInfo{e: e, canon: canon, name: "pgsketch_k" + strconv.Itoa(len(m.keys)+1)})
		if c, ok := e.(*syntax.ColRef); ok && item == nil {
			if col, why := m.column(c); why == "" {
				if _, dim := m.r.Dimension(col); !dim {
					if x, ok := m.r.Measure(catalog.TopK, col); ok {
						item, ms, spec.ItemKey = e, x, len(m.keys)-1
						continue
					}
				}
			}
		}
		others = append(others, e)
	}
	if item == nil {
		return nil, ms, nil, "no GROUP BY column has a top-k summary in the rollup"
	}
	return item, ms, others, ""
}

// summaryArm is the statement whose rollup plan gives a top-k's summaries:
// SELECT others, <summary of item> FROM t WHERE ... GROUP BY others.
func summaryArm(s *syntax.Select, others []syntax.Expr, item syntax.Expr) *syntax.Select {
	arm := &syntax.Select{From: s.From, Where: s.Where, GroupBy: others}
	for _, e := range others {
		arm.Targets = append(arm.Targets, syntax.Target{Expr: e})
	}
	arm.Targets = append(arm.Targets, syntax.Target{Expr: &syntax.FuncCall{Name: []string{"pgsketch", "approx_count_distinct"}, Args: []syntax.Expr{item}}})
	return arm
}

// countSpec completes spec with the item (its type and its form in the
// summaries given) and the exact count of candidates: its statement, the
// array type the candidates are bound as and the query's parameters it
// reads.
func (m *matcher) countSpec(spec *plan.TopKSpec, item syntax.Expr, itemType, itemForm string) {
	s := m.s
	spec.Item, spec.ItemType, spec.ItemForm = m.canon(item), itemType, itemForm
	spec.ArrayType = "text[]"
	if spec.ItemForm != "text" {
		spec.ArrayType = "bigint[]"
	}
	spec.CountSQL = countStatement(s, m.keys, item, spec.ArrayType, maxParam(s))
	for _, n := range paramsIn(spec.CountSQL) {
		if n <= maxParam(s) { // not the candidates, which the executor binds
			spec.CountParams = append(spec.CountParams, n)
		}
	}
}

// countCalls lists the query's count(*) calls, one per distinct spelling.
func countCalls(s *syntax.Select) []*syntax.FuncCall {
	var out []*syntax.FuncCall
	seen := map[string]bool{}
	eachAggCall(s, func(f *syntax.FuncCall) {
		if c := syntax.SQL(f, nil); classifyAgg(f) == countRows && !seen[c] {
			seen[c] = true
			out = append(out, f)
		}
	})
	return out
}

// countStatement prints the exact count of candidates: the query's FROM
// and WHERE, the item in $n+1 (an array of arrayType), grouped by the
// keys; and in a second arm, run only when $n+2 is true, the NULL item.
// (A condition "item = ANY(...) OR item IS NULL" would keep PostgreSQL
// from reading an index on the item, or on the item and the time column,
// as "item = ANY(...)" alone lets it.)
func countStatement(s *syntax.Select, keys []*keyInfo, item syntax.Expr, arrayType string, n int) string {
	f := s.From[0]
	from := ""
	if f.Schema != "" {
		from = catalog.QuoteIdent(f.Schema) + "."
	}
	from += catalog.QuoteIdent(f.Name)
	if f.Alias != "" {
		from += " AS " + catalog.QuoteIdent(f.Alias)
	}
	var cols, pos []string
	for i, k := range keys {
		cols = append(cols, syntax.SQL(k.e, nil))
		pos = append(pos, strconv.Itoa(i+1))
	}
	it := syntax.SQL(item, nil)
	arm := func(cond string) string {
		if s.Where != nil {
			cond = "(" + syntax.SQL(s.Where, nil) + ") AND " + cond
		}
		return "SELECT " + strings.Join(cols, ", ") + ", count(*) FROM " + from + " WHERE " + cond + " GROUP BY " + strings.Join(pos, ", ")
	}
	return arm(it+" = ANY(CAST($"+strconv.Itoa(n+1)+" AS "+arrayType+"))") + " UNION ALL " +
		arm(it+" IS NULL AND CAST($"+strconv.Itoa(n+2)+" AS boolean)")
}
