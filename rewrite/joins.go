package rewrite

import (
	"slices"
	"strconv"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Reading a statement as a star join (starjoin.go): its tables, the fact
// table among them, and what the rest of the statement reads of the fact
// table, which become the arm's keys.

// notAJoin is readStarJoin's reason for a statement that joins no two
// tables.
const notAJoin = "not one table joined to another"

// readStarJoin reads s as a fact table joined to dimension tables (or
// alone, regrouped).
func readStarJoin(s *syntax.Select, snap *catalog.Snapshot, sess env) (starJoin, string) {
	sj, items, why := joinTables(s)
	if why != "" {
		return sj, why
	}
	if why := regroupable(s, sj); why != "" {
		return sj, why
	}
	if why := sj.findFact(s, items, snap, sess); why != "" {
		return sj, why
	}
	sj.groupKeys(s)
	if r, why := sj.windowRollup(sess.TimeZone); r != nil {
		sj.rollup = r
	} else if len(sj.rollups) > 1 && why != "" {
		return sj, why
	}
	if r := sj.rollup; r != nil {
		sj.bucketFilters(s, r, sess.TimeZone)
		if why := sj.readWindows(r, sess.TimeZone); why != "" {
			return sj, why
		}
	}
	rr := &refReader{sj: &sj, keys: map[string]bool{}}
	sj.splitConditions(s, rr)
	rr.readClauses(s)
	if rr.bad != "" {
		return sj, rr.bad
	}
	if len(rr.keys) == 0 && len(sj.exprs) == 0 && len(sj.dims) > 0 {
		return sj, "the join reads no column of the fact table"
	}
	for k := range rr.keys {
		sj.keys = append(sj.keys, k)
	}
	slices.Sort(sj.keys)
	return sj, ""
}

// joinTables reads s's FROM clause: one table, two joined (sj's kind and
// on) or listed, or the leaves of a join tree of more (sj's ons).
func joinTables(s *syntax.Select) (sj starJoin, items []syntax.FromItem, why string) {
	if s.Unsupported != "" && s.Unsupported != syntax.GroupingSetsWhat || s.With != nil {
		// A WITH clause, say, whose names the FROM items could mean.
		return sj, nil, notAJoin
	}
	switch {
	case len(s.From) == 1 && (s.Unsupported == syntax.GroupingSetsWhat || hasFilter(s) || hasRegrouped(s)) && s.From[0].Name != "":
		// One table, grouped by grouping sets, aggregated with FILTER,
		// with window functions over its groups or subqueries reading its
		// dimensions: its rows regrouped as a join's are, with no
		// dimension table.
		items = s.From
	case len(s.From) == 1 && onJoin(s.From[0]) != nil:
		j := onJoin(s.From[0])
		sj.kind, sj.on = j.Type, j.On
		items = []syntax.FromItem{j.Left, j.Right}
	case len(s.From) == 1 && innerJoin(s.From[0]) != nil && innerJoin(s.From[0]).On == nil:
		// A CROSS JOIN: the two tables listed.
		j := innerJoin(s.From[0])
		items = []syntax.FromItem{j.Left, j.Right}
	case len(s.From) >= 2:
		items = s.From
	default:
		return sj, nil, notAJoin
	}
	if len(items) > 2 || items[0].Join != nil || len(items) == 2 && items[1].Join != nil {
		// Three tables or more: the leaves of the join tree, and its ON
		// conditions.
		var ok bool
		if items, sj.ons, ok = joinLeaves(s.From); !ok {
			return sj, nil, notAJoin
		}
		sj.kind, sj.on = "", nil
	}
	for _, it := range items {
		if len(items) == 2 && seriesItem(it) {
			continue // a series of window ends (window.go)
		}
		if it.Name == "" || it.Unsupported != "" || it.Only {
			if len(items) == 2 {
				return sj, nil, "a join of other than two plain tables"
			}
			return sj, nil, "a join of other than plain tables"
		}
	}
	return sj, items, ""
}

// regroupable says why PostgreSQL cannot evaluate s over the arm's rows as
// it would over the fact table's, or "".
func regroupable(s *syntax.Select, sj starJoin) string {
	for _, t := range s.Targets {
		if t.Star {
			return "select list has *"
		}
	}
	for _, o := range s.OrderBy {
		if o.Dir == "USING" {
			return "ORDER BY ... USING"
		}
	}
	// PostgreSQL evaluates the rest once per arm row, not per fact row:
	// only functions whose value depends on their arguments alone, and no
	// aggregate the rewriter does not know (it would be taken for one).
	if why := unknownFunctions(s); why != "" {
		return why
	}
	for _, on := range append([]syntax.Expr{sj.on}, sj.ons...) {
		if why := unknownFunctions(&syntax.Select{Where: on}); why != "" {
			return why
		}
	}
	return ""
}

// findFact finds the fact table among the join's tables, the one a rollup
// reads, and the dimension tables.
func (sj *starJoin) findFact(s *syntax.Select, items []syntax.FromItem, snap *catalog.Snapshot, sess env) string {
	switch {
	case len(items) == 1:
		_, r := resolveTable(items[0], snap, sess)
		if len(r) == 0 {
			return "no rollup reads table " + refName(items[0])
		}
		sj.fact, sj.factCols, sj.rollup, sj.rollups = items[0], r[0].SourceColumns, r[0], r
		return ""
	case len(items) > 2:
		return sj.readLeaves(s, items, snap, sess)
	case refName(items[0]) == refName(items[1]):
		return "both tables of the join have one name"
	}
	_, r0 := resolveTable(items[0], snap, sess)
	_, r1 := resolveTable(items[1], snap, sess)
	switch {
	case len(r0) > 0 && len(r1) == 0:
		sj.fact, sj.dims, sj.factCols, sj.rollup, sj.rollups = items[0], items[1:2], r0[0].SourceColumns, r0[0], r0
	case len(r1) > 0 && len(r0) == 0:
		sj.fact, sj.dims, sj.factCols, sj.rollup, sj.rollups = items[1], items[0:1], r1[0].SourceColumns, r1[0], r1
		// dimension LEFT JOIN fact: every dimension row stays, once
		// with no fact when none matches.
		sj.dimKept = sj.kind == "LEFT JOIN"
	default:
		return "no one table of the join is the fact table of a rollup"
	}
	return ""
}

// groupKeys makes keys of the GROUP BY items (or the select-list items
// their positions name) that read fact columns only and are not one (a
// time bucket, say), as a whole.
func (sj *starJoin) groupKeys(s *syntax.Select) {
	for _, g := range s.GroupBy {
		if c, ok := g.(*syntax.Const); ok && c.Type == "int" {
			n, err := strconv.Atoi(c.Val)
			if err != nil || n < 1 || n > len(s.Targets) || s.Targets[n-1].Star {
				continue
			}
			g = s.Targets[n-1].Expr
		}
		if _, isRef := g.(*syntax.ColRef); isRef || sj.exprKey(g) != "" {
			continue
		}
		if _, isSets := g.(*syntax.GroupingSet); isSets {
			continue // their columns are keys
		}
		factOnly, any := true, false
		syntax.Walk(g, func(x syntax.Expr) bool {
			switch x := x.(type) {
			case *syntax.ColRef:
				any = true
				factOnly = factOnly && sj.side(x) == "fact"
			case *syntax.FuncCall:
				factOnly = factOnly && classifyAgg(x) == notAgg
			case *syntax.Unsupported:
				factOnly = false
			}
			return true
		})
		if factOnly && any {
			sj.exprKeys = append(sj.exprKeys, syntax.SQL(g, nil))
			sj.exprs = append(sj.exprs, g)
		}
	}
}

// splitConditions sorts the join's conditions: those on fact columns alone
// filter the fact rows before the join, in the arm (sj.inner): the WHERE
// clause's, or under a LEFT JOIN that keeps the dimension table the ON
// clause's (its WHERE clause drops the rows a filter on facts would leave
// without facts). The others PostgreSQL evaluates over the arm's rows.
func (sj *starJoin) splitConditions(s *syntax.Select, rr *refReader) {
	pushed, kept := s.Where, sj.on
	if sj.dimKept {
		pushed, kept = sj.on, s.Where
	}
	var left []syntax.Expr
	for _, c := range conjuncts(pushed) {
		fact, dim := rr.read(c, false)
		if fact && !dim && !hasRegrouped(&syntax.Select{Where: c}) {
			sj.inner = append(sj.inner, c)
		} else {
			rr.read(c, true)
			left = append(left, c)
		}
	}
	for _, c := range conjuncts(kept) {
		rr.read(c, true)
	}
	for _, on := range sj.ons {
		rr.read(on, true)
	}
	if sj.dimKept {
		sj.on, sj.outer = andOf(left), conjuncts(kept)
		if sj.on == nil {
			sj.on = &syntax.Const{Type: "bool", Val: "true"}
		}
	} else {
		sj.outer = left
	}
}

// refReader reads the expressions PostgreSQL evaluates over the arm's
// rows: the fact columns they read become keys; bad says why one cannot
// be so evaluated (every column reference must name its table).
type refReader struct {
	sj   *starJoin
	keys map[string]bool
	bad  string
}

// read reads e outside aggregates, making its fact columns keys when key
// is set, and reports whether it reads the fact table, a dimension table.
func (rr *refReader) read(e syntax.Expr, key bool) (fact, dim bool) {
	sj := rr.sj
	syntax.Walk(e, func(x syntax.Expr) bool {
		if key && sj.exprKey(x) != "" {
			fact = true
			return false // the arm's column
		}
		switch x := x.(type) {
		case *syntax.Unsupported:
			switch why := sj.readRegrouped(x, rr.keys, key); {
			case why != "" && rr.bad == "":
				rr.bad = why
			case why == "":
				return true // its expressions are read below it
			}
		case *syntax.FuncCall:
			if isAggregate(x) {
				return false
			}
		case *syntax.ColRef:
			if sj.timeRefs[x] {
				fact = true // the bucket key stands for it
				return false
			}
			switch sj.side(x) {
			case "fact":
				fact = true
				if key {
					rr.keys[x.Parts[len(x.Parts)-1]] = true
				}
			case "dim":
				dim = true
			default:
				rr.fail("column reference " + syntax.SQL(x, nil) + " does not name its table in a join")
			}
		}
		return true
	})
	return fact, dim
}

// fail keeps the first reason.
func (rr *refReader) fail(why string) {
	if rr.bad == "" {
		rr.bad = why
	}
}

// readClauses reads the select list, GROUP BY, HAVING, ORDER BY, LIMIT and
// OFFSET, and the aggregates' FILTER conditions; aggregates must read
// fact columns only.
func (rr *refReader) readClauses(s *syntax.Select) {
	for _, t := range s.Targets {
		rr.read(t.Expr, true)
		if t.Name == "" && syntax.ColumnName(t.Expr) == "?column?" && hasRegrouped(&syntax.Select{Where: t.Expr}) {
			// A subquery's column name PostgreSQL would figure from
			// its select list: give it an alias.
			rr.fail("a select-list subquery or window call without an alias whose name the rewriter cannot tell")
		}
	}
	for _, g := range s.GroupBy {
		rr.read(g, true)
	}
	rr.read(s.Having, true)
	for _, o := range s.OrderBy {
		if c, ok := o.Expr.(*syntax.ColRef); ok && len(c.Parts) == 1 && outputName(s, c.Parts[0]) {
			continue // an output column (ORDER BY prefers those to input columns)
		}
		rr.read(o.Expr, true)
	}
	rr.read(s.Limit, true)
	rr.read(s.Offset, true)
	s.EachExpr(func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			f, ok := x.(*syntax.FuncCall)
			if !ok || !isAggregate(f) {
				return true
			}
			rr.read(f.Filter, true) // evaluated per arm row: its fact columns are keys
			syntax.Walk(unfiltered(f), func(y syntax.Expr) bool {
				c, ok := y.(*syntax.ColRef)
				switch {
				case !ok:
				case rr.sj.side(c) == "":
					rr.fail("column reference " + syntax.SQL(c, nil) + " does not name its table in a join")
				case rr.sj.side(c) != "fact":
					rr.fail("an aggregate reads " + syntax.SQL(c, nil) + ", not a column of the fact table")
				}
				return true
			})
			return false
		})
	})
}

