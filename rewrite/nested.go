package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Statements whose distinct counts sit in subqueries: a FROM subquery that
// only filters and projects the table (pullUp), and aggregate subqueries
// anywhere PostgreSQL can take their rows from elsewhere (planNested).

// pullUp merges s's one FROM item, a subquery that only filters and
// projects one table (SELECT * or columns FROM t WHERE ..., as BI tools
// wrap a table), into s: s then reads the table, its WHERE clause ANDed
// with the subquery's, its column references made bare column names. It
// reports false, leaving s as it was, when the subquery does anything
// else or s refers to what the subquery does not pass on by name.
func pullUp(s *syntax.Select) bool {
	if len(s.From) != 1 || s.Unsupported != "" || holdsSubLink(s) {
		// A subquery expression's unqualified names would resolve against
		// the table instead of the subquery's output columns.
		return false
	}
	outer := s.From[0]
	sub := plainQuery(outer)
	if sub == nil || outer.Alias == "" || !filtersOnly(sub) {
		return false
	}
	inner := sub.From[0]
	out, ok := outputsOf(sub, inner)
	if !ok {
		return false
	}
	if out.star && len(out.seen) > 0 {
		return false // * beside named columns: names PostgreSQL may find ambiguous
	}
	// Output columns keep the names they had.
	names, ok := outputNames(s)
	if !ok {
		return false
	}
	// Resolve every reference first: nothing changes unless all resolve.
	refs, ok := resolveInner(sub.Where, inner, nil)
	if !ok {
		return false
	}
	if refs, ok = out.resolveOuter(s, outer.Alias, refs); !ok {
		return false
	}
	for _, r := range refs {
		r.c.Parts = []string{r.col}
	}
	for i, n := range names {
		if n != "" {
			s.Targets[i].Name = n
		}
	}
	s.From = []syntax.FromItem{{Schema: inner.Schema, Name: inner.Name, Only: inner.Only}}
	switch {
	case sub.Where == nil:
	case s.Where == nil:
		s.Where = sub.Where
	default:
		s.Where = &syntax.BoolExpr{Op: "AND", Args: []syntax.Expr{sub.Where, s.Where}}
	}
	return true
}

// subOutputs are the output columns of a subquery pullUp merges, by the
// names the statement around it refers to them by.
type subOutputs struct {
	star     bool              // the subquery selects *
	cols     map[string]string // the column each plain column output is
	seen     map[string]int    // how many outputs have each name
	computed map[string]bool   // the names of computed and renamed outputs
}

// outputsOf reads the output columns of sub, a subquery that only filters
// and projects table inner. It reports false when an output column
// reference names no column of inner.
func outputsOf(sub *syntax.Select, inner syntax.FromItem) (subOutputs, bool) {
	out := subOutputs{cols: map[string]string{}, seen: map[string]int{}, computed: map[string]bool{}}
	for _, t := range sub.Targets {
		if t.Star {
			out.star = true
			continue
		}
		name := t.Name
		if name == "" {
			name = syntax.ColumnName(t.Expr)
		}
		out.seen[name]++
		c, isRef := t.Expr.(*syntax.ColRef)
		if !isRef {
			// A computed column: PostgreSQL computes it only for a
			// reference, which then fails to resolve (resolveOuter).
			out.computed[name] = true
			continue
		}
		col, ok := bareColumn(c, inner)
		if !ok {
			return out, false
		}
		if name != col {
			// A renamed column: after the merge the outer names would
			// resolve otherwise (an ORDER BY that meant an input column
			// could meet an output one).
			out.computed[name] = true
			continue
		}
		out.cols[name] = col
	}
	return out, true
}

// pulledRef is a column reference of a statement pullUp merges and the
// bare column name it becomes.
type pulledRef struct {
	c   *syntax.ColRef
	col string
}

