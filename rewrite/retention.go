package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
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
	items [2]fromItem
	conds []expr
}

// joinedPair reads the FROM clause of s as two items joined (JOIN ... ON,
// or a comma join), with the ON and WHERE conjuncts.
func joinedPair(s *selectStmt) (pairedSets, bool) {
	var ps pairedSets
	switch {
	case len(s.from) == 1 && innerJoin(s.from[0]) != nil:
		j := innerJoin(s.from[0])
		ps.items = [2]fromItem{j.l, j.r}
		ps.conds = conjuncts(j.on)
	case len(s.from) == 2:
		ps.items = [2]fromItem{s.from[0], s.from[1]}
	default:
		return ps, false
	}
	for _, it := range ps.items {
		if it.join != nil {
			return ps, false
		}
	}
	ps.conds = append(ps.conds, conjuncts(s.where)...)
	return ps, true
}

// cteBodies are a WITH clause's common table expressions by name, or nil
// unless it is plain and not recursive.
func cteBodies(w *withClause) map[string]*selectStmt {
	if w == nil || w.recursive || !w.plain {
		return nil
	}
	out := make(map[string]*selectStmt, len(w.names))
	for i, n := range w.names {
		out[n] = w.bodies[i]
	}
	return out
}

// retentionShape reports whether s looks like a retention grid: two FROM
// items joined, grouped. Only then does planRetention decide.
func retentionShape(s *selectStmt) bool {
	ps, ok := joinedPair(s)
	return ok && len(s.groupBy) > 0 && (plainQuery(ps.items[0]) != nil || cteBodies(s.with)[ps.items[0].name] != nil)
}

// periodSet is one side of a retention grid: SELECT DISTINCT period, col
// FROM t WHERE ..., referred to as ref.
type periodSet struct {
	ref        string
	sel        *selectStmt
	period     expr
	periodName string
	col        string
}

// readPeriodSet reads a FROM item of a grid as a period set.
func readPeriodSet(it fromItem, ctes map[string]*selectStmt) (periodSet, string) {
	ps := periodSet{ref: refName(it), sel: plainQuery(it)}
	if ps.sel == nil && it.schema == "" {
		ps.sel = ctes[it.name]
	}
	s := ps.sel
	switch {
	case s == nil:
		return ps, refName(it) + " is not a subquery or a common table expression"
	case len(s.from) == 1 && s.from[0].schema == "" && ctes[s.from[0].name] != nil:
		return ps, refName(it) + " reads the common table expression " + s.from[0].name + ", not a table"
	case s.unsupported != "" || s.setOp != "":
		return ps, refName(it) + " uses " + s.unsupported
	case !s.distinct:
		return ps, refName(it) + " is not SELECT DISTINCT: the join would count a user once per row"
	case len(s.targets) != 2 || len(s.from) != 1 || s.from[0].unsupported != "":
		return ps, refName(it) + " selects other than a period and a column of one table"
	case len(s.groupBy) > 0 || s.having != nil || s.limit != nil || s.offset != nil:
		return ps, refName(it) + " has GROUP BY, HAVING, LIMIT or OFFSET"
	}
	for _, t := range s.targets {
		if c, ok := t.e.(*colRef); ok && ps.col == "" && (t.name == "" || t.name == c.parts[len(c.parts)-1]) {
			col, why := ownColumn(c, s.from[0])
			if why != "" {
				return ps, refName(it) + ": " + why
			}
			ps.col = col
			continue
		}
		ps.period, ps.periodName = t.e, t.name
		if ps.periodName == "" {
			ps.periodName = figureColname(t.e)
		}
	}
	if ps.col == "" || ps.period == nil {
		return ps, refName(it) + " selects no plain column beside its period"
	}
	return ps, ""
}

