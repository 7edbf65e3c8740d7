package rewrite

import "github.com/pgsketch/pgsketch/rewrite/syntax"

// Filtered measures are often written as an aggregate over a CASE that
// yields NULL unless a condition holds (BI tools' filtered measures,
// hand-written reports):
//
//	count(DISTINCT CASE WHEN device = 'ios' THEN user_id END)
//	sum(CASE WHEN device = 'ios' THEN amount ELSE NULL END)
//	count(CASE device WHEN 'ios' THEN 1 END)
//
// An aggregate that skips NULL inputs computes the same over such a CASE
// as over its THEN value with the condition as its FILTER: the CASE is
// NULL exactly for the rows FILTER leaves out (its condition false or
// NULL), and the THEN value for the others. caseFilters rewrites these
// calls into the FILTER form, which the planners answer. An ELSE other
// than NULL (sum(CASE ... ELSE 0 END) is 0, not NULL, over a group with no
// matching row; count(... ELSE 0 END) counts every row), two or more
// WHEN branches, or a call that has a FILTER already are left as written.

// nullSkipping are the aggregates caseFilters rewrites: each ignores NULL
// inputs, and computes over the rest what it would over them alone.
var nullSkipping = map[string]bool{"count": true, "sum": true, "min": true, "max": true, "avg": true, "approx_count_distinct": true}

// caseFilters rewrites, in s and every statement inside it, the
// aggregates over a CASE of one condition and no ELSE into the same
// aggregate over its THEN value with the condition as its FILTER, and sums
// and counts over a CASE whose ELSE is 0 (whole select-list items) into
// the FILTER aggregates they are made of (zeroElse).
func caseFilters(s *syntax.Select) {
	if s == nil {
		return
	}
	for i := range s.Targets {
		t := &s.Targets[i]
		if f, ok := t.Expr.(*syntax.FuncCall); ok && !t.Star {
			if e := zeroElse(f); e != nil {
				if t.Name == "" {
					t.Name = syntax.ColumnName(f)
				}
				t.Expr = e
			}
		}
	}
	s.EachExpr(func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			switch x := x.(type) {
			case *syntax.FuncCall:
				caseFilter(x)
			case *syntax.Unsupported:
				if x.Link != nil {
					caseFilters(x.Link.Select)
				}
			}
			return true
		})
	})
	s.EachFrom(func(f syntax.FromItem) { caseFilters(f.Query) })
	if s.With != nil {
		for _, b := range s.With.Bodies {
			caseFilters(b)
		}
	}
	caseFilters(s.Left)
	caseFilters(s.Right)
}

// caseFilter rewrites aggregate call f into its FILTER form when its one
// argument is a CASE of one condition whose other rows are NULL.
func caseFilter(f *syntax.FuncCall) {
	name, ok := f.Builtin()
	if !ok && len(f.Name) == 2 && f.Name[0] == "pgsketch" {
		name, ok = f.Name[1], true
	}
	if !ok || !nullSkipping[name] || f.Filter != nil || f.Star || len(f.Args) != 1 {
		return
	}
	c, ok := f.Args[0].(*syntax.Case)
	if !ok || len(c.Whens) != 1 || !isNull(c.Else) {
		return
	}
	cond := c.Whens[0].Cond
	if c.Arg != nil {
		// CASE x WHEN v THEN ...: the condition is x = v.
		cond = &syntax.OpExpr{Op: "=", Left: c.Arg, Right: cond}
	}
	f.Args[0], f.Filter = c.Whens[0].Result, cond
}

// zeroElse returns, for sum or count over CASE WHEN c THEN x ELSE 0 END,
// the same value from aggregates with FILTERs, which the planners answer;
// nil for any other call.
//
// A count counts the rows where c holds and x is not NULL, and the zeros
// of the others:
//
//	count(x) FILTER (WHERE c) + count(*) FILTER (WHERE c IS NOT TRUE)
//
// A sum adds x where c holds and 0 elsewhere: the FILTER sum, or 0 when
// that is NULL but some row gave a 0, NULL when no row did and no x was
// summed (every row matched c, every x NULL):
//
//	CASE WHEN count(*) FILTER (WHERE c IS NOT TRUE) > 0
//	     THEN COALESCE(sum(x) FILTER (WHERE c), 0)
//	     ELSE sum(x) FILTER (WHERE c) END
//
// Both have the original's type: a count is bigint; sum(x) is the type
// sum gives x's type, which the CASE shares with 0 (numeric, bigint), and
// COALESCE with 0 keeps it.
func zeroElse(f *syntax.FuncCall) syntax.Expr {
	name, ok := f.Builtin()
	if !ok || (name != "sum" && name != "count") || f.Filter != nil || f.Star || f.Distinct || len(f.Args) != 1 {
		return nil
	}
	c, ok := f.Args[0].(*syntax.Case)
	if !ok || len(c.Whens) != 1 {
		return nil
	}
	if k, ok := c.Else.(*syntax.Const); !ok || k.Type != "int" || k.Val != "0" {
		return nil
	}
	cond, x := c.Whens[0].Cond, c.Whens[0].Result
	if c.Arg != nil {
		cond = &syntax.OpExpr{Op: "=", Left: c.Arg, Right: cond}
	}
	zero := func() *syntax.Const { return &syntax.Const{Type: "int", Val: "0"} }
	others := func() *syntax.FuncCall {
		return &syntax.FuncCall{Name: []string{"count"}, Star: true, Filter: syntax.IsNotTrue(cond)}
	}
	matched := func() *syntax.FuncCall {
		return &syntax.FuncCall{Name: []string{name}, Args: []syntax.Expr{x}, Filter: cond}
	}
	if name == "count" {
		return &syntax.OpExpr{Op: "+", Left: matched(), Right: others()}
	}
	return &syntax.Case{
		Whens: []syntax.When{{Cond: &syntax.OpExpr{Op: ">", Left: others(), Right: zero()},
			Result: &syntax.VarFunc{Name: "coalesce", Args: []syntax.Expr{matched(), zero()}}}},
		Else: matched(),
	}
}

// isNull reports whether e is absent or the NULL literal.
func isNull(e syntax.Expr) bool {
	if e == nil {
		return true
	}
	k, ok := e.(*syntax.Const)
	return ok && k.Type == "null"
}
