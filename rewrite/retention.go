package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Retention grids: how many of one period's users were active in another,
// written as analysts write it, a self-join of two sets of (period, user)
// pairs on the user, grouped by both periods:
//
//	WITH act AS (SELECT DISTINCT date_trunc('week', created_at) AS week, user_id FROM events [WHERE ...])
//	SELECT a.week, b.week, count(*) FROM act a JOIN act b ON a.user_id = b.user_id AND b.week > a.week
//	GROUP BY 1, 2 ORDER BY 1, 2
//
// (each set also as a subquery in FROM, a comma join with the conditions
// in WHERE, count(DISTINCT a.user_id) for count(*)). Because both sets are
// DISTINCT, a cell (pa, pb) counts the users in set 1's period pa and set
// 2's period pb: the intersection of two sketches. Each set is planned as
// SELECT period, count(DISTINCT user) ... GROUP BY period over a rollup's
// Theta measure; the executor has PostgreSQL evaluate the conditions on
// the periods (PeriodCondSQL), intersects the sketches of each pair that
// meets them, counts exactly in one more statement (CellSQL) the cells
// whose relative error is over pgsketch.max_overlap_error, leaves out the
// cells that are exactly empty (the join has no row for them), and has
// PostgreSQL shape the cells (ShapeSQL over CellsRelation).

// pairedSets is a join of two FROM items and the conditions that join them.
type pairedSets struct {
	items [2]syntax.FromItem
	conds []syntax.Expr
}

// joinedPair reads the FROM clause of s as two items joined (JOIN ... ON,
// or a comma join), with the ON and WHERE conjuncts.
func joinedPair(s *syntax.Select) (pairedSets, bool) {
	var ps pairedSets
	switch {
	case len(s.From) == 1 && innerJoin(s.From[0]) != nil:
		j := innerJoin(s.From[0])
		ps.items = [2]syntax.FromItem{j.Left, j.Right}
		ps.conds = conjuncts(j.On)
	case len(s.From) == 2:
		ps.items = [2]syntax.FromItem{s.From[0], s.From[1]}
	default:
		return ps, false
	}
	for _, it := range ps.items {
		if it.Join != nil {
			return ps, false
		}
	}
	ps.conds = append(ps.conds, conjuncts(s.Where)...)
	return ps, true
}

// cteBodies are a WITH clause's common table expressions by name, or nil
// unless it is plain and not recursive.
func cteBodies(w *syntax.With) map[string]*syntax.Select {
	if w == nil || w.Recursive || !w.Plain {
		return nil
	}
	out := make(map[string]*syntax.Select, len(w.Names))
	for i, n := range w.Names {
		out[n] = w.Bodies[i]
	}
	return out
}

// retentionShape reports whether s looks like a retention grid: two FROM
// items joined, grouped. Only then does planRetention decide.
func retentionShape(s *syntax.Select) bool {
	ps, ok := joinedPair(s)
	return ok && len(s.GroupBy) > 0 && (plainQuery(ps.items[0]) != nil || cteBodies(s.With)[ps.items[0].Name] != nil)
}

// periodSet is one side of a retention grid: SELECT DISTINCT period, col
// FROM t WHERE ..., referred to as ref.
type periodSet struct {
	ref        string
	sel        *syntax.Select
	period     syntax.Expr
	periodName string
	col        string
}

// readPeriodSet reads a FROM item of a grid as a period set.
func readPeriodSet(it syntax.FromItem, ctes map[string]*syntax.Select) (periodSet, string) {
	ps := periodSet{ref: refName(it), sel: plainQuery(it)}
	if ps.sel == nil && it.Schema == "" {
		ps.sel = ctes[it.Name]
	}
	s := ps.sel
	switch {
	case s == nil:
		return ps, refName(it) + " is not a subquery or a common table expression"
	case len(s.From) == 1 && s.From[0].Schema == "" && ctes[s.From[0].Name] != nil:
		return ps, refName(it) + " reads the common table expression " + s.From[0].Name + ", not a table"
	case s.Unsupported != "" || s.SetOp != "":
		return ps, refName(it) + " uses " + s.Unsupported
	case !s.Distinct:
		return ps, refName(it) + " is not SELECT DISTINCT: the join would count a user once per row"
	case len(s.Targets) != 2 || len(s.From) != 1 || s.From[0].Unsupported != "":
		return ps, refName(it) + " selects other than a period and a column of one table"
	case len(s.GroupBy) > 0 || s.Having != nil || s.Limit != nil || s.Offset != nil:
		return ps, refName(it) + " has GROUP BY, HAVING, LIMIT or OFFSET"
	}
	for _, t := range s.Targets {
		if c, ok := t.Expr.(*syntax.ColRef); ok && ps.col == "" && (t.Name == "" || t.Name == c.Parts[len(c.Parts)-1]) {
			col, why := ownColumn(c, s.From[0])
			if why != "" {
				return ps, refName(it) + ": " + why
			}
			ps.col = col
			continue
		}
		ps.period, ps.periodName = t.Expr, t.Name
		if ps.periodName == "" {
			ps.periodName = syntax.ColumnName(t.Expr)
		}
	}
	if ps.col == "" || ps.period == nil {
		return ps, refName(it) + " selects no plain column beside its period"
	}
	return ps, ""
}