// gridRef says what a column reference of the outer query names: the
// period (0 or 1 for set 1 or 2), the counted column (2 or 3), or -1.
func gridRef(c *colRef, sets [2]periodSet) int {
	if len(c.parts) != 2 {
		return -1
	}
	for i, ps := range sets {
		switch {
		case c.parts[0] != ps.ref:
		case c.parts[1] == ps.periodName:
			return i
		case c.parts[1] == ps.col:
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
func planRetention(s *selectStmt, snap *catalog.Snapshot, sess env) (*built, string) {
	pair, _ := joinedPair(s)
	ctes := cteBodies(s.with)
	if s.unsupported != "" && (s.unsupported != "a WITH clause" || ctes == nil) {
		// A WITH clause the parser could not read (RECURSIVE, say), whose
		// names the sets' FROM could mean, or another construct (grouping
		// sets, a window clause, ...).
		return nil, "retention grid: query uses " + s.unsupported
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
	case s.having != nil || s.distinct:
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
		q := &selectStmt{
			targets: []target{{e: ps.period}, {e: &funcCall{name: []string{"count"}, args: []expr{&colRef{parts: []string{ps.col}}}, distinct: true}}},
			from:    ps.sel.from, where: ps.sel.where, groupBy: []expr{&constExpr{kind: "int", val: "1"}},
		}
		b, why := planSketched(q, catalog.Theta, snap, sess)
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
func gridConditions(conds []expr, sets [2]periodSet) (string, string) {
	var rest []string
	joined := false
	for _, c := range conds {
		if o, ok := c.(*opExpr); ok && o.op == "=" && o.schema == "" && !joined {
			l, lok := o.l.(*colRef)
			r, rok := o.r.(*colRef)
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
			return "", "a join condition names more than the two periods: " + sqlOf(c, nil)
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
func overCells(e expr, sets [2]periodSet) (string, bool) {
	ok := true
	walk(e, func(x expr) bool {
		switch x := x.(type) {
		case *colRef:
			if n := gridRef(x, sets); n != 0 && n != 1 {
				ok = false
			}
		case *unsupported, *paramRef:
			ok = false
		}
		return ok
	})
	if !ok {
		return "", false
	}
	return sqlOf(e, func(x expr) (string, bool) {
		if c, isRef := x.(*colRef); isRef {
			return CellsRelation + "." + gridColumns[gridRef(c, sets)], true
		}
		return "", false
	}), true
}

// gridShapeSQL prints the outer query over CellsRelation: its select list
// (the two periods and the count, in any order), GROUP BY of both periods,
// ORDER BY and LIMIT.
func gridShapeSQL(s *selectStmt, sets [2]periodSet) (string, string) {
	var cols []string
	var outs []int // which of gridColumns each select-list item is
	counts := 0
	for _, t := range s.targets {
		n := -1
		switch e := t.e.(type) {
		case *colRef:
			if g := gridRef(e, sets); g == 0 || g == 1 {
				n = g
			}
		case *funcCall:
			k := classifyAgg(e)
			if k == countRows && e.star || k == countDistinct && len(e.args) == 1 && isCounted(e.args[0], sets) {
				n, counts = 2, counts+1
			}
		}
		if t.star || n < 0 {
			return "", "the select list holds other than the two periods and the count"
		}
		name := t.name
		if name == "" {
			name = figureColname(t.e)
		}
		cols = append(cols, CellsRelation+"."+gridColumns[n]+" AS "+quoteName(name))
		outs = append(outs, n)
	}
	if counts != 1 {
		return "", "the select list has other than one count"
	}
	grouped := map[int]bool{}
	for _, g := range s.groupBy {
		n := -1
		switch e := g.(type) {
		case *colRef:
			n = gridRef(e, sets)
		case *constExpr:
			if i, err := strconv.Atoi(e.val); err == nil && e.kind == "int" && i >= 1 && i <= len(outs) {
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
	for _, o := range s.orderBy {
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
		e  expr
	}{{" LIMIT ", s.limit}, {" OFFSET ", s.offset}} {
		if l.e == nil {
			continue
		}
		c, ok := l.e.(*constExpr)
		if !ok || c.kind != "int" && c.kind != "null" {
			return "", "LIMIT or OFFSET is not a constant"
		}
		sql += l.kw + constSQL(c)
	}
	return sql, ""
}

// isCounted reports whether e is one set's counted column.
func isCounted(e expr, sets [2]periodSet) bool {
	c, ok := e.(*colRef)
	return ok && gridRef(c, sets) >= 2
}

// orderItem prints one ORDER BY item over the shaped query: a position or
// an output name as written, a period as its cells column.
func orderItem(o sortItem, s *selectStmt, sets [2]periodSet) (string, bool) {
	if strings.HasPrefix(o.dir, "USING") {
		return "", false
	}
	var e string
	switch x := o.e.(type) {
	case *constExpr:
		if x.kind != "int" {
			return "", false
		}
		e = x.val
	case *colRef:
		if g := gridRef(x, sets); g == 0 || g == 1 {
			e = CellsRelation + "." + gridColumns[g]
		} else if len(x.parts) == 1 && slices.ContainsFunc(s.targets, func(t target) bool { return t.name == x.parts[0] }) {
			e = quoteName(x.parts[0])
		} else {
			return "", false
		}
	default:
		return "", false
	}
	for _, w := range []string{o.dir, o.nulls} {
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
		over := func(e expr) string {
			return sqlOf(e, func(y expr) (string, bool) {
				if c, ok := y.(*colRef); ok {
					return "t." + catalog.QuoteIdent(c.parts[len(c.parts)-1]), true
				}
				return "", false
			})
		}
		w := over(ps.period) + " = " + x
		if f, ok := ps.period.(*funcCall); ok && len(f.args) >= 2 {
			// date_trunc('unit', time[, zone]): the period's rows lie
			// within a unit of its start, give or take a day of zone offset.
			if n, _ := f.builtin(); n == "date_trunc" {
				if u, isConst := f.args[0].(*constExpr); isConst && u.kind == "str" && validUnit(u.val) {
					t := over(f.args[1])
					w = t + " >= " + x + " - interval '1 day' AND " + t + " < " + x + " + interval '1 " + u.val + "' + interval '1 day' AND " + w
				}
			}
		}
		if ps.sel.where != nil {
			w = "(" + over(ps.sel.where) + ") AND " + w
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
func nullableColumn(e expr, notNull []string) string {
	bad := ""
	walk(e, func(x expr) bool {
		if c, ok := x.(*colRef); ok && bad == "" && !slices.Contains(notNull, c.parts[len(c.parts)-1]) {
			bad = c.parts[len(c.parts)-1]
		}
		return bad == ""
	})
	return bad
}
