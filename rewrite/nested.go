package rewrite

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
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
func pullUp(s *selectStmt) bool {
	if len(s.from) != 1 || s.unsupported != "" || holdsSubLink(s) {
		// A subquery expression's unqualified names would resolve against
		// the table instead of the subquery's output columns.
		return false
	}
	outer := s.from[0]
	sub := plainQuery(outer)
	if sub == nil || outer.alias == "" || !filtersOnly(sub) {
		return false
	}
	inner := sub.from[0]
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
	refs, ok := resolveInner(sub.where, inner, nil)
	if !ok {
		return false
	}
	if refs, ok = out.resolveOuter(s, outer.alias, refs); !ok {
		return false
	}
	for _, r := range refs {
		r.c.parts = []string{r.col}
	}
	for i, n := range names {
		if n != "" {
			s.targets[i].name = n
		}
	}
	s.from = []fromItem{{schema: inner.schema, name: inner.name, only: inner.only}}
	switch {
	case sub.where == nil:
	case s.where == nil:
		s.where = sub.where
	default:
		s.where = &boolExpr{op: "AND", args: []expr{sub.where, s.where}}
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
func outputsOf(sub *selectStmt, inner fromItem) (subOutputs, bool) {
	out := subOutputs{cols: map[string]string{}, seen: map[string]int{}, computed: map[string]bool{}}
	for _, t := range sub.targets {
		if t.star {
			out.star = true
			continue
		}
		name := t.name
		if name == "" {
			name = figureColname(t.e)
		}
		out.seen[name]++
		c, isRef := t.e.(*colRef)
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
	c   *colRef
	col string
}

// resolveInner appends to refs each column reference in e, an expression
// of the subquery, with the column of its table inner that it names. It
// reports false when one names no column of inner.
func resolveInner(e expr, inner fromItem, refs []pulledRef) ([]pulledRef, bool) {
	ok := true
	walk(e, func(x expr) bool {
		if c, isRef := x.(*colRef); isRef {
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
func (out subOutputs) resolveOuter(s *selectStmt, alias string, refs []pulledRef) ([]pulledRef, bool) {
	ok := true
	s.eachExpr(func(e expr) {
		walk(e, func(x expr) bool {
			c, isRef := x.(*colRef)
			if !isRef {
				return ok
			}
			name := c.parts[len(c.parts)-1]
			switch {
			case len(c.parts) > 2, len(c.parts) == 2 && c.parts[0] != alias, name == "*":
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
func outputNames(s *selectStmt) ([]string, bool) {
	names := make([]string, len(s.targets))
	for i, t := range s.targets {
		if t.star {
			return nil, false
		}
		if t.name == "" {
			names[i] = figureColname(t.e)
		}
	}
	return names, true
}

// holdsSubLink reports whether s holds a subquery expression.
func holdsSubLink(s *selectStmt) bool {
	return s.anyExpr(func(x expr) bool {
		u, ok := x.(*unsupported)
		return ok && u.link != nil
	})
}

// filtersOnly reports whether sub only filters and projects one table.
func filtersOnly(sub *selectStmt) bool {
	if sub.unsupported != "" || sub.setOp != "" || sub.with != nil || sub.distinct ||
		len(sub.groupBy) > 0 || sub.having != nil || len(sub.orderBy) > 0 || sub.limit != nil || sub.offset != nil ||
		len(sub.from) != 1 {
		return false
	}
	fi := sub.from[0]
	if fi.unsupported != "" || fi.name == "" {
		return false
	}
	if why := unknownFunctions(sub); why != "" {
		return false
	}
	if acd, cd, _ := findAggs(sub); acd || cd {
		return false
	}
	agg := false
	sub.eachExpr(func(e expr) {
		walk(e, func(x expr) bool {
			if f, ok := x.(*funcCall); ok && classifyAgg(f) != notAgg {
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
func bareColumn(c *colRef, fi fromItem) (string, bool) {
	name := c.parts[len(c.parts)-1]
	if name == "*" {
		return "", false
	}
	return name, len(c.parts) == 1 || qualifiedFor(c, fi)
}

// qualifiedFor reports whether c is qualified by fi's reference name, or
// by its schema and name when it has no alias.
func qualifiedFor(c *colRef, fi fromItem) bool {
	switch q := c.parts[:len(c.parts)-1]; len(q) {
	case 1:
		return q[0] == refName(fi)
	case 2:
		return fi.alias == "" && fi.schema != "" && q[0] == fi.schema && q[1] == fi.name
	}
	return false
}

// planNested plans a statement whose aggregate subqueries rollups answer:
// in its WITH clause, in FROM (also inside joins), as a set operation's
// arms, at any depth along those. Each subquery planSelect answers from a
// rollup becomes an arm; the statement around them runs in PostgreSQL
// as it was written.
func planNested(p *parsed, snap *catalog.Snapshot, sess env) (*built, string) {
	s := p.sel
	if !nestable(s) {
		return nil, noSubquery // the reason already given is the statement's
	}
	if s.with != nil && s.with.recursive {
		return nil, "a recursive WITH clause"
	}
	if modifies(s) {
		return nil, "a data-modifying WITH clause"
	}
	ctes := cteNames(s, nil)
	var subs []*selectStmt
	var arms []*built
	var reasons []string
	var visit func(*selectStmt)
	visit = func(s *selectStmt) {
		for _, c := range subqueries(s) {
			if !nestable(c) {
				continue // INTO, FOR UPDATE, ...: not read
			}
			if acd, cd, _ := findAggs(c); !acd && !cd {
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
	text, err := p.outerText(subs)
	if err != nil {
		return nil, "the statement around its subqueries cannot be printed: " + err.Error()
	}
	return &built{Plan: spliceArms(arms, text)}, ""
}

// spliceArms is the Nested plan of a statement whose text around its
// answered subqueries is text (len(arms)+1 pieces): a subquery answered as
// a star join is its own statement around its arm, which stands in the
// subquery's place.
func spliceArms(arms []*built, text []string) *plan.Nested {
	outer := []string{text[0]}
	pl := &plan.Nested{Head: plan.Head{Source: arms[0].Header().Source}}
	var rollups, guards, notices []string
	for i, b := range arms {
		a := b.Header()
		around, inner := []string{"", ""}, []*plan.Rollup{b.rollup()}
		if n, ok := b.Plan.(*plan.Nested); ok {
			// Parenthesized, as a set operation's arm with ORDER BY must be.
			around, inner = slices.Clone(n.Outer), n.Arms
			around[0] = "(" + around[0]
			around[len(around)-1] += ")"
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

// noSubquery is planNested's reason for a statement without subqueries.
const noSubquery = "no subquery"

// planArm plans subquery c on its own: a FromRollup plan, or why not.
func planArm(c *selectStmt, ctes []string, snap *catalog.Snapshot, sess env) (*built, string) {
	readsCTE := func() string {
		var why string
		var read func(f fromItem)
		read = func(f fromItem) {
			if f.name != "" && f.schema == "" && slices.Contains(ctes, f.name) && why == "" {
				why = "a subquery reads the common table expression " + catalog.QuoteIdent(f.name)
			}
			if f.join != nil {
				read(f.join.l)
				read(f.join.r)
			}
		}
		for _, f := range c.from {
			read(f)
		}
		return why
	}
	if why := readsCTE(); why != "" {
		return nil, why
	}
	b, why := planSelect(c, snap, sess)
	if b == nil && pullUp(c) {
		// The merged table's name may be a WITH clause's too.
		if why := readsCTE(); why != "" {
			return nil, why
		}
		b, why = planSelect(c, snap, sess)
	}
	if b == nil || b.substitute() != nil {
		// A join, grouping sets, FILTER, windows: the subquery as a star
		// join, its own statement around its one arm.
		if sb, sjWhy := planStarJoin(c, snap, sess); sb != nil {
			b = sb
		} else if sjWhy != notAJoin {
			why += "; as a join: " + sjWhy
		}
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
func subqueries(s *selectStmt) []*selectStmt {
	var out []*selectStmt
	if s.with != nil {
		out = append(out, s.with.bodies...)
	}
	if s.setOp != "" {
		return append(out, s.larg, s.rarg)
	}
	var from func(fi fromItem)
	from = func(fi fromItem) {
		if fi.query != nil && fi.query.raw != nil {
			out = append(out, fi.query)
		}
		if fi.join != nil {
			from(fi.join.l)
			from(fi.join.r)
		}
	}
	for _, fi := range s.from {
		from(fi)
	}
	return out
}

// cteNames adds the names of every WITH clause in s, at any depth, to
// names: a table name in a subquery may mean one of them.
func cteNames(s *selectStmt, names []string) []string {
	if s == nil {
		return names
	}
	if s.with != nil {
		names = append(names, s.with.names...)
	}
	for _, c := range subqueries(s) {
		names = cteNames(c, names)
	}
	return names
}

// modifies reports whether s holds a data-modifying WITH clause: its
// effects and its snapshot are PostgreSQL's business alone.
func modifies(s *selectStmt) bool {
	if s.with != nil && s.with.modifying {
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
func nestable(s *selectStmt) bool {
	switch s.unsupported {
	case "", "a WITH clause", "a set operation (UNION, INTERSECT, EXCEPT)", groupingSetsWhat:
		return true
	}
	return false
}
