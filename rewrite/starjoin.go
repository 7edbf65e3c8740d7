package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// A star join: the fact table (the one a rollup reads) joined to a
// dimension table, aggregated over the joined rows, as in
//
//	SELECT c.region, count(DISTINCT e.user_id), count(*) FROM events e
//	JOIN countries c ON c.code = e.country WHERE ... GROUP BY c.region
//
// is answered by aggregating the fact table first, per value of the fact
// columns the rest of the statement reads (the join keys, say), from the
// rollup: a Nested plan whose arm returns, per such key, the merged HLL
// sketch (not its estimate), the count and the sums. PostgreSQL then joins
// those rows to the dimension table and aggregates them again: the
// sketches are united (hll_union_agg) and estimated by pgsketch's own
// estimator (pgsketch.hll_estimate, whose error the notice states; the
// extension's hll_cardinality is classic HyperLogLog, biased by up to a few
// per cent between 2.5 and 5 times the number of registers), counts and
// sums added. Every joined row of the original statement is a
// fact row with the key values of its arm row, joined to the same
// dimension rows, so the answer is the original's however many dimension
// rows match a key (a key matching two rows counts twice, as in the
// original; a key matching none drops, or keeps NULLs under LEFT JOIN):
// distinct counts are never summed, and counts and sums stay exact.

// planStarJoin plans s as a star join, or says why not, for a subquery of
// a larger statement: every distinct count is estimated in PostgreSQL.
func planStarJoin(s *syntax.Select, snap *catalog.Snapshot, sess env) (*built, string) {
	return starJoinPlan(s, snap, sess, false)
}

// planWholeStarJoin plans s as a star join, or says why not, for the whole
// statement: the distinct counts it returns as they are (see
// proxyEstimated) are estimated by the proxy.
func planWholeStarJoin(s *syntax.Select, snap *catalog.Snapshot, sess env) (*built, string) {
	return starJoinPlan(s, snap, sess, true)
}

func starJoinPlan(s *syntax.Select, snap *catalog.Snapshot, sess env, whole bool) (*built, string) {
	s, checks, why := unnestWindowList(s, snap)
	if why != "" {
		return nil, why
	}
	sj, why := readStarJoin(s, snap, sess)
	if why != "" {
		return nil, why
	}
	hll := snap.HLL()
	if !hll.Installed() {
		return nil, "a join's distinct counts are united in PostgreSQL, and the database has no hll extension"
	}
	arm, aggOf, why := sj.arm(s)
	if why != "" {
		return nil, why
	}
	ab, why := planTable(arm, catalog.HLL, snap, sess)
	b := ab.rollup()
	switch {
	case ab == nil:
		return nil, "the fact table " + refName(sj.fact) + " per join key: " + why
	case b == nil:
		return nil, "the fact table " + refName(sj.fact) + " per join key: no rollup answers its APPROX_COUNT_DISTINCT"
	}
	for i := range b.Aggs {
		switch a := &b.Aggs[i]; a.Op {
		case MergeHLL:
			a.Sketch, a.Type = true, "bytea"
		case Exact:
			// COUNT(DISTINCT) with pgsketch.approx off: exact counts per
			// key do not add up.
			return nil, "the exact " + a.Expr + " cannot be regrouped"
		}
	}
	var byProxy map[*syntax.FuncCall]bool
	var estimated []int
	if whole {
		byProxy, estimated = proxyEstimated(s, aggOf)
	}
	hook := sj.outerHook(b, aggOf, hll, byProxy)
	from, united := sj.outerFrom(s, hook)
	var where []string
	for _, c := range sj.outer {
		where = append(where, syntax.SQL(c, hook))
	}
	if e := sj.edgeCheck(); e != "" {
		where = append(where, e)
	}
	where = append(where, checks...)
	text := selectSQL(s, from, strings.Join(where, " AND "), true, hook)
	if strings.Count(text, syntax.ArmMarker(0)) != 1 {
		// The statement spells the marker itself, in a literal say.
		return nil, "the statement around the arm cannot be printed with its marker " + syntax.ArmMarker(0)
	}
	before, after, _ := strings.Cut(text, syntax.ArmMarker(0))
	if per := strings.Join(append(slices.Clone(sj.keys), sj.exprKeys...), ", "); per != "" {
		b.Notice += ", its sketches per " + per + united
	} else {
		b.Notice += ", its sketches" + strings.Replace(united, " per group", "", 1)
	}
	pl := &plan.Nested{Outer: []string{before, after}, Arms: []*plan.Rollup{b}, Head: plan.Head{Rollup: b.Rollup, Source: b.Source,
		Guard: b.Guard, StdErr: b.StdErr, Notice: b.Notice}}
	pl.OuterParams = paramsIn(before + " " + after)
	if len(estimated) > 0 {
		pl.Estimated, pl.Columns = estimated, len(s.Targets)
	}
	return &built{Plan: pl}, ""
}