// resolveInner appends to refs each column reference in e, an expression
// of the subquery, with the column of its table inner that it names. It
// reports false when one names no column of inner.
func resolveInner(e syntax.Expr, inner syntax.FromItem, refs []pulledRef) ([]pulledRef, bool) {
	ok := true
	syntax.Walk(e, func(x syntax.Expr) bool {
		if c, isRef := x.(*syntax.ColRef); isRef {
			col, good := bareColumn(c, inner)
			ok = ok && good
			refs = append(refs, pulledRef{c, col})
		}
		return ok
	})
	return refs, ok
}

// resolveOuter appends to refs each column reference in the expressions
// of s, the statement around the subquery (alias is the subquery's name
// there), with the column of the subquery's table that it names through
// the outputs. It reports false when one is qualified by another name,
// names an output ambiguously or a computed one, or names no output.
func (out subOutputs) resolveOuter(s *syntax.Select, alias string, refs []pulledRef) ([]pulledRef, bool) {
	ok := true
	s.EachExpr(func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			c, isRef := x.(*syntax.ColRef)
			if !isRef {
				return ok
			}
			name := c.Parts[len(c.Parts)-1]
			switch {
			case len(c.Parts) > 2, len(c.Parts) == 2 && c.Parts[0] != alias, name == "*":
				ok = false
			case out.seen[name] > 1 || out.computed[name]:
				ok = false // ambiguous in PostgreSQL too, or computed
			case out.cols[name] != "":
				refs = append(refs, pulledRef{c, out.cols[name]})
			case out.star:
				refs = append(refs, pulledRef{c, name})
			default:
				ok = false
			}
			return ok
		})
	})
	return refs, ok
}

// outputNames returns the name PostgreSQL gives each of s's output
// columns that has no alias ("" for those that have one), for the merged
// statement to keep. It reports false when s selects *.
func outputNames(s *syntax.Select) ([]string, bool) {
	names := make([]string, len(s.Targets))
	for i, t := range s.Targets {
		if t.Star {
			return nil, false
		}
		if t.Name == "" {
			names[i] = syntax.ColumnName(t.Expr)
		}
	}
	return names, true
}

// holdsSubLink reports whether s holds a subquery expression.
func holdsSubLink(s *syntax.Select) bool {
	return s.AnyExpr(func(x syntax.Expr) bool {
		u, ok := x.(*syntax.Unsupported)
		return ok && u.Link != nil
	})
}

// filtersOnly reports whether sub only filters and projects one table.
func filtersOnly(sub *syntax.Select) bool {
	if sub.Unsupported != "" || sub.SetOp != "" || sub.With != nil || sub.Distinct ||
		len(sub.GroupBy) > 0 || sub.Having != nil || len(sub.OrderBy) > 0 || sub.Limit != nil || sub.Offset != nil ||
		len(sub.From) != 1 {
		return false
	}
	fi := sub.From[0]
	if fi.Unsupported != "" || fi.Name == "" {
		return false
	}
	if why := unknownFunctions(sub); why != "" {
		return false
	}
	if acd, cd, _ := findAggs(sub); acd || cd {
		return false
	}
	agg := false
	sub.EachExpr(func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if f, ok := x.(*syntax.FuncCall); ok && classifyAgg(f) != notAgg {
				agg = true
			}
			return !agg
		})
	})
	return !agg
}

// bareColumn is the column a reference names in table fi (unqualified,
// or qualified by fi's reference name, or by its schema and name when it
// has no alias).
func bareColumn(c *syntax.ColRef, fi syntax.FromItem) (string, bool) {
	name := c.Parts[len(c.Parts)-1]
	if name == "*" {
		return "", false
	}
	return name, len(c.Parts) == 1 || qualifiedFor(c, fi)
}

// qualifiedFor reports whether c is qualified by fi's reference name, or
// by its schema and name when it has no alias.
func qualifiedFor(c *syntax.ColRef, fi syntax.FromItem) bool {
	switch q := c.Parts[:len(c.Parts)-1]; len(q) {
	case 1:
		return q[0] == refName(fi)
	case 2:
		return fi.Alias == "" && fi.Schema != "" && q[0] == fi.Schema && q[1] == fi.Name
	}
	return false
}

