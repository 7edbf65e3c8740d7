package rewrite

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsketch/pgsketch/catalog"
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
// sketches are united (hll_union_agg) and estimated (hll_cardinality),
// counts and sums added. Every joined row of the original statement is a
// fact row with the key values of its arm row, joined to the same
// dimension rows, so the answer is the original's however many dimension
// rows match a key (a key matching two rows counts twice, as in the
// original; a key matching none drops, or keeps NULLs under LEFT JOIN):
// distinct counts are never summed, and counts and sums stay exact.

// planStarJoin plans s as a star join, or says why not.
func planStarJoin(s *selectStmt, snap *catalog.Snapshot, sess Session) (*built, string) {
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
	b, why := planSelect(arm, snap, sess)
	switch {
	case b == nil:
		return nil, "the fact table " + refName(sj.fact) + " per join key: " + why
	case b.Kind != FromRollup:
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
	// The arm's select list names its aggregates pgsketch_a1, ... (its
	// targets); the plan's own Agg names are internal to the arm.
	q := catalog.QuoteIdent(refName(sj.fact)) + "."
	hs := catalog.QuoteIdent(hll.Schema) + "."
	var hook func(e expr) (string, bool)
	hook = func(e expr) (string, bool) {
		if k := sj.exprKey(e); k != "" {
			return q + k, true
		}
		if c, ok := e.(*colRef); ok && sj.timeRefs[c] {
			return q + sj.timeKey, true
		}
		if c, ok := e.(*colRef); ok && sj.side(c) == "fact" {
			// The arm's column of that name, by the arm's alias.
			return q + catalog.QuoteIdent(c.parts[len(c.parts)-1]), true
		}
		f, ok := e.(*funcCall)
		if !ok {
			return "", false
		}
		i, ok := aggOf[f]
		if !ok {
			return "", false
		}
		col := q + catalog.QuoteIdent(armAggName(i))
		filter := ""
		if f.filter != nil {
			filter = " FILTER (WHERE " + sqlOf(f.filter, hook) + ")"
		}
		switch classifyAgg(unfiltered(f)) {
		case countDistinct, approxCountDistinct:
			return "CAST(COALESCE(" + hs + "hll_cardinality(" + hs + "hll_union_agg(CAST(" + col + " AS " + hs + "hll))" + filter + "), 0) AS bigint)", true
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
	from := armMarker(0) + " AS " + catalog.QuoteIdent(refName(sj.fact))
	united := " united across the join by PostgreSQL"
	switch {
	case len(sj.dims) == 0:
		united = " united per group by PostgreSQL"
	case len(sj.dims) > 1:
		// The join tree as written, the fact table's leaf the arm.
		var items []string
		for _, fi := range s.from {
			items = append(items, sj.fromTree(fi, from, hook, true))
		}
		from = strings.Join(items, ", ")
	case sj.kind == "":
		from += ", " + fromSQL(sj.dims[0])
	case sj.dimKept:
		from = fromSQL(sj.dims[0]) + " LEFT JOIN " + from + " ON " + sqlOf(sj.on, hook)
	default:
		from += " " + sj.kind + " " + fromSQL(sj.dims[0]) + " ON " + sqlOf(sj.on, hook)
	}
	var where []string
	for _, c := range sj.outer {
		where = append(where, sqlOf(c, hook))
	}
	text := selectSQL(s, from, strings.Join(where, " AND "), true, hook)
	before, after, _ := strings.Cut(text, armMarker(0))
	if per := strings.Join(append(slices.Clone(sj.keys), sj.exprKeys...), ", "); per != "" {
		b.Notice += ", its sketches per " + per + united
	} else {
		b.Notice += ", its sketches" + strings.Replace(united, " per group", "", 1)
	}
	pl := &Plan{Kind: Nested, Outer: []string{before, after}, Arms: []*Plan{b.Plan}, Rollup: b.Rollup, Source: b.Source,
		Guard: b.Guard, StdErr: b.StdErr, Notice: b.Notice}
	pl.OuterParams = paramsIn(before + " " + after)
	return &built{Plan: pl}, ""
}

// armAggName names the arm's i-th aggregate column.
func armAggName(i int) string { return "pgsketch_a" + strconv.Itoa(i+1) }

// aggType is the SQL type of the arm's aggregate f (the plan's Aggs are
// f's, written with bare column names).
func aggType(b *built, f *funcCall) string {
	bare := sqlOf(f, func(x expr) (string, bool) {
		if c, ok := x.(*colRef); ok {
			return catalog.QuoteIdent(c.parts[len(c.parts)-1]), true
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
	fact fromItem
	// dims are the other tables of the join: one, or more when the join
	// tree is printed as written around the arm.
	dims []fromItem
	// kind and on are the join's of two tables: "JOIN", "LEFT JOIN", or
	// "" for a comma join.
	kind string
	// dimKept: the join is dimension LEFT JOIN fact.
	dimKept bool
	// ons are the ON conditions of a join of three tables or more.
	ons []expr
	on  expr
	// inner are the WHERE conjuncts on fact columns only (the arm's),
	// outer the others.
	inner, outer []expr
	// keys are the fact columns read outside the aggregates and the
	// inner conjuncts; exprKeys the GROUP BY items that read only fact
	// columns and are not one (a time bucket, say), by their text.
	keys     []string
	exprKeys []string
	exprs    []expr
	// factCols are the fact table's columns (as the catalog read them).
	factCols []string
	// rollup is one rollup over the fact table: its time column and
	// grain are those of every rollup over it that answers the arm's
	// bucket key (the planner checks).
	rollup *catalog.Rollup
	// timeRefs are the references to the time column in FILTER
	// conditions that compare it with a bucket boundary, and timeKey
	// the bucket key that stands for them over the arm's rows.
	timeRefs map[*colRef]bool
	timeKey  string
}

// exprKey is the arm's column of a key expression, or "".
func (sj starJoin) exprKey(e expr) string {
	if i := slices.Index(sj.exprKeys, sqlOf(e, nil)); i >= 0 {
		return "pgsketch_g" + strconv.Itoa(i+1)
	}
	return ""
}

// notAJoin is readStarJoin's reason for a statement that joins no two
// tables.
const notAJoin = "not one table joined to another"

// readStarJoin reads s as a fact table joined to dimension tables (or
// alone, regrouped).
func readStarJoin(s *selectStmt, snap *catalog.Snapshot, sess Session) (starJoin, string) {
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
	if r := sj.rollup; r != nil {
		sj.bucketFilters(s, r, sess.TimeZone)
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
func joinTables(s *selectStmt) (sj starJoin, items []fromItem, why string) {
	if s.unsupported != "" && s.unsupported != groupingSetsWhat || s.with != nil {
		// A WITH clause, say, whose names the FROM items could mean.
		return sj, nil, notAJoin
	}
	switch {
	case len(s.from) == 1 && (s.unsupported == groupingSetsWhat || hasFilter(s) || hasRegrouped(s)) && s.from[0].name != "":
		// One table, grouped by grouping sets, aggregated with FILTER,
		// with window functions over its groups or subqueries reading its
		// dimensions: its rows regrouped as a join's are, with no
		// dimension table.
		items = s.from
	case len(s.from) == 1 && s.from[0].joinKind != "" && len(s.from[0].joined) == 2:
		fi := s.from[0]
		sj.kind, sj.on = fi.joinKind, fi.joinOn
		items = fi.joined
	case len(s.from) >= 2:
		items = s.from
	default:
		return sj, nil, notAJoin
	}
	if len(items) > 2 || len(items[0].joined) > 0 || len(items) == 2 && len(items[1].joined) > 0 {
		// Three tables or more: the leaves of the join tree, and its ON
		// conditions.
		var ok bool
		if items, sj.ons, ok = joinLeaves(s.from); !ok {
			return sj, nil, notAJoin
		}
		sj.kind, sj.on = "", nil
	}
	for _, it := range items {
		if it.name == "" || it.unsupported != "" || it.only {
			return sj, nil, "a join of other than " + map[bool]string{true: "two ", false: ""}[len(items) == 2] + "plain tables"
		}
	}
	return sj, items, ""
}

// regroupable says why PostgreSQL cannot evaluate s over the arm's rows as
// it would over the fact table's, or "".
func regroupable(s *selectStmt, sj starJoin) string {
	for _, t := range s.targets {
		if t.star {
			return "select list has *"
		}
	}
	for _, o := range s.orderBy {
		if o.dir == "USING" {
			return "ORDER BY ... USING"
		}
	}
	// PostgreSQL evaluates the rest once per arm row, not per fact row:
	// only functions whose value depends on their arguments alone, and no
	// aggregate the rewriter does not know (it would be taken for one).
	if why := unknownFunctions(s); why != "" {
		return why
	}
	for _, on := range append([]expr{sj.on}, sj.ons...) {
		if why := unknownFunctions(&selectStmt{where: on}); why != "" {
			return why
		}
	}
	return ""
}

// findFact finds the fact table among the join's tables, the one a rollup
// reads, and the dimension tables.
func (sj *starJoin) findFact(s *selectStmt, items []fromItem, snap *catalog.Snapshot, sess Session) string {
	switch {
	case len(items) == 1:
		_, r := resolveTable(items[0], snap, sess)
		if len(r) == 0 {
			return "no rollup reads table " + refName(items[0])
		}
		sj.fact, sj.factCols, sj.rollup = items[0], r[0].SourceColumns, r[0]
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
		sj.fact, sj.dims, sj.factCols, sj.rollup = items[0], items[1:2], r0[0].SourceColumns, r0[0]
	case len(r1) > 0 && len(r0) == 0:
		sj.fact, sj.dims, sj.factCols, sj.rollup = items[1], items[0:1], r1[0].SourceColumns, r1[0]
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
func (sj *starJoin) groupKeys(s *selectStmt) {
	for _, g := range s.groupBy {
		if c, ok := g.(*constExpr); ok && c.kind == "int" {
			n, err := strconv.Atoi(c.val)
			if err != nil || n < 1 || n > len(s.targets) || s.targets[n-1].star {
				continue
			}
			g = s.targets[n-1].e
		}
		if _, isRef := g.(*colRef); isRef || sj.exprKey(g) != "" {
			continue
		}
		if _, isSets := g.(*groupingSet); isSets {
			continue // their columns are keys
		}
		factOnly, any := true, false
		walk(g, func(x expr) bool {
			switch x := x.(type) {
			case *colRef:
				any = true
				factOnly = factOnly && sj.side(x) == "fact"
			case *funcCall:
				factOnly = factOnly && classifyAgg(x) == notAgg
			case *unsupported:
				factOnly = false
			}
			return true
		})
		if factOnly && any {
			sj.exprKeys = append(sj.exprKeys, sqlOf(g, nil))
			sj.exprs = append(sj.exprs, g)
		}
	}
}

// splitConditions sorts the join's conditions: those on fact columns alone
// filter the fact rows before the join, in the arm (sj.inner): the WHERE
// clause's, or under a LEFT JOIN that keeps the dimension table the ON
// clause's (its WHERE clause drops the rows a filter on facts would leave
// without facts). The others PostgreSQL evaluates over the arm's rows.
func (sj *starJoin) splitConditions(s *selectStmt, rr *refReader) {
	pushed, kept := s.where, sj.on
	if sj.dimKept {
		pushed, kept = sj.on, s.where
	}
	var left []expr
	for _, c := range conjuncts(pushed) {
		fact, dim := rr.read(c, false)
		if fact && !dim && !hasRegrouped(&selectStmt{where: c}) {
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
			sj.on = &constExpr{kind: "bool", val: "true"}
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
func (rr *refReader) read(e expr, key bool) (fact, dim bool) {
	sj := rr.sj
	walk(e, func(x expr) bool {
		if key && sj.exprKey(x) != "" {
			fact = true
			return false // the arm's column
		}
		switch x := x.(type) {
		case *unsupported:
			switch why := sj.readRegrouped(x, rr.keys, key); {
			case why != "" && rr.bad == "":
				rr.bad = why
			case why == "":
				return true // its expressions are read below it
			}
		case *funcCall:
			if isAggregate(x) {
				return false
			}
		case *colRef:
			if sj.timeRefs[x] {
				fact = true // the bucket key stands for it
				return false
			}
			switch sj.side(x) {
			case "fact":
				fact = true
				if key {
					rr.keys[x.parts[len(x.parts)-1]] = true
				}
			case "dim":
				dim = true
			default:
				rr.fail("column reference " + sqlOf(x, nil) + " does not name its table in a join")
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
func (rr *refReader) readClauses(s *selectStmt) {
	for _, t := range s.targets {
		rr.read(t.e, true)
		if t.name == "" && figureColname(t.e) == "?column?" && hasRegrouped(&selectStmt{where: t.e}) {
			// A subquery's column name PostgreSQL would figure from
			// its select list: give it an alias.
			rr.fail("a select-list subquery or window call without an alias whose name the rewriter cannot tell")
		}
	}
	for _, g := range s.groupBy {
		rr.read(g, true)
	}
	rr.read(s.having, true)
	for _, o := range s.orderBy {
		if c, ok := o.e.(*colRef); ok && len(c.parts) == 1 && s.outputName(c.parts[0]) {
			continue // an output column (ORDER BY prefers those to input columns)
		}
		rr.read(o.e, true)
	}
	rr.read(s.limit, true)
	rr.read(s.offset, true)
	s.eachExpr(func(e expr) {
		walk(e, func(x expr) bool {
			f, ok := x.(*funcCall)
			if !ok || !isAggregate(f) {
				return true
			}
			rr.read(f.filter, true) // evaluated per arm row: its fact columns are keys
			walk(unfiltered(f), func(y expr) bool {
				c, ok := y.(*colRef)
				switch {
				case !ok:
				case rr.sj.side(c) == "":
					rr.fail("column reference " + sqlOf(c, nil) + " does not name its table in a join")
				case rr.sj.side(c) != "fact":
					rr.fail("an aggregate reads " + sqlOf(c, nil) + ", not a column of the fact table")
				}
				return true
			})
			return false
		})
	})
}

// side says which table of the join a column reference names: "fact",
// "dim", or "" when it does not name one.
func (sj starJoin) side(c *colRef) string {
	switch {
	case len(c.parts) == 1 && len(sj.dims) == 0:
		return "fact" // one table: unambiguous
	case qualifiedFor(c, sj.fact):
		return "fact"
	}
	for _, d := range sj.dims {
		if qualifiedFor(c, d) {
			return "dim"
		}
	}
	return ""
}

// arm is the statement over the fact table alone that the star join's
// arm answers: per key, each aggregate of s (named armAggName(i)); aggOf
// maps s's aggregate calls to their index.
func (sj starJoin) arm(s *selectStmt) (*selectStmt, map[*funcCall]int, string) {
	arm := &selectStmt{from: []fromItem{sj.fact}}
	q := refName(sj.fact)
	for _, k := range sj.keys {
		arm.targets = append(arm.targets, target{name: k, e: &colRef{parts: []string{q, k}}})
		arm.groupBy = append(arm.groupBy, &colRef{parts: []string{q, k}})
	}
	for _, e := range sj.exprs {
		arm.targets = append(arm.targets, target{name: sj.exprKey(e), e: e})
		arm.groupBy = append(arm.groupBy, e)
	}
	switch len(sj.inner) {
	case 0:
	case 1:
		arm.where = sj.inner[0]
	default:
		arm.where = &boolExpr{op: "AND", args: sj.inner}
	}
	aggOf := map[*funcCall]int{}
	s.eachExpr(func(e expr) {
		walk(e, func(x expr) bool {
			f, ok := x.(*funcCall)
			if !ok || !isAggregate(f) {
				return true
			}
			if _, seen := aggOf[f]; !seen {
				aggOf[f] = len(aggOf)
				arm.targets = append(arm.targets, target{name: armAggName(aggOf[f]), e: unfiltered(f)})
			}
			return false
		})
	})
	if len(aggOf) == 0 {
		return nil, nil, "no aggregate"
	}
	return arm, aggOf, ""
}

// fromSQL prints a plain table FROM item.
func fromSQL(fi fromItem) string {
	s := catalog.QuoteIdent(fi.name)
	if fi.schema != "" {
		s = catalog.QuoteIdent(fi.schema) + "." + s
	}
	if fi.alias != "" {
		s += " AS " + catalog.QuoteIdent(fi.alias)
	}
	return s
}

// isAggregate reports whether f is an aggregate call the star join
// reaggregates: GROUPING(...) is evaluated by PostgreSQL over the arm's
// keys instead.
func isAggregate(f *funcCall) bool {
	return !f.isGrouping() && classifyAgg(f) != notAgg
}

// unfiltered is aggregate call f without its FILTER clause.
func unfiltered(f *funcCall) *funcCall {
	if f.filter == nil {
		return f
	}
	g := *f
	g.filter = nil
	return &g
}

// hasFilter reports whether an aggregate of s has a FILTER clause.
func hasFilter(s *selectStmt) bool {
	return s.anyExpr(func(x expr) bool {
		f, ok := x.(*funcCall)
		return ok && f.filter != nil
	})
}

// hasRegrouped reports whether s holds a window function call or a
// subquery expression that only the regrouping reads.
func hasRegrouped(s *selectStmt) bool {
	return s.anyExpr(func(x expr) bool {
		u, ok := x.(*unsupported)
		return ok && (u.window != nil || u.link != nil)
	})
}

// windowFuncs are the built-in window functions; built-in aggregates are
// window functions too.
var windowFuncs = map[string]bool{"row_number": true, "rank": true, "dense_rank": true, "percent_rank": true,
	"cume_dist": true, "ntile": true, "lag": true, "lead": true, "first_value": true, "last_value": true, "nth_value": true}

// readRegrouped checks a construct that PostgreSQL evaluates over the
// arm's rows as written: a window function call over the groups, or a
// subquery expression whose references to the fact table are to arm keys
// (added to keys when key is set). It says why not, or "" when it may be.
func (sj starJoin) readRegrouped(u *unsupported, keys map[string]bool, key bool) string {
	switch {
	case u.window != nil:
		f := unfiltered(u.window.f)
		name, builtin := f.builtin()
		if !builtin || !windowFuncs[name] && (classifyAgg(f) == notAgg || f.isGrouping()) {
			return "window function " + sqlOfName(f.name) + "() is not one the rewriter knows"
		}
		return ""
	case u.link == nil:
		return "the statement uses " + u.what
	}
	l := u.link
	if l.other != "" {
		return "the statement uses " + l.other
	}
	for _, n := range l.funcs {
		if f := (&funcCall{name: n}); !scalarCall(f) && classifyAgg(f) == notAgg {
			return "a subquery calls " + sqlOfName(n) + "(), not a function the rewriter knows to be an immutable or stable scalar function or an aggregate"
		}
	}
	fact := refName(sj.fact)
	dims := map[string]bool{}
	for _, d := range sj.dims {
		dims[refName(d)] = true
	}
	for _, n := range append([]string{fact}, slices.Collect(maps.Keys(dims))...) {
		if l.locals[n] {
			return "a subquery names a table of its own " + catalog.QuoteIdent(n) + ", as the statement does"
		}
	}
	for _, p := range append(slices.Clone(l.free), l.aggFree...) {
		if len(p) == 1 && p[0] == fact && !slices.Contains(sj.factCols, p[0]) {
			// The table's whole row, which over the arm would be the
			// arm's.
			return "a subquery reads the whole row of " + catalog.QuoteIdent(fact)
		}
	}
	for _, p := range l.aggFree {
		if len(p) > 1 || len(sj.factCols) == 0 || slices.Contains(sj.factCols, p[0]) || len(sj.dims) > 0 {
			// The aggregate may be the statement's, over the arm's rows.
			return "an aggregate inside a subquery reads " + strings.Join(p, ".") + ", which may be a column of the statement's tables"
		}
	}
	for _, p := range l.free {
		col := p[len(p)-1]
		switch {
		case len(p) == 1 && len(sj.factCols) == 0:
			return "a subquery reads " + col + ", and the catalog does not list the columns of " + refName(sj.fact)
		case len(p) == 1 && !slices.Contains(sj.factCols, col):
			// Not the fact table's: the subquery's own, or the
			// dimension table's, the same around the arm.
		case len(p) == 1, len(p) == 2 && p[0] == fact && col != "*":
			// May be the fact table's, or is: the arm's key of that name
			// stands for it.
			if key {
				keys[col] = true
			}
		case len(p) == 2 && dims[p[0]]:
		default:
			return "a subquery refers to " + strings.Join(p, ".") + " outside it"
		}
	}
	return ""
}

// bucketFilters finds, in the FILTER conditions of s's aggregates, the
// comparisons time >= C and time < C of the fact table's time column with
// a literal C that starts a bucket of r's grain (at midnight, or an hour,
// a Monday, a first of the month, in the session's time zone, or in UTC
// when that is the session's): over a
// row's bucket start b, time >= C is b >= C and time < C is b < C. For
// those, the bucket date_trunc(grain, time) becomes a key of the arm, and
// PostgreSQL compares it instead (the arm's planner refuses the key
// unless the session's time zone cuts the rollup's buckets).
func (sj *starJoin) bucketFilters(s *selectStmt, r *catalog.Rollup, zone string) {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return // a zone Go does not know: no literal is known to start a bucket
	}
	utc := sameZone(zone, "UTC")
	s.eachExpr(func(e expr) {
		walk(e, func(x expr) bool {
			f, ok := x.(*funcCall)
			if !ok || !isAggregate(f) || f.filter == nil {
				return true
			}
			walk(f.filter, func(y expr) bool {
				o, ok := y.(*opExpr)
				if !ok || o.schema != "" || o.op != ">=" && o.op != "<" {
					return true
				}
				if c, ok := o.l.(*colRef); ok && sj.side(c) == "fact" && c.parts[len(c.parts)-1] == r.TimeColumn && bucketStart(o.r, r.Grain, loc, utc) {
					if sj.timeRefs == nil {
						sj.timeRefs = map[*colRef]bool{}
					}
					sj.timeRefs[c] = true
				}
				return true
			})
			return false
		})
	})
	if len(sj.timeRefs) == 0 {
		return
	}
	key := &funcCall{name: []string{"date_trunc"}, args: []expr{&constExpr{kind: "str", val: string(r.Grain)}, &colRef{parts: []string{r.TimeColumn}}}}
	if sj.exprKey(key) == "" {
		sj.exprKeys = append(sj.exprKeys, sqlOf(key, nil))
		sj.exprs = append(sj.exprs, key)
	}
	sj.timeKey = sj.exprKey(key)
}

// bucketStart reports whether e is a literal time (a string, or one cast
// to date, timestamp or timestamptz) that starts a bucket of grain g: one
// without a zone, or with UTC's when utc (the session's zone, loc, is UTC).
// A time near which loc's offset changes is refused: where midnight
// happens twice, a bucket can start after some of its rows.
func bucketStart(e expr, g catalog.Grain, loc *time.Location, utc bool) bool {
	if c, ok := e.(*castExpr); ok {
		switch c.typ.names[len(c.typ.names)-1] {
		case "date", "timestamp", "timestamptz":
		default:
			return false
		}
		if len(c.typ.mods) > 0 || c.typ.array > 0 {
			return false
		}
		e = c.arg
	}
	c, ok := e.(*constExpr)
	if !ok || c.kind != "str" {
		return false
	}
	v := strings.TrimSpace(c.val)
	if utc {
		for _, z := range []string{"Z", "z", "+00:00", "+0000", "+00"} {
			if cut, ok := strings.CutSuffix(v, z); ok {
				v = strings.TrimSpace(cut)
				break
			}
		}
	}
	var t time.Time
	var err error
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05"} {
		if t, err = time.Parse(layout, v); err == nil {
			break
		}
	}
	if err != nil || t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
		return false
	}
	if at := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc); !steadyOffset(at) {
		return false
	}
	switch g {
	case catalog.Hour:
		return true
	case catalog.Day:
		return t.Hour() == 0
	case catalog.Week:
		return t.Hour() == 0 && t.Weekday() == time.Monday
	case catalog.Month:
		return t.Hour() == 0 && t.Day() == 1
	}
	return false
}

// joinLeaves lists the tables of a FROM clause's join trees, left to
// right, and their ON conditions; ok is false for any FROM item but a
// plain table or an inner or left join with ON.
func joinLeaves(from []fromItem) (leaves []fromItem, ons []expr, ok bool) {
	var visit func(fi fromItem) bool
	visit = func(fi fromItem) bool {
		if len(fi.joined) == 0 {
			leaves = append(leaves, fi)
			return true
		}
		if fi.joinKind == "" || len(fi.joined) != 2 {
			return false
		}
		ons = append(ons, fi.joinOn)
		return visit(fi.joined[0]) && visit(fi.joined[1])
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
func (sj *starJoin) readLeaves(s *selectStmt, items []fromItem, snap *catalog.Snapshot, sess Session) string {
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
		case sj.fact.name != "":
			return "two tables of the join are read by rollups"
		default:
			sj.fact, sj.factCols, sj.rollup = it, r[0].SourceColumns, r[0]
		}
	}
	if sj.fact.name == "" {
		return "no one table of the join is the fact table of a rollup"
	}
	var nullable func(fi fromItem, filled bool) bool
	nullable = func(fi fromItem, filled bool) bool {
		if len(fi.joined) == 0 {
			return filled && refName(fi) == refName(sj.fact)
		}
		return nullable(fi.joined[0], filled) || nullable(fi.joined[1], filled || fi.joinKind == "LEFT JOIN")
	}
	for _, fi := range s.from {
		if nullable(fi, false) {
			return "the fact table is on the side a LEFT JOIN fills with NULLs, in a join of three tables or more"
		}
	}
	return ""
}

// fromTree prints a join tree with the fact table's leaf as arm (its
// text), parenthesizing joins below the top.
func (sj starJoin) fromTree(fi fromItem, arm string, hook func(expr) (string, bool), top bool) string {
	if len(fi.joined) == 0 {
		if refName(fi) == refName(sj.fact) {
			return arm
		}
		return fromSQL(fi)
	}
	t := sj.fromTree(fi.joined[0], arm, hook, false) + " " + fi.joinKind + " " + sj.fromTree(fi.joined[1], arm, hook, false) +
		" ON " + sqlOf(fi.joinOn, hook)
	if !top {
		t = "(" + t + ")"
	}
	return t
}

// steadyOffset reports whether t's zone has one UTC offset from three hours
// before t to three hours after.
func steadyOffset(t time.Time) bool {
	_, before := t.Add(-3 * time.Hour).Zone()
	_, after := t.Add(3 * time.Hour).Zone()
	_, at := t.Zone()
	return before == at && at == after
}