// proxyEstimated picks the distinct counts of a whole statement that the
// outer statement may return as united sketches for the proxy to estimate
// (pgsketch.hll_estimate in SQL costs milliseconds per sketch): an output
// column that is the aggregate itself, in a statement without DISTINCT
// (which would compare the sketches) and without an ORDER BY item that
// names an output column by number or name (which would sort them). The
// same aggregate written again in HAVING or ORDER BY is another node,
// estimated in SQL by the same estimator.
func proxyEstimated(s *syntax.Select, aggOf map[*syntax.FuncCall]int) (map[*syntax.FuncCall]bool, []int) {
	if s.Distinct {
		return nil, nil
	}
	named, numbered := map[string]bool{}, map[int]bool{}
	for _, o := range s.OrderBy {
		switch e := o.Expr.(type) {
		case *syntax.Const:
			n, err := strconv.Atoi(e.Val)
			if e.Type != "int" || err != nil {
				return nil, nil
			}
			numbered[n-1] = true
		case *syntax.ColRef:
			if len(e.Parts) == 1 {
				named[e.Parts[0]] = true
			}
		}
	}
	var byProxy map[*syntax.FuncCall]bool
	var cols []int
	for i, t := range s.Targets {
		if t.Star {
			return nil, nil
		}
		f, ok := t.Expr.(*syntax.FuncCall)
		if _, agg := aggOf[f]; !ok || !agg {
			continue
		}
		if k := classifyAgg(unfiltered(f)); k != countDistinct && k != approxCountDistinct {
			continue
		}
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		if named[name] || numbered[i] {
			continue
		}
		if byProxy == nil {
			byProxy = map[*syntax.FuncCall]bool{}
		}
		byProxy[f] = true
		cols = append(cols, i)
	}
	return byProxy, cols
}

// outerHook prints the statement's expressions over the arm's rows: keys
// and fact columns as the arm's columns, by the fact table's name, and
// aggregates as merges of the arm's (aggOf gives their columns; the plan's
// own Agg names are internal to the arm).
func (sj starJoin) outerHook(b *plan.Rollup, aggOf map[*syntax.FuncCall]int, hll catalog.Extension, byProxy map[*syntax.FuncCall]bool) func(syntax.Expr) (string, bool) {
	q := catalog.QuoteIdent(refName(sj.fact)) + "."
	hs := catalog.QuoteIdent(hll.Schema) + "."
	var hook func(e syntax.Expr) (string, bool)
	hook = func(e syntax.Expr) (string, bool) {
		if o, ok := e.(*syntax.OpExpr); ok {
			if w, ok := sj.windows[o]; ok {
				return sj.windowSQL(w, q, hook), true
			}
		}
		if k := sj.exprKey(e); k != "" {
			return q + k, true
		}
		if c, ok := e.(*syntax.ColRef); ok && sj.timeRefs[c] {
			return q + sj.timeKey, true
		}
		if c, ok := e.(*syntax.ColRef); ok && sj.side(c) == "fact" {
			// The arm's column of that name, by the arm's alias.
			return q + catalog.QuoteIdent(c.Parts[len(c.Parts)-1]), true
		}
		f, ok := e.(*syntax.FuncCall)
		if !ok {
			return "", false
		}
		i, ok := aggOf[f]
		if !ok {
			return "", false
		}
		col := q + catalog.QuoteIdent(armAggName(i))
		filter := ""
		if f.Filter != nil {
			filter = " FILTER (WHERE " + syntax.SQL(f.Filter, hook) + ")"
		}
		switch classifyAgg(unfiltered(f)) {
		case countDistinct, approxCountDistinct:
			united := hs + "hll_send(" + hs + "hll_union_agg(CAST(" + col + " AS " + hs + "hll))" + filter + ")"
			if byProxy[f] {
				return united, true
			}
			return "CAST(COALESCE(pgsketch.hll_estimate(" + united + "), 0) AS bigint)", true
		case countRows:
			if sj.dimKept {
				// A dimension row without facts is one joined row.
				col = "COALESCE(" + col + ", 1)"
			}
			return "CAST(COALESCE(sum(" + col + ")" + filter + ", 0) AS bigint)", true
		case countValues:
			return "CAST(COALESCE(sum(" + col + ")" + filter + ", 0) AS bigint)", true
		case sumOf:
			return "CAST(sum(" + col + ")" + filter + " AS " + aggType(b, unfiltered(f)) + ")", true
		case minOf:
			return "min(" + col + ")" + filter, true
		case maxOf:
			return "max(" + col + ")" + filter, true
		}
		return "", false
	}
	return hook
}