// planNested plans a statement whose aggregate subqueries rollups answer:
// in its WITH clause, in FROM (also inside joins), as a set operation's
// arms, at any depth along those. Each subquery subqueryPlanners answer from a
// rollup becomes an arm; the statement around them runs in PostgreSQL
// as it was written.
func planNested(p *syntax.Parsed, snap *catalog.Snapshot, sess env) (*built, string) {
	s := p.Select
	if !nestable(s) {
		return nil, noSubquery // the reason already given is the statement's
	}
	if s.With != nil && s.With.Recursive {
		return nil, "a recursive WITH clause"
	}
	if modifies(s) {
		return nil, "a data-modifying WITH clause"
	}
	ctes := cteNames(s, nil)
	var subs []*syntax.Select
	var arms []*built
	var reasons []string
	var visit func(*syntax.Select)
	visit = func(s *syntax.Select) {
		for _, c := range subqueries(s) {
			if !nestable(c) {
				continue // INTO, FOR UPDATE, ...: not read
			}
			if acd, cd, _ := findAggs(c); !acd && !cd && !firstSeenShape(c) {
				visit(c) // no distinct count of its own
				continue
			}
			b, why := planArm(c, ctes, snap, sess)
			if b != nil {
				subs = append(subs, c)
				arms = append(arms, b)
				continue
			}
			reasons = append(reasons, why)
			visit(c)
		}
	}
	visit(s)
	if len(arms) == 0 {
		if len(reasons) == 0 {
			return nil, noSubquery
		}
		return nil, "no subquery answered: " + reasons[0]
	}
	text, err := p.OuterText(subs)
	if err != nil {
		return nil, "the statement around its subqueries cannot be printed: " + err.Error()
	}
	var estimated []int
	if len(arms) == 1 {
		if wb, cols := estimatedThrough(s, subs[0], arms[0], snap, sess); wb != nil {
			arms[0], estimated = wb, cols
		}
	}
	pl := spliceArms(arms, text)
	if why := firstSeenGuarded(arms, pl); why != "" {
		return nil, why
	}
	if len(pl.Arms) == 0 {
		// Every arm was a first-seen count: SQL of its own, and so is
		// the statement.
		return &built{Plan: &plan.FirstSeen{Head: pl.Head, SQL: pl.Outer[0], Refs: pl.OuterParams}}, ""
	}
	if len(estimated) > 0 {
		pl.Estimated, pl.Columns = estimated, len(s.Targets)
	}
	return &built{Plan: pl}, ""
}