// side says which table of the join a column reference names: "fact",
// "dim", or "" when it does not name one.
func (sj starJoin) side(c *syntax.ColRef) string {
	switch {
	case len(c.Parts) == 1 && len(sj.dims) == 0:
		return "fact" // one table: unambiguous
	case qualifiedFor(c, sj.fact):
		return "fact"
	}
	for _, d := range sj.dims {
		if qualifiedFor(c, d) {
			return "dim"
		}
	}
	if len(c.Parts) == 1 && len(sj.factCols) > 0 && !slices.Contains(sj.factCols, c.Parts[0]) {
		// An unqualified name of a series' column (generate_series(...)
		// AS n: its alias) that the fact table does not have.
		for _, d := range sj.dims {
			if d.Func != nil && seriesColumn(d) == c.Parts[0] {
				return "dim"
			}
		}
	}
	return ""
}

// seriesColumn is the name of a series FROM item's column: its column
// alias, or its alias.
func seriesColumn(fi syntax.FromItem) string {
	if len(fi.FuncCols) > 0 {
		return fi.FuncCols[0]
	}
	return fi.Alias
}

// onJoin is fi when it is an inner or left join with ON (neither NATURAL
// nor USING, and no alias), the joins the star-join planner reads; nil
// otherwise.
func onJoin(fi syntax.FromItem) *syntax.Join {
	if j := fi.Join; j != nil && j.Plain && j.On != nil && (j.Type == "JOIN" || j.Type == "LEFT JOIN") {
		return j
	}
	return nil
}