// gridRef says what a column reference of the outer query names: the
// period (0 or 1 for set 1 or 2), the counted column (2 or 3), or -1.
func gridRef(c *syntax.ColRef, sets [2]periodSet) int {
	if len(c.Parts) != 2 {
		return -1
	}
	for i, ps := range sets {
		switch {
		case c.Parts[0] != ps.ref:
		case c.Parts[1] == ps.periodName:
			return i
		case c.Parts[1] == ps.col:
			return 2 + i
		}
	}
	return -1
}

// gridColumns are the names of CellsRelation's columns: set 1's period,
// set 2's period, the count.
var gridColumns = [3]string{"pgsketch_a", "pgsketch_b", "pgsketch_n"}

// planRetention plans a retention grid (retentionShape holds), or says why
// it is not answered.
func planRetention(s *syntax.Select, snap *catalog.Snapshot, sess env) (*built, string) {
	pair, _ := joinedPair(s)
	ctes := cteBodies(s.With)
	if s.Unsupported != "" && (s.Unsupported != "a WITH clause" || ctes == nil) {
		// A WITH clause the parser could not read (RECURSIVE, say), whose
		// names the sets' FROM could mean, or another construct (grouping
		// sets, a window clause, ...).
		return nil, "retention grid: query uses " + s.Unsupported
	}
	var sets [2]periodSet
	for i, it := range pair.items {
		ps, why := readPeriodSet(it, ctes)
		if why != "" {
			return nil, "retention grid: " + why
		}
		sets[i] = ps
	}
	switch {
	case sets[0].ref == sets[1].ref:
		return nil, "retention grid: both sets are called " + sets[0].ref
	case sets[0].col != sets[1].col:
		return nil, "retention grid: the sets select different columns"
	case s.Having != nil || s.Distinct:
		return nil, "retention grid with HAVING or DISTINCT"
	case !sess.Approx:
		return nil, "pgsketch.approx is off"
	case maxParam(s) > 0:
		return nil, "retention grid with parameters"
	}
	cond, why := gridConditions(pair.conds, sets)
	if why != "" {
		return nil, "retention grid: " + why
	}
	shape, why := gridShapeSQL(s, sets)
	if why != "" {
		return nil, "retention grid: " + why
	}
	var arms [2]*plan.Rollup
	var rows int64
	guard := ""
	for i, ps := range sets {
		q := &syntax.Select{
			Targets: []syntax.Target{{Expr: ps.period}, {Expr: &syntax.FuncCall{Name: []string{"count"}, Args: []syntax.Expr{&syntax.ColRef{Parts: []string{ps.col}}}, Distinct: true}}},
			From:    ps.sel.From, Where: ps.sel.Where, GroupBy: []syntax.Expr{&syntax.Const{Type: "int", Val: "1"}},
		}
		b, why := planTable(q, catalog.Theta, snap, sess)
		a := b.rollup()
		if a == nil {
			return nil, "retention grid: set " + ps.ref + ": " + why
		}
		r, ok := snap.Rollup(a.Rollup)
		if !ok || !slices.Contains(r.NotNull, ps.col) {
			return nil, "retention grid: column " + catalog.QuoteIdent(ps.col) + " is not declared NOT NULL"
		}
		if c := nullableColumn(ps.period, r.NotNull); c != "" {
			// A NULL period is a cell of the join; no sketch is kept for it.
			return nil, "retention grid: the period uses " + catalog.QuoteIdent(c) + ", which is not declared NOT NULL"
		}
		if i > 0 && a.Source != arms[0].Source {
			return nil, "retention grid: the sets are read from different tables"
		}
		if a.Guard != "" {
			guard = a.Guard
		}
		arms[i], rows = a, rows+b.rows
	}
	p := &plan.Retention{Head: plan.Head{Rollup: arms[0].Rollup, Source: arms[0].Source, Guard: guard},
		Arms: arms[:], PeriodCondSQL: cond, ShapeSQL: shape, CellSQL: cellSQL(sets, arms[0].Source)}
	return &built{Plan: p, rows: rows}, ""
}