// estimatedThrough plans sub, the one answered subquery of s and a star
// join (whose distinct counts PostgreSQL estimates in SQL, a few
// milliseconds per group), as a whole statement whose counts come back as
// sketches for the proxy to estimate, when s only passes them on: s
// selects columns of sub (FROM (sub) AS q and nothing else), and what it
// sorts by reads none of them (Cube wraps its rolling windows so). It
// returns that plan and the output columns of s the proxy estimates, or
// nil.
func estimatedThrough(s, sub *syntax.Select, b *built, snap *catalog.Snapshot, sess env) (*built, []int) {
	if _, ok := b.Plan.(*plan.Nested); !ok {
		return nil, nil
	}
	if len(s.From) != 1 || s.From[0].Query != sub || s.From[0].Alias == "" || s.From[0].ColAliases || s.Where != nil ||
		len(s.GroupBy) > 0 || s.Having != nil || s.Distinct || s.Unsupported != "" || s.With != nil || holdsSubLink(s) {
		// An alias's column list renames the subquery's columns: they
		// would be matched by their own names.
		return nil, nil
	}
	wb, _ := planWholeStarJoin(sub, snap, sess)
	if wb == nil {
		return nil, nil
	}
	wn, ok := wb.Plan.(*plan.Nested)
	if !ok || len(wn.Estimated) == 0 {
		return nil, nil
	}
	names := make([]string, len(sub.Targets))
	for i, t := range sub.Targets {
		if names[i] = t.Name; names[i] == "" {
			names[i] = syntax.ColumnName(t.Expr)
		}
	}
	alias := s.From[0].Alias
	// sketch reports whether e is a reference to a column of sub that
	// comes back as a sketch; ref whether e names one of sub's columns.
	sketch := func(e syntax.Expr) (isSketch, ref bool) {
		c, ok := e.(*syntax.ColRef)
		if !ok || len(c.Parts) > 2 || len(c.Parts) == 2 && c.Parts[0] != alias {
			return false, false
		}
		for i, n := range names {
			if n == c.Parts[len(c.Parts)-1] {
				return slices.Contains(wn.Estimated, i), true
			}
		}
		return false, false
	}
	// readsSketch reports whether e reads a sketch column, or the
	// subquery's whole row (q, q.*), which holds them.
	readsSketch := func(e syntax.Expr) bool {
		found := false
		syntax.Walk(e, func(x syntax.Expr) bool {
			if is, _ := sketch(x); is {
				found = true
			}
			if c, ok := x.(*syntax.ColRef); ok && (len(c.Parts) == 1 && c.Parts[0] == alias || c.Parts[len(c.Parts)-1] == "*") {
				found = true
			}
			return !found
		})
		return found
	}
	var out []int
	outNames := map[string]bool{}
	for i, t := range s.Targets {
		if t.Star {
			return nil, nil
		}
		if is, ref := sketch(t.Expr); ref {
			if is {
				out = append(out, i)
				name := t.Name
				if name == "" {
					name = syntax.ColumnName(t.Expr)
				}
				outNames[name] = true
			}
			continue
		}
		if readsSketch(t.Expr) {
			return nil, nil
		}
	}
	for _, o := range s.OrderBy {
		if c, ok := o.Expr.(*syntax.Const); ok && c.Type == "int" {
			if n, err := strconv.Atoi(c.Val); err != nil || slices.Contains(out, n-1) {
				return nil, nil
			}
			continue
		}
		if c, ok := o.Expr.(*syntax.ColRef); ok && len(c.Parts) == 1 && outNames[c.Parts[0]] {
			return nil, nil
		}
		if readsSketch(o.Expr) {
			return nil, nil
		}
	}
	if len(out) == 0 || readsSketch(s.Limit) || readsSketch(s.Offset) {
		return nil, nil
	}
	return wb, out
}

// spliceArms is the Nested plan of a statement whose text around its
// answered subqueries is text (len(arms)+1 pieces): a subquery answered as
// a star join is its own statement around its arm, which stands in the
// subquery's place; one answered as a first-seen count is its statement
// (it has no arm: a plan of only such subqueries has none).
func spliceArms(arms []*built, text []string) *plan.Nested {
	outer := []string{text[0]}
	pl := &plan.Nested{Head: plan.Head{Source: arms[0].Header().Source}}
	var rollups, guards, notices []string
	for i, b := range arms {
		a := b.Header()
		around, inner := []string{"", ""}, []*plan.Rollup{b.rollup()}
		switch n := b.Plan.(type) {
		case *plan.Nested:
			// Parenthesized, as a set operation's arm with ORDER BY must be.
			around, inner = slices.Clone(n.Outer), n.Arms
			around[0] = "(" + around[0]
			around[len(around)-1] += ")"
		case *plan.FirstSeen:
			// A statement of its own, in the subquery's place.
			around, inner = []string{"(" + n.SQL + ")"}, nil
		}
		outer[len(outer)-1] += around[0]
		outer = append(outer, around[1:]...)
		outer[len(outer)-1] += text[i+1]
		pl.Arms = append(pl.Arms, inner...)
		if !slices.Contains(rollups, a.Rollup) {
			rollups = append(rollups, a.Rollup)
		}
		if g := strings.TrimPrefix(a.Guard, "SELECT "); g != "" && !slices.Contains(guards, g) {
			guards = append(guards, g)
		}
		notices = append(notices, "subquery "+strconv.Itoa(i+1)+": "+strings.TrimPrefix(a.Notice, "pgsketch: "))
		pl.StdErr = max(pl.StdErr, a.StdErr)
	}
	pl.Outer, pl.OuterParams = outer, paramsIn(strings.Join(outer, " "))
	pl.Rollup = strings.Join(rollups, ", ")
	if len(guards) > 0 {
		pl.Guard = "SELECT (" + strings.Join(guards, ") AND (") + ")"
	}
	pl.Notice = "pgsketch: " + strings.Join(notices, "; ")
	return pl
}