// innerJoin is fi when it is an inner join (with ON or none, neither
// NATURAL nor USING, and no alias); nil otherwise.
func innerJoin(fi syntax.FromItem) *syntax.Join {
	if j := fi.Join; j != nil && j.Plain && j.Type == "JOIN" {
		return j
	}
	return nil
}

// plainQuery is fi's subquery when its alias does not rename its
// columns; nil otherwise.
func plainQuery(fi syntax.FromItem) *syntax.Select {
	if fi.ColAliases {
		return nil
	}
	return fi.Query
}

// joinLeaves lists the tables of a FROM clause's join trees, left to
// right, and their ON conditions; ok is false for any FROM item but a
// plain table or an inner or left join with ON.
func joinLeaves(from []syntax.FromItem) (leaves []syntax.FromItem, ons []syntax.Expr, ok bool) {
	var visit func(fi syntax.FromItem) bool
	visit = func(fi syntax.FromItem) bool {
		if fi.Join == nil {
			leaves = append(leaves, fi)
			return true
		}
		j := onJoin(fi)
		if j == nil {
			return false
		}
		ons = append(ons, j.On)
		return visit(j.Left) && visit(j.Right)
	}
	for _, fi := range from {
		if !visit(fi) {
			return nil, nil, false
		}
	}
	return leaves, ons, true
}