// outerFrom prints the FROM clause around the arm (armMarker(0)), and how
// the notice says the sketches are united.
func (sj starJoin) outerFrom(s *syntax.Select, hook func(syntax.Expr) (string, bool)) (from, united string) {
	from = syntax.ArmMarker(0) + " AS " + catalog.QuoteIdent(refName(sj.fact))
	united = " united across the join by PostgreSQL"
	switch {
	case len(sj.dims) == 0:
		united = " united per group by PostgreSQL"
	case len(sj.dims) > 1:
		// The join tree as written, the fact table's leaf the arm.
		var items []string
		for _, fi := range s.From {
			items = append(items, sj.fromTree(fi, from, hook, true))
		}
		from = strings.Join(items, ", ")
	case sj.kind == "":
		from += ", " + fromSQL(sj.dims[0])
	case sj.dimKept:
		from = fromSQL(sj.dims[0]) + " LEFT JOIN " + from + " ON " + syntax.SQL(sj.on, hook)
	default:
		from += " " + sj.kind + " " + fromSQL(sj.dims[0]) + " ON " + syntax.SQL(sj.on, hook)
	}
	return from, united
}

// armAggName names the arm's i-th aggregate column.
func armAggName(i int) string { return "pgsketch_a" + strconv.Itoa(i+1) }

// aggType is the SQL type of the arm's aggregate f (the plan's Aggs are
// f's, written with bare column names).
func aggType(b *plan.Rollup, f *syntax.FuncCall) string {
	bare := syntax.SQL(f, func(x syntax.Expr) (string, bool) {
		if c, ok := x.(*syntax.ColRef); ok {
			return catalog.QuoteIdent(c.Parts[len(c.Parts)-1]), true
		}
		return "", false
	})
	for _, a := range b.Aggs {
		if a.Expr == bare {
			return a.Type
		}
	}
	return "numeric"
}

// starJoin is a statement read as a star join.
type starJoin struct {
	fact syntax.FromItem
	// dims are the other tables of the join: one, or more when the join
	// tree is printed as written around the arm.
	dims []syntax.FromItem
	// kind and on are the join's of two tables: "JOIN", "LEFT JOIN", or
	// "" for a comma join.
	kind string
	// dimKept: the join is dimension LEFT JOIN fact.
	dimKept bool
	// ons are the ON conditions of a join of three tables or more.
	ons []syntax.Expr
	on  syntax.Expr
	// inner are the WHERE conjuncts on fact columns only (the arm's),
	// outer the others.
	inner, outer []syntax.Expr
	// keys are the fact columns read outside the aggregates and the
	// inner conjuncts; exprKeys the GROUP BY items that read only fact
	// columns and are not one (a time bucket, say), by their text.
	keys     []string
	exprKeys []string
	exprs    []syntax.Expr
	// factCols are the fact table's columns (as the catalog read them).
	factCols []string
	// rollup is one rollup over the fact table: its time column and
	// grain are those of every rollup over it that answers the arm's
	// bucket key (the planner checks).
	rollup *catalog.Rollup
	// rollups are every rollup over the fact table, rollup among them.
	rollups []*catalog.Rollup
	// timeRefs are the references to the time column in FILTER
	// conditions that compare it with a bucket boundary, and timeKey
	// the bucket key that stands for them over the arm's rows.
	timeRefs map[*syntax.ColRef]bool
	timeKey  string
	// windows are the conditions of a join to a series (window.go) that
	// compare the time column with a window bound, read on the bucket
	// key; span is the time range the arm reads for them, as SQL (two
	// timestamptz literals, or expressions of the series' start and stop).
	windows map[*syntax.OpExpr]windowBound
	span    [2]string
}