// firstSeenGuarded says why pl cannot answer arms, "" when it can: the
// executor checks a nested plan's table guards in its arms' fetches, so
// a first-seen count, which has no fetch, may stand beside arms only when
// one of them checks its table the same way.
func firstSeenGuarded(arms []*built, pl *plan.Nested) string {
	var checked []string
	for _, a := range pl.Arms {
		checked = append(checked, a.Guard)
	}
	for _, b := range arms {
		if fs, ok := b.Plan.(*plan.FirstSeen); ok && len(pl.Arms) > 0 && fs.Guard != "" && !slices.Contains(checked, fs.Guard) {
			return "a first-seen subquery reads a table by a name no other answered subquery checks on the search_path"
		}
	}
	return ""
}

// noSubquery is planNested's reason for a statement without subqueries.
const noSubquery = "no subquery"

// planArm plans subquery c on its own: a FromRollup plan, or why not.
func planArm(c *syntax.Select, ctes []string, snap *catalog.Snapshot, sess env) (*built, string) {
	readsCTE := func() string {
		var why string
		c.EachFrom(func(f syntax.FromItem) {
			if f.Name != "" && f.Schema == "" && slices.Contains(ctes, f.Name) && why == "" {
				why = "a subquery reads the common table expression " + catalog.QuoteIdent(f.Name)
			}
		})
		return why
	}
	if why := readsCTE(); why != "" {
		return nil, why
	}
	b, why := tryPlanners(subqueryPlanners, &syntax.Parsed{Select: c}, snap, sess)
	if cte := readsCTE(); cte != "" {
		// A FROM subquery pulled up: the merged table's name may be a
		// WITH clause's too.
		return nil, cte
	}
	switch {
	case b == nil:
		return nil, why
	case b.substitute() != nil:
		return nil, "a subquery's APPROX_COUNT_DISTINCT has no rollup"
	}
	return b, ""
}

// subqueries lists s's subqueries that PostgreSQL evaluates on their own,
// without reference to s's rows: its WITH clause's SELECTs, the
// subqueries in FROM (not LATERAL, also inside joins), a set operation's
// arms.
func subqueries(s *syntax.Select) []*syntax.Select {
	var out []*syntax.Select
	if s.With != nil {
		out = append(out, s.With.Bodies...)
	}
	if s.SetOp != "" {
		return append(out, s.Left, s.Right)
	}
	s.EachFrom(func(fi syntax.FromItem) {
		if fi.Query != nil && fi.Query.Placed() {
			out = append(out, fi.Query)
		}
	})
	return out
}

// cteNames adds the names of every WITH clause in s, at any depth, to
// names: a table name in a subquery may mean one of them.
func cteNames(s *syntax.Select, names []string) []string {
	if s == nil {
		return names
	}
	if s.With != nil {
		names = append(names, s.With.Names...)
	}
	for _, c := range subqueries(s) {
		names = cteNames(c, names)
	}
	return names
}

// modifies reports whether s holds a data-modifying WITH clause: its
// effects and its snapshot are PostgreSQL's business alone.
func modifies(s *syntax.Select) bool {
	if s.With != nil && s.With.Modifying {
		return true
	}
	for _, c := range subqueries(s) {
		if modifies(c) {
			return true
		}
	}
	return false
}

// nestable reports whether a statement may hold arms of a nested plan, or
// be one: nothing it does beyond what PostgreSQL runs the same around the
// arms (a WITH clause, a set operation, grouping sets). SELECT INTO, FOR
// UPDATE and the like keep the whole statement PostgreSQL's.
func nestable(s *syntax.Select) bool {
	switch s.Unsupported {
	case "", "a WITH clause", "a set operation (UNION, INTERSECT, EXCEPT)", syntax.GroupingSetsWhat:
		return true
	}
	return false
}