// readLeaves finds the fact table among the tables of a join of three or
// more: the one table a rollup reads, never on the side a LEFT JOIN fills
// with NULLs (its conditions would then not filter facts alone).
func (sj *starJoin) readLeaves(s *syntax.Select, items []syntax.FromItem, snap *catalog.Snapshot, sess env) string {
	names := map[string]bool{}
	for _, it := range items {
		if names[refName(it)] {
			return "two tables of the join have one name"
		}
		names[refName(it)] = true
		_, r := resolveTable(it, snap, sess)
		switch {
		case len(r) == 0:
			sj.dims = append(sj.dims, it)
		case sj.fact.Name != "":
			return "two tables of the join are read by rollups"
		default:
			sj.fact, sj.factCols, sj.rollup, sj.rollups = it, r[0].SourceColumns, r[0], r
		}
	}
	if sj.fact.Name == "" {
		return "no one table of the join is the fact table of a rollup"
	}
	var nullable func(fi syntax.FromItem, filled bool) bool
	nullable = func(fi syntax.FromItem, filled bool) bool {
		if fi.Join == nil {
			return filled && refName(fi) == refName(sj.fact)
		}
		j := fi.Join
		return nullable(j.Left, filled) || nullable(j.Right, filled || onJoin(fi) != nil && j.Type == "LEFT JOIN")
	}
	for _, fi := range s.From {
		if nullable(fi, false) {
			return "the fact table is on the side a LEFT JOIN fills with NULLs, in a join of three tables or more"
		}
	}
	return ""
}