// exprKey is the arm's column of a key expression, or "".
func (sj starJoin) exprKey(e syntax.Expr) string {
	if i := slices.Index(sj.exprKeys, syntax.SQL(e, nil)); i >= 0 {
		return "pgsketch_g" + strconv.Itoa(i+1)
	}
	return ""
}

// arm is the statement over the fact table alone that the star join's
// arm answers: per key, each aggregate of s (named armAggName(i)); aggOf
// maps s's aggregate calls to their index.
func (sj starJoin) arm(s *syntax.Select) (*syntax.Select, map[*syntax.FuncCall]int, string) {
	arm := &syntax.Select{From: []syntax.FromItem{sj.fact}}
	q := refName(sj.fact)
	for _, k := range sj.keys {
		arm.Targets = append(arm.Targets, syntax.Target{Name: k, Expr: &syntax.ColRef{Parts: []string{q, k}}})
		arm.GroupBy = append(arm.GroupBy, &syntax.ColRef{Parts: []string{q, k}})
	}
	for _, e := range sj.exprs {
		arm.Targets = append(arm.Targets, syntax.Target{Name: sj.exprKey(e), Expr: e})
		arm.GroupBy = append(arm.GroupBy, e)
	}
	switch len(sj.inner) {
	case 0:
	case 1:
		arm.Where = sj.inner[0]
	default:
		arm.Where = &syntax.BoolExpr{Op: "AND", Args: sj.inner}
	}
	aggOf := map[*syntax.FuncCall]int{}
	s.EachExpr(func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			f, ok := x.(*syntax.FuncCall)
			if !ok || !isAggregate(f) {
				return true
			}
			if _, seen := aggOf[f]; !seen {
				aggOf[f] = len(aggOf)
				arm.Targets = append(arm.Targets, syntax.Target{Name: armAggName(aggOf[f]), Expr: unfiltered(f)})
			}
			return false
		})
	})
	if len(aggOf) == 0 {
		return nil, nil, "no aggregate"
	}
	return arm, aggOf, ""
}

// fromSQL prints a plain table FROM item, or a series.
func fromSQL(fi syntax.FromItem) string {
	if fi.Func != nil {
		s := syntax.SQL(fi.Func, nil) + " AS " + catalog.QuoteIdent(fi.Alias)
		if len(fi.FuncCols) > 0 {
			s += "(" + catalog.QuoteIdent(fi.FuncCols[0]) + ")"
		}
		return s
	}
	s := catalog.QuoteIdent(fi.Name)
	if fi.Schema != "" {
		s = catalog.QuoteIdent(fi.Schema) + "." + s
	}
	if fi.Alias != "" {
		s += " AS " + catalog.QuoteIdent(fi.Alias)
	}
	return s
}

// isAggregate reports whether f is an aggregate call the star join
// reaggregates: GROUPING(...) is evaluated by PostgreSQL over the arm's
// keys instead.
func isAggregate(f *syntax.FuncCall) bool {
	return !f.IsGrouping() && classifyAgg(f) != notAgg
}

// unfiltered is aggregate call f without its FILTER clause.
func unfiltered(f *syntax.FuncCall) *syntax.FuncCall {
	if f.Filter == nil {
		return f
	}
	g := *f
	g.Filter = nil
	return &g
}

// hasFilter reports whether an aggregate of s has a FILTER clause.
func hasFilter(s *syntax.Select) bool {
	return s.AnyExpr(func(x syntax.Expr) bool {
		f, ok := x.(*syntax.FuncCall)
		return ok && f.Filter != nil
	})
}

// fromTree prints a join tree with the fact table's leaf as arm (its
// text), parenthesizing joins below the top.
func (sj starJoin) fromTree(fi syntax.FromItem, arm string, hook func(syntax.Expr) (string, bool), top bool) string {
	j := onJoin(fi) // joinLeaves read no other join
	if j == nil {
		if refName(fi) == refName(sj.fact) {
			return arm
		}
		return fromSQL(fi)
	}
	t := sj.fromTree(j.Left, arm, hook, false) + " " + j.Type + " " + sj.fromTree(j.Right, arm, hook, false) +
		" ON " + syntax.SQL(j.On, hook)
	if !top {
		t = "(" + t + ")"
	}
	return t
}
