package rewrite

import (
	"slices"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Overlaps: the number of distinct values two sets of one column share
// (INTERSECT) or the first holds and the second does not (EXCEPT), asked
// in either of two forms:
//
//	SELECT count(*) [AS n] FROM (SELECT col FROM t WHERE a
//	                             INTERSECT | EXCEPT
//	                             SELECT col FROM t WHERE b) [AS] x
//
//	SELECT count(DISTINCT col) [AS n] FROM t WHERE b AND
//	       col [NOT] IN (SELECT col FROM t WHERE a)
//	       | [NOT] EXISTS (SELECT 1 FROM t u WHERE u.col = t.col AND a)
//
// (the second form is b INTERSECT a, or b EXCEPT a with NOT), answered from
// Theta sketches: each set is planned as SELECT count(DISTINCT col) FROM t
// WHERE ... over a rollup's Theta measure of col (the usual matching rules:
// its filters on dimensions, its time range split between whole buckets
// and base rows), and the executor intersects or subtracts the two merged
// sketches.
//
// What decides that the rewrite is equivalent: INTERSECT and EXCEPT
// without ALL return distinct values, which is what sketches hold; they
// treat NULLs as equal, NOT IN over a set holding a NULL is never true, and
// sketches skip NULLs: so the column must be declared NOT NULL. ALL counts
// multiplicities, which no sketch holds: passed through. So is count(*)
// over an IN filter, which counts rows, not values.

// overlapShape reports whether s has the outer shape of an overlap,
// whatever its sets: count(*) alone over one subquery in FROM holding a set
// operation, or a distinct count over one table filtered by a subquery.
// Only then does planOverlap decide.
func overlapShape(s *syntax.Select) bool {
	if len(s.Targets) != 1 || s.Targets[0].Star || len(s.From) != 1 {
		return false
	}
	f, ok := s.Targets[0].Expr.(*syntax.FuncCall)
	if !ok {
		return false
	}
	switch classifyAgg(f) {
	case countRows:
		return f.Star && plainQuery(s.From[0]) != nil && plainQuery(s.From[0]).SetOp != ""
	case countDistinct:
		_, sub, _ := subqueryFilter(s.Where)
		return sub != nil
	}
	return false
}

// overlap is the question an overlap statement asks: the distinct values
// of col in arms[0] op arms[1], each arm a SELECT of col from one table.
type overlap struct {
	op   string // INTERSECT or EXCEPT
	col  string
	arms [2]*syntax.Select
}

// planOverlap plans an overlap statement (overlapShape holds), or says
// why it is not answered.
func planOverlap(s *syntax.Select, snap *catalog.Snapshot, sess env) (*built, string) {
	if s.Unsupported != "" {
		// A WITH clause, say, whose names the sets' FROM could mean.
		return nil, "query uses " + s.Unsupported
	}
	var ov overlap
	var why string
	if plainQuery(s.From[0]) != nil {
		ov, why = setOperation(s)
	} else {
		ov, why = filteredBySubquery(s)
	}
	switch {
	case why != "":
		return nil, why
	case !sess.Approx:
		return nil, "pgsketch.approx is off"
	}
	var arms [2]*plan.Rollup
	var rows int64
	guard := ""
	for i, arm := range ov.arms {
		q := &syntax.Select{
			Targets: []syntax.Target{{Expr: &syntax.FuncCall{Name: []string{"count"}, Args: []syntax.Expr{&syntax.ColRef{Parts: []string{ov.col}}}, Distinct: true}}},
			From:    arm.From, Where: arm.Where,
		}
		b, why := planTable(q, catalog.Theta, snap, sess)
		a := b.rollup()
		if a == nil {
			return nil, "set " + string(rune('1'+i)) + " of the " + ov.op + ": " + why
		}
		r, ok := snap.Rollup(a.Rollup)
		if !ok || !slices.Contains(r.NotNull, ov.col) {
			return nil, "column " + catalog.QuoteIdent(ov.col) + " is not declared NOT NULL: " + ov.op + " and IN compare NULLs otherwise than Theta sketches, which skip them"
		}
		if i > 0 && a.Source != arms[0].Source {
			return nil, "the sets of the " + ov.op + " are read from different tables"
		}
		if a.Guard != "" {
			guard = a.Guard // the same for both arms: one table name
		}
		arms[i], rows = a, rows+b.rows
	}
	name := s.Targets[0].Name
	if name == "" {
		name = "count"
	}
	p := &plan.Overlap{Head: plan.Head{Rollup: arms[0].Rollup, Source: arms[0].Source, Guard: guard},
		SetOp: ov.op, Arms: arms[:], OutputName: name}
	return &built{Plan: p, rows: rows}, ""
}

// setOperation reads count(*) over (a INTERSECT|EXCEPT b).
func setOperation(s *syntax.Select) (overlap, string) {
	sub := plainQuery(s.From[0])
	switch {
	case s.Where != nil || len(s.GroupBy) > 0 || s.Having != nil || len(s.OrderBy) > 0 || s.Limit != nil || s.Offset != nil || s.Distinct:
		return overlap{}, "an overlap count with WHERE, GROUP BY, HAVING, ORDER BY, LIMIT or DISTINCT around it"
	case sub.SetOp == "UNION":
		return overlap{}, "a count over UNION: a distinct count of a union is answered as COUNT(DISTINCT ...) with OR"
	case sub.SetAll:
		return overlap{}, sub.SetOp + " ALL counts duplicates, which no sketch holds"
	case sub.SetExtra != "":
		return overlap{}, "the " + sub.SetOp + " has " + sub.SetExtra
	}
	ov := overlap{op: sub.SetOp, arms: [2]*syntax.Select{sub.Left, sub.Right}}
	for i, arm := range ov.arms {
		c, why := armColumn(arm)
		if why != "" {
			return overlap{}, "arm " + string(rune('1'+i)) + " of the " + sub.SetOp + ": " + why
		}
		if i > 0 && c != ov.col {
			return overlap{}, "the arms of the " + sub.SetOp + " select different columns"
		}
		ov.col = c
	}
	return ov, ""
}

// filteredBySubquery reads count(DISTINCT col) FROM t WHERE b AND col [NOT]
// IN (SELECT col ...) or [NOT] EXISTS (SELECT ... WHERE u.col = t.col ...).
func filteredBySubquery(s *syntax.Select) (overlap, string) {
	f := s.Targets[0].Expr.(*syntax.FuncCall)
	outer, ok := f.Args[0].(*syntax.ColRef)
	switch {
	case len(s.GroupBy) > 0 || s.Having != nil || len(s.OrderBy) > 0 || s.Limit != nil || s.Offset != nil || s.Distinct:
		return overlap{}, "a distinct count filtered by a subquery, with GROUP BY, HAVING, ORDER BY, LIMIT or DISTINCT"
	case s.From[0].Unsupported != "":
		return overlap{}, "a distinct count filtered by a subquery, over " + s.From[0].Unsupported
	case !ok:
		return overlap{}, "a distinct count of an expression filtered by a subquery"
	}
	col, why := ownColumn(outer, s.From[0])
	if why != "" {
		return overlap{}, why
	}
	rest, sq, not := subqueryFilter(s.Where)
	op := "INTERSECT"
	if not {
		op = "EXCEPT"
	}
	inner := sq.sel
	var innerCol string
	if sq.test != nil {
		test, ok := sq.test.(*syntax.ColRef)
		if !ok {
			return overlap{}, "IN tests an expression, not the counted column"
		}
		if c, why := ownColumn(test, s.From[0]); why != "" || c != col {
			return overlap{}, "IN tests another column than the one counted"
		}
		if innerCol, why = armColumn(inner); why != "" {
			return overlap{}, "the IN subquery: " + why
		}
	} else {
		if inner, innerCol, why = correlated(inner, s.From[0], col); why != "" {
			return overlap{}, "the EXISTS subquery: " + why
		}
	}
	if innerCol != col {
		return overlap{}, "the subquery selects another column than the one counted"
	}
	b := &syntax.Select{From: s.From, Where: andOf(rest)}
	return overlap{op: op, col: col, arms: [2]*syntax.Select{b, inner}}, ""
}

// subqueryFilter finds, among the conjuncts of a WHERE clause, the one
// subquery test (x IN (SELECT ...), EXISTS (...), or NOT of either) and
// returns the other conjuncts; sub is nil when there is not exactly one.
func subqueryFilter(where syntax.Expr) (rest []syntax.Expr, sub *subquery, not bool) {
	for _, c := range conjuncts(where) {
		u, _ := c.(*syntax.Unsupported)
		n := false
		if b, ok := c.(*syntax.BoolExpr); ok && b.Op == "NOT" && len(b.Args) == 1 {
			u, _ = b.Args[0].(*syntax.Unsupported)
			n = true
		}
		sq := inSubquery(u)
		if sq == nil {
			rest = append(rest, c)
			continue
		}
		if sub != nil {
			return nil, nil, false
		}
		sub, not = sq, n
	}
	return rest, sub, not
}

// subquery is x IN (SELECT ...) (test set) or EXISTS (SELECT ...) (test
// nil).
type subquery struct {
	test syntax.Expr
	sel  *syntax.Select
}

// inSubquery reads u as x IN (SELECT ...) or EXISTS (SELECT ...); nil for
// any other construct.
func inSubquery(u *syntax.Unsupported) *subquery {
	if u == nil || u.Link == nil || u.Link.Select == nil {
		return nil
	}
	switch l := u.Link; {
	case l.Form == "EXISTS":
		return &subquery{sel: l.Select}
	case l.Form == "ANY" && l.Op == "=":
		return &subquery{test: l.Test, sel: l.Select}
	}
	return nil
}

// correlated reads EXISTS (SELECT ... FROM t u WHERE u.col = outer.col AND
// a): the arm SELECT col FROM t u WHERE a, and col. The correlation must
// name the outer table by its alias (or name) and the inner one by its own.
func correlated(s *syntax.Select, outer syntax.FromItem, col string) (*syntax.Select, string, string) {
	switch {
	case s.SetOp != "" || s.Unsupported != "":
		return nil, "", "it is not a plain SELECT"
	case len(s.From) != 1 || s.From[0].Unsupported != "":
		return nil, "", "it reads other than one table"
	case len(s.GroupBy) > 0 || s.Having != nil || s.Limit != nil || s.Offset != nil || len(s.OrderBy) > 0:
		return nil, "", "it has GROUP BY, HAVING, ORDER BY, LIMIT or OFFSET"
	}
	// An aggregate or a set-returning function in the select list would
	// make EXISTS always true or always false: only constants and columns.
	for _, t := range s.Targets {
		switch t.Expr.(type) {
		case *syntax.Const, *syntax.ColRef:
		default:
			if !t.Star {
				return nil, "", "it selects other than constants and columns"
			}
		}
	}
	inner := s.From[0]
	if refName(inner) == refName(outer) {
		return nil, "", "the inner table has the outer table's name: alias one of them"
	}
	var rest []syntax.Expr
	found := false
	for _, c := range conjuncts(s.Where) {
		if o, ok := c.(*syntax.OpExpr); ok && o.Op == "=" && o.Schema == "" && !found {
			l, lok := o.Left.(*syntax.ColRef)
			r, rok := o.Right.(*syntax.ColRef)
			if lok && rok {
				for _, pair := range [][2]*syntax.ColRef{{l, r}, {r, l}} {
					if qualifiedBy(pair[0], inner, col) && qualifiedBy(pair[1], outer, col) {
						found = true
					}
				}
				if found {
					continue
				}
			}
		}
		rest = append(rest, c)
	}
	if !found {
		return nil, "", "no condition " + refName(inner) + "." + col + " = " + refName(outer) + "." + col
	}
	return &syntax.Select{From: s.From, Where: andOf(rest)}, col, ""
}

// refName is how a FROM item is referred to: its alias, else its name.
func refName(f syntax.FromItem) string {
	if f.Alias != "" {
		return f.Alias
	}
	return f.Name
}

// qualifiedBy reports whether c is column col qualified by f's reference name.
func qualifiedBy(c *syntax.ColRef, f syntax.FromItem, col string) bool {
	return len(c.Parts) == 2 && c.Parts[0] == refName(f) && c.Parts[1] == col
}

// ownColumn returns the column c names of table f (unqualified, or
// qualified by f's reference name).
func ownColumn(c *syntax.ColRef, f syntax.FromItem) (string, string) {
	switch {
	case len(c.Parts) == 1:
		return c.Parts[0], ""
	case len(c.Parts) == 2 && c.Parts[0] == refName(f):
		return c.Parts[1], ""
	}
	return "", "a column qualified otherwise than by its table"
}

// andOf is the conjunction of es (nil for none).
func andOf(es []syntax.Expr) syntax.Expr {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return &syntax.BoolExpr{Op: "AND", Args: es}
}

// armColumn returns the column an arm of an overlap selects, or why the
// arm is not one: SELECT [DISTINCT] col FROM one table [WHERE ...].
func armColumn(s *syntax.Select) (string, string) {
	switch {
	case s == nil || s.SetOp != "":
		return "", "a nested set operation"
	case s.Unsupported != "":
		return "", "uses " + s.Unsupported
	case len(s.Targets) != 1 || s.Targets[0].Star:
		return "", "selects other than one column"
	case len(s.From) != 1 || s.From[0].Unsupported != "":
		return "", "reads other than one table"
	case len(s.GroupBy) > 0 || s.Having != nil || len(s.OrderBy) > 0 || s.Limit != nil || s.Offset != nil:
		return "", "has GROUP BY, HAVING, ORDER BY, LIMIT or OFFSET"
	}
	c, ok := s.Targets[0].Expr.(*syntax.ColRef)
	if !ok {
		return "", "selects an expression, not a column"
	}
	return ownColumn(c, s.From[0])
}