// gridConditions finds the join on the counted column among conds and
// prints the others, which may name only the two periods, over
// CellsRelation's columns ("true" for none).
func gridConditions(conds []syntax.Expr, sets [2]periodSet) (string, string) {
	var rest []string
	joined := false
	for _, c := range conds {
		if o, ok := c.(*syntax.OpExpr); ok && o.Op == "=" && o.Schema == "" && !joined {
			l, lok := o.Left.(*syntax.ColRef)
			r, rok := o.Right.(*syntax.ColRef)
			if lok && rok {
				a, b := gridRef(l, sets), gridRef(r, sets)
				if a == 2 && b == 3 || a == 3 && b == 2 {
					joined = true
					continue
				}
			}
		}
		sql, ok := overCells(c, sets)
		if !ok {
			return "", "a join condition names more than the two periods: " + syntax.SQL(c, nil)
		}
		rest = append(rest, "("+sql+")")
	}
	if !joined {
		return "", "the sets are not joined on " + catalog.QuoteIdent(sets[0].col)
	}
	if len(rest) == 0 {
		return "true", ""
	}
	return strings.Join(rest, " AND "), ""
}

// overCells prints e with the periods as CellsRelation's columns; false
// when e names another column, a subquery or a parameter (the statement
// that evaluates it binds none).
func overCells(e syntax.Expr, sets [2]periodSet) (string, bool) {
	ok := true
	syntax.Walk(e, func(x syntax.Expr) bool {
		switch x := x.(type) {
		case *syntax.ColRef:
			if n := gridRef(x, sets); n != 0 && n != 1 {
				ok = false
			}
		case *syntax.Unsupported, *syntax.Param:
			ok = false
		}
		return ok
	})
	if !ok {
		return "", false
	}
	return syntax.SQL(e, func(x syntax.Expr) (string, bool) {
		if c, isRef := x.(*syntax.ColRef); isRef {
			return CellsRelation + "." + gridColumns[gridRef(c, sets)], true
		}
		return "", false
	}), true
}

// gridShapeSQL prints the outer query over CellsRelation: its select list
// (the two periods and the count, in any order), GROUP BY of both periods,
// ORDER BY and LIMIT.
func gridShapeSQL(s *syntax.Select, sets [2]periodSet) (string, string) {
	var cols []string
	var outs []int // which of gridColumns each select-list item is
	counts := 0
	for _, t := range s.Targets {
		n := -1
		switch e := t.Expr.(type) {
		case *syntax.ColRef:
			if g := gridRef(e, sets); g == 0 || g == 1 {
				n = g
			}
		case *syntax.FuncCall:
			k := classifyAgg(e)
			if k == countRows && e.Star || k == countDistinct && len(e.Args) == 1 && isCounted(e.Args[0], sets) {
				n, counts = 2, counts+1
			}
		}
		if t.Star || n < 0 {
			return "", "the select list holds other than the two periods and the count"
		}
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		cols = append(cols, CellsRelation+"."+gridColumns[n]+" AS "+syntax.QuoteIdent(name))
		outs = append(outs, n)
	}
	if counts != 1 {
		return "", "the select list has other than one count"
	}
	grouped := map[int]bool{}
	for _, g := range s.GroupBy {
		n := -1
		switch e := g.(type) {
		case *syntax.ColRef:
			n = gridRef(e, sets)
		case *syntax.Const:
			if i, err := strconv.Atoi(e.Val); err == nil && e.Type == "int" && i >= 1 && i <= len(outs) {
				n = outs[i-1]
			}
		}
		if n != 0 && n != 1 {
			return "", "GROUP BY holds other than the two periods"
		}
		grouped[n] = true
	}
	if !grouped[0] || !grouped[1] {
		return "", "GROUP BY does not hold both periods"
	}
	sql := "SELECT " + strings.Join(cols, ", ") + " FROM " + CellsRelation
	var order []string
	for _, o := range s.OrderBy {
		item, ok := orderItem(o, s, sets)
		if !ok {
			return "", "ORDER BY holds other than output columns and the periods"
		}
		order = append(order, item)
	}
	if len(order) > 0 {
		sql += " ORDER BY " + strings.Join(order, ", ")
	}
	for _, l := range []struct {
		kw string
		e  syntax.Expr
	}{{" LIMIT ", s.Limit}, {" OFFSET ", s.Offset}} {
		if l.e == nil {
			continue
		}
		c, ok := l.e.(*syntax.Const)
		if !ok || c.Type != "int" && c.Type != "null" {
			return "", "LIMIT or OFFSET is not a constant"
		}
		sql += l.kw + syntax.ConstSQL(c)
	}
	return sql, ""
}

// isCounted reports whether e is one set's counted column.
func isCounted(e syntax.Expr, sets [2]periodSet) bool {
	c, ok := e.(*syntax.ColRef)
	return ok && gridRef(c, sets) >= 2
}

// orderItem prints one ORDER BY item over the shaped query: a position or
// an output name as written, a period as its cells column.
func orderItem(o syntax.SortItem, s *syntax.Select, sets [2]periodSet) (string, bool) {
	if strings.HasPrefix(o.Dir, "USING") {
		return "", false
	}
	var e string
	switch x := o.Expr.(type) {
	case *syntax.Const:
		if x.Type != "int" {
			return "", false
		}
		e = x.Val
	case *syntax.ColRef:
		if g := gridRef(x, sets); g == 0 || g == 1 {
			e = CellsRelation + "." + gridColumns[g]
		} else if len(x.Parts) == 1 && slices.ContainsFunc(s.Targets, func(t syntax.Target) bool { return t.Name == x.Parts[0] }) {
			e = syntax.QuoteIdent(x.Parts[0])
		} else {
			return "", false
		}
	default:
		return "", false
	}
	for _, w := range []string{o.Dir, o.Nulls} {
		if w != "" {
			e += " " + w
		}
	}
	return e, true
}

// cellSQL is the statement counting cells exactly: for each pair of
// periods in the arrays $1 and $2, the users of set 1's period who are
// also in set 2's, as INTERSECT counts them. Each set reads the base
// table within its period (with a day's margin for the index; the period
// expression decides).
func cellSQL(sets [2]periodSet, src catalog.Table) string {
	arm := func(ps periodSet, x string) string {
		over := func(e syntax.Expr) string {
			return syntax.SQL(e, func(y syntax.Expr) (string, bool) {
				if c, ok := y.(*syntax.ColRef); ok {
					return "t." + catalog.QuoteIdent(c.Parts[len(c.Parts)-1]), true
				}
				return "", false
			})
		}
		w := over(ps.period) + " = " + x
		if f, ok := ps.period.(*syntax.FuncCall); ok && len(f.Args) >= 2 {
			// date_trunc('unit', time[, zone]): the period's rows lie
			// within a unit of its start, give or take a day of zone offset.
			if n, _ := f.Builtin(); n == "date_trunc" {
				if u, isConst := f.Args[0].(*syntax.Const); isConst && u.Type == "str" && validUnit(u.Val) {
					t := over(f.Args[1])
					w = t + " >= " + x + " - interval '1 day' AND " + t + " < " + x + " + interval '1 " + u.Val + "' + interval '1 day' AND " + w
				}
			}
		}
		if ps.sel.Where != nil {
			w = "(" + over(ps.sel.Where) + ") AND " + w
		}
		return "SELECT t." + catalog.QuoteIdent(ps.col) + " FROM " + src.String() + " AS t WHERE " + w
	}
	return "SELECT x.a, x.b, (SELECT count(*) FROM (" + arm(sets[0], "x.a") + " INTERSECT " + arm(sets[1], "x.b") +
		") AS s) FROM unnest($1, $2) AS x(a, b)"
}

// validUnit reports whether u is a date_trunc unit that is also an
// interval unit.
func validUnit(u string) bool {
	switch u {
	case "hour", "day", "week", "month", "quarter", "year":
		return true
	}
	return false
}

// nullableColumn returns a column e uses that is not in notNull, or "".
func nullableColumn(e syntax.Expr, notNull []string) string {
	bad := ""
	syntax.Walk(e, func(x syntax.Expr) bool {
		if c, ok := x.(*syntax.ColRef); ok && bad == "" && !slices.Contains(notNull, c.Parts[len(c.Parts)-1]) {
			bad = c.Parts[len(c.Parts)-1]
		}
		return bad == ""
	})
	return bad
}
