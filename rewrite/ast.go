package rewrite

import (
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
)

// The AST of this package: the subset of PostgreSQL's raw parse tree that the
// rewriter reasons about. parse.go converts the parser's tree into it; any
// construct it does not model becomes an unsupported node carrying a name for
// passthrough reasons. The printer below turns it back into SQL that
// PostgreSQL parses (the golden and fuzz tests parse every emitted SQL).

type expr interface{ isExpr() }

type (
	// colRef is a column reference, possibly qualified (table, schema.table).
	colRef struct{ parts []string }
	// constExpr is a literal: kind is one of "int", "float", "str", "bool",
	// "bits", "null"; val holds its text.
	constExpr struct{ kind, val string }
	// paramRef is $n.
	paramRef struct{ n int }
	// funcCall is a function or aggregate call.
	funcCall struct {
		name     []string
		args     []expr
		distinct bool
		star     bool
		// sqlSyntax is set for calls the grammar produced from SQL syntax
		// (EXTRACT(f FROM x), x AT TIME ZONE z, ...).
		sqlSyntax bool
		// filter is an aggregate's FILTER (WHERE ...) condition, nil if
		// none. Only the star-join planner answers such aggregates
		// (classifyAgg makes them otherAgg for the rest).
		filter expr
	}
	// opExpr is a binary operator, or a prefix one when l is nil. schema is
	// set for OPERATOR(schema.op).
	opExpr struct {
		schema, op string
		l, r       expr
	}
	// boolExpr is AND, OR (two or more args) or NOT (one).
	boolExpr struct {
		op   string
		args []expr
	}
	castExpr struct {
		arg expr
		typ *typeName
	}
	typeName struct {
		names []string
		mods  []expr
		array int
	}
	nullTest struct {
		arg expr
		not bool
	}
	boolTest struct {
		arg  expr
		test string // "IS TRUE", "IS NOT FALSE", ...
	}
	// inExpr is x [NOT] IN (list).
	inExpr struct {
		arg  expr
		list []expr
		not  bool
	}
	// betweenExpr is x [NOT] BETWEEN [SYMMETRIC] lo AND hi.
	betweenExpr struct {
		arg, lo, hi    expr
		not, symmetric bool
	}
	// likeExpr is x [NOT] LIKE/ILIKE p, and IS [NOT] DISTINCT FROM, NULLIF
	// and op ANY/ALL, all printed with a keyword between two operands.
	kwExpr struct {
		l, r expr
		kw   string // "LIKE", "NOT ILIKE", "IS DISTINCT FROM", ...
		// fn is set for NULLIF(l, r) and for "op ANY(r)" forms
		fn string
	}
	caseExpr struct {
		arg   expr
		whens []caseWhen
		def   expr
	}
	caseWhen struct{ cond, res expr }
	// varFunc is a call that takes no parentheses-and-args in SQL: name is
	// "coalesce", "greatest", "least" (args) or a SQL value function such as
	// "current_date", "current_timestamp" (no args).
	varFunc struct {
		name string
		args []expr
		mod  int // precision of current_timestamp(p) etc., -1 if none
	}
	// arrayExpr is ARRAY[...].
	arrayExpr struct{ elems []expr }
	// groupingSet is GROUPING SETS (...), ROLLUP (...) or CUBE (...) in
	// GROUP BY (kind), or one set inside them: "(...)" for a parenthesized
	// list, "()" for the empty set.
	groupingSet struct {
		kind  string
		items []expr
	}
	// unsupported stands for a construct the rewriter does not handle.
	unsupported struct {
		what string
		// fn names the function call the construct applies to (FILTER,
		// OVER, WITHIN GROUP, ...), if any.
		fn string
		// window is set for a window function call and link for a
		// subquery used as an expression.
		window *window
		link   *subLink
	}
)

// window is a window function call, f OVER (PARTITION BY ... ORDER BY ...
// frame), evaluated over a grouped statement's rows.
type window struct {
	f         *funcCall
	partition []expr
	order     []sortItem
	// frame is PostgreSQL's frame options (FRAMEOPTION_* in parsenodes.h);
	// start and end are the frame's offsets, nil when it has none.
	frame      int32
	start, end expr
}

// The frame option bits of PostgreSQL's WindowDef.frameOptions.
const (
	frameNonDefault        = 0x00001
	frameRange             = 0x00002
	frameRows              = 0x00004
	frameGroups            = 0x00008
	frameBetween           = 0x00010
	frameStartUnboundedPre = 0x00020
	frameEndUnboundedPre   = 0x00040
	frameStartUnboundedFol = 0x00080
	frameEndUnboundedFol   = 0x00100
	frameStartCurrentRow   = 0x00200
	frameEndCurrentRow     = 0x00400
	frameStartOffsetPre    = 0x00800
	frameEndOffsetPre      = 0x01000
	frameStartOffsetFol    = 0x02000
	frameEndOffsetFol      = 0x04000
	frameExcludeCurrentRow = 0x08000
	frameExcludeGroup      = 0x10000
	frameExcludeTies       = 0x20000
)

// subLink is a subquery used as an expression: EXISTS (SELECT ...),
// x op ANY (SELECT ...) (x IN (SELECT ...) is = ANY), x op ALL (...),
// (SELECT ...) or ARRAY(SELECT ...). The subquery is kept as the
// parser's deparse of it, for PostgreSQL to evaluate as written; what it
// reads of the statement around it is listed for the planner to check.
type subLink struct {
	kind string // "EXISTS", "ANY", "ALL", "EXPR", "ARRAY"
	op   string // ANY and ALL's operator
	test expr   // ANY and ALL's left operand
	text string
	// sel is the subquery.
	sel *selectStmt
	// name is the output column name PostgreSQL gives the expression in
	// a select list, "" when the planner cannot tell.
	name string
	// locals are the names the subquery's FROM items (and WITH clauses,
	// at any depth) can be referred to by.
	locals map[string]bool
	// free are the column references, by their parts, that no local
	// name qualifies: unqualified ones may be the outer statement's.
	free [][]string
	// calls are the subquery's function calls: an aggregate's may be the
	// outer statement's aggregate.
	calls []subCall
	// ops are the names of its operators.
	ops [][]string
	// other names what else it does that the planner must refuse
	// (locking rows, GROUPING() of outer columns), "" if nothing.
	other string
}

// subCall is a function call inside a subquery expression.
type subCall struct {
	name []string
	// free are those of the subquery's free references its arguments read.
	free [][]string
	// over: the call is a window function's (OVER).
	over bool
}

func (*colRef) isExpr()      {}
func (*constExpr) isExpr()   {}
func (*paramRef) isExpr()    {}
func (*funcCall) isExpr()    {}
func (*opExpr) isExpr()      {}
func (*boolExpr) isExpr()    {}
func (*castExpr) isExpr()    {}
func (*nullTest) isExpr()    {}
func (*boolTest) isExpr()    {}
func (*inExpr) isExpr()      {}
func (*betweenExpr) isExpr() {}
func (*kwExpr) isExpr()      {}
func (*caseExpr) isExpr()    {}
func (*varFunc) isExpr()     {}
func (*arrayExpr) isExpr()   {}
func (*unsupported) isExpr() {}
func (*groupingSet) isExpr() {}

// selectStmt is one simple SELECT.
type selectStmt struct {
	targets  []target
	from     []fromItem
	where    expr
	groupBy  []expr
	having   expr
	orderBy  []sortItem
	limit    expr
	offset   expr
	distinct bool
	// unsupported names the first construct (WITH, UNION, window, ...)
	// a plain SELECT of one table lacks; empty if none.
	unsupported string
	// A set operation (unsupported is then set too): setOp is INTERSECT,
	// EXCEPT or UNION, setAll its ALL, larg and rarg its arms; setExtra
	// names what the operation adds around its arms (ORDER BY, LIMIT,
	// WITH).
	setOp      string
	setAll     bool
	larg, rarg *selectStmt
	setExtra   string
	// with is the WITH clause, nil if none.
	with *withClause
	// raw is where the statement sits in the parser's tree when it is a
	// subquery (in FROM, a WITH clause, a set operation's arm).
	raw *rawSelect
}

// withClause is a WITH clause: its names and the bodies that are SELECTs.
type withClause struct {
	recursive bool
	// modifying: a body is INSERT, UPDATE, DELETE or MERGE.
	modifying bool
	// plain: every body is a SELECT, and no common table expression has
	// column aliases or a SEARCH or CYCLE clause (names[i]'s body is then
	// bodies[i]).
	plain  bool
	names  []string
	bodies []*selectStmt
}

// eachExpr calls f on each top-level expression of the statement, in
// clause order (nil for an absent clause).
func (s *selectStmt) eachExpr(f func(expr)) {
	for _, t := range s.targets {
		f(t.e)
	}
	f(s.where)
	for _, g := range s.groupBy {
		f(g)
	}
	f(s.having)
	for _, o := range s.orderBy {
		f(o.e)
	}
	f(s.limit)
	f(s.offset)
}

// anyExpr reports whether an expression of s, at any depth, satisfies
// pred.
func (s *selectStmt) anyExpr(pred func(expr) bool) bool {
	found := false
	s.eachExpr(func(e expr) {
		walk(e, func(x expr) bool {
			found = found || pred(x)
			return !found
		})
	})
	return found
}

type target struct {
	name string // alias, "" if none
	e    expr
	star bool
}

// fromItem is an item of FROM: a table (name), a subquery (query) or a
// join (join). unsupported is set for all but a table.
type fromItem struct {
	schema, name, alias string
	only                bool
	unsupported         string // join, subquery, function, ...
	// query is a subquery in FROM (not LATERAL); colAliases: its alias
	// names its columns.
	query      *selectStmt
	colAliases bool
	join       *joinItem
}

// joinItem is l typ r [ON on].
type joinItem struct {
	// typ is "JOIN" (inner, or CROSS JOIN), "LEFT JOIN", "RIGHT JOIN" or
	// "FULL JOIN".
	typ  string
	l, r fromItem
	on   expr // nil if none
	// plain: neither NATURAL nor USING, and no alias.
	plain bool
}

type sortItem struct {
	e     expr
	dir   string // "", "ASC", "DESC", or "USING op" (unsupported)
	nulls string // "", "NULLS FIRST", "NULLS LAST"
}

// suffix prints the item's direction and NULLS order, each after a space.
func (o sortItem) suffix() string {
	s := ""
	if o.dir != "" {
		s += " " + o.dir
	}
	if o.nulls != "" {
		s += " " + o.nulls
	}
	return s
}

// funcName returns the unqualified, lower-case name of a call, and whether it
// was qualified with pg_catalog or not at all (a call in another schema is
// a user function and never treated as a built-in).
func (f *funcCall) builtin() (string, bool) {
	switch len(f.name) {
	case 1:
		return f.name[0], true
	case 2:
		if f.name[0] == "pg_catalog" {
			return f.name[1], true
		}
	}
	return "", false
}

// isGrouping reports whether f is the GROUPING(...) operation of grouped
// queries (not a function named grouping).
func (f *funcCall) isGrouping() bool {
	return f.sqlSyntax && len(f.name) == 1 && f.name[0] == "grouping"
}

// printer renders an expression as SQL. hook, when set, may replace any
// node's rendering (column mapping, substitution of group keys and
// aggregates); it is consulted before the node's own rule.
type printer struct {
	sb   strings.Builder
	hook func(e expr) (string, bool)
}

// expr prints e: as the hook renders it, if it does, else by the rule of
// e's node type (the methods below, one per type).
func (p *printer) expr(e expr) {
	if p.hook != nil {
		if s, ok := p.hook(e); ok {
			p.sb.WriteString(s)
			return
		}
	}
	switch e := e.(type) {
	case *colRef:
		p.colRef(e)
	case *constExpr:
		p.sb.WriteString(constSQL(e))
	case *paramRef:
		p.sb.WriteByte('$')
		p.sb.WriteString(strconv.Itoa(e.n))
	case *funcCall:
		p.funcCall(e)
	case *opExpr:
		p.opExpr(e)
	case *boolExpr:
		p.boolExpr(e)
	case *castExpr:
		p.castExpr(e)
	case *nullTest:
		p.nullTest(e)
	case *boolTest:
		p.boolTest(e)
	case *inExpr:
		p.inExpr(e)
	case *betweenExpr:
		p.betweenExpr(e)
	case *kwExpr:
		p.kwExpr(e)
	case *caseExpr:
		p.caseExpr(e)
	case *varFunc:
		p.varFunc(e)
	case *arrayExpr:
		p.arrayExpr(e)
	case *groupingSet:
		p.groupingSet(e)
	case *unsupported:
		p.unsupported(e)
	}
}

// colRef prints a column reference, each part quoted as needed.
func (p *printer) colRef(e *colRef) {
	for i, part := range e.parts {
		if i > 0 {
			p.sb.WriteByte('.')
		}
		if part == "*" {
			p.sb.WriteByte('*')
		} else {
			p.sb.WriteString(catalog.QuoteIdent(part))
		}
	}
}

// funcCall prints a function or aggregate call with its DISTINCT, star
// and FILTER clause.
func (p *printer) funcCall(e *funcCall) {
	if e.isGrouping() {
		p.sb.WriteString("GROUPING")
	} else {
		p.funcName(e.name)
	}
	p.sb.WriteByte('(')
	if e.star {
		p.sb.WriteByte('*')
	}
	if e.distinct {
		p.sb.WriteString("DISTINCT ")
	}
	p.list(e.args)
	p.sb.WriteByte(')')
	if e.filter != nil {
		p.sb.WriteString(" FILTER (WHERE ")
		p.expr(e.filter)
		p.sb.WriteByte(')')
	}
}

// opExpr prints a binary or prefix operator, parenthesized.
func (p *printer) opExpr(e *opExpr) {
	p.sb.WriteByte('(')
	if e.l != nil {
		p.expr(e.l)
		p.sb.WriteByte(' ')
	}
	if e.schema != "" {
		p.sb.WriteString("OPERATOR(" + catalog.QuoteIdent(e.schema) + "." + e.op + ")")
	} else {
		p.sb.WriteString(e.op)
	}
	p.sb.WriteByte(' ')
	p.expr(e.r)
	p.sb.WriteByte(')')
}

// boolExpr prints NOT x, or the arguments of AND or OR joined by it,
// parenthesized.
func (p *printer) boolExpr(e *boolExpr) {
	p.sb.WriteByte('(')
	if e.op == "NOT" {
		p.sb.WriteString("NOT ")
		p.expr(e.args[0])
	} else {
		for i, a := range e.args {
			if i > 0 {
				p.sb.WriteString(" " + e.op + " ")
			}
			p.expr(a)
		}
	}
	p.sb.WriteByte(')')
}

// castExpr prints CAST(x AS type).
func (p *printer) castExpr(e *castExpr) {
	p.sb.WriteString("CAST(")
	p.expr(e.arg)
	p.sb.WriteString(" AS ")
	p.typeName(e.typ)
	p.sb.WriteByte(')')
}

// nullTest prints x IS [NOT] NULL, parenthesized.
func (p *printer) nullTest(e *nullTest) {
	p.sb.WriteByte('(')
	p.expr(e.arg)
	if e.not {
		p.sb.WriteString(" IS NOT NULL)")
	} else {
		p.sb.WriteString(" IS NULL)")
	}
}

// boolTest prints x IS [NOT] TRUE, FALSE or UNKNOWN, parenthesized.
func (p *printer) boolTest(e *boolTest) {
	p.sb.WriteByte('(')
	p.expr(e.arg)
	p.sb.WriteString(" " + e.test + ")")
}

// testStart prints the start of a parenthesized test on x: "(", x, " NOT"
// when not is set, and " "+kw.
func (p *printer) testStart(x expr, not bool, kw string) {
	p.sb.WriteByte('(')
	p.expr(x)
	if not {
		p.sb.WriteString(" NOT")
	}
	p.sb.WriteString(" " + kw)
}

// inExpr prints x [NOT] IN (list), parenthesized.
func (p *printer) inExpr(e *inExpr) {
	p.testStart(e.arg, e.not, "IN (")
	p.list(e.list)
	p.sb.WriteString("))")
}

// betweenExpr prints x [NOT] BETWEEN [SYMMETRIC] lo AND hi, parenthesized.
func (p *printer) betweenExpr(e *betweenExpr) {
	p.testStart(e.arg, e.not, "BETWEEN ")
	if e.symmetric {
		p.sb.WriteString("SYMMETRIC ")
	}
	// The bounds are b_expr in the grammar: parenthesize them.
	p.infix("(", e.lo, ") AND (", e.hi, "))")
}

// kwExpr prints NULLIF(l, r), l op ANY/ALL (r), or l and r with a keyword
// between them (LIKE, IS DISTINCT FROM, ...).
func (p *printer) kwExpr(e *kwExpr) {
	switch e.fn {
	case "NULLIF":
		p.infix("NULLIF(", e.l, ", ", e.r, ")")
	case "":
		p.infix("(", e.l, " "+e.kw+" ", e.r, ")")
	default: // op ANY/ALL: fn is "ANY" or "ALL", kw the operator
		p.infix("(", e.l, " "+e.kw+" "+e.fn+" (", e.r, "))")
	}
}

// infix prints l and r with pre before, mid between and post after them.
func (p *printer) infix(pre string, l expr, mid string, r expr, post string) {
	p.sb.WriteString(pre)
	p.expr(l)
	p.sb.WriteString(mid)
	p.expr(r)
	p.sb.WriteString(post)
}

// caseExpr prints CASE [arg] WHEN ... THEN ... [ELSE ...] END.
func (p *printer) caseExpr(e *caseExpr) {
	p.sb.WriteString("CASE")
	if e.arg != nil {
		p.sb.WriteByte(' ')
		p.expr(e.arg)
	}
	for _, w := range e.whens {
		p.sb.WriteString(" WHEN ")
		p.expr(w.cond)
		p.sb.WriteString(" THEN ")
		p.expr(w.res)
	}
	if e.def != nil {
		p.sb.WriteString(" ELSE ")
		p.expr(e.def)
	}
	p.sb.WriteString(" END")
}

// varFunc prints COALESCE, GREATEST or LEAST with its arguments, or a SQL
// value function with its precision, if any.
func (p *printer) varFunc(e *varFunc) {
	switch e.name {
	case "coalesce", "greatest", "least":
		p.sb.WriteString(strings.ToUpper(e.name) + "(")
		p.list(e.args)
		p.sb.WriteByte(')')
	default:
		p.sb.WriteString(strings.ToUpper(e.name))
		if e.mod >= 0 {
			p.sb.WriteString("(" + strconv.Itoa(e.mod) + ")")
		}
	}
}

// arrayExpr prints ARRAY[...].
func (p *printer) arrayExpr(e *arrayExpr) {
	p.sb.WriteString("ARRAY[")
	p.list(e.elems)
	p.sb.WriteByte(']')
}

// groupingSet prints GROUPING SETS, ROLLUP or CUBE with its items, or one
// set inside them.
func (p *printer) groupingSet(e *groupingSet) {
	switch e.kind {
	case "()":
		p.sb.WriteString("()")
	case "(...)":
		p.sb.WriteByte('(')
		p.list(e.items)
		p.sb.WriteByte(')')
	default:
		p.sb.WriteString(e.kind + " (")
		p.list(e.items)
		p.sb.WriteByte(')')
	}
}

// unsupported prints the window function call or subquery expression an
// unsupported node carries, or else a NULL commented with its name.
func (p *printer) unsupported(e *unsupported) {
	switch {
	case e.window != nil:
		p.window(e.window)
		return
	case e.link != nil:
		p.subLink(e.link)
		return
	}
	// Never emitted: plans are only built from supported trees. It
	// shows in passthrough reasons; keep it parseable all the same.
	p.sb.WriteString("(NULL /* " + strings.ReplaceAll(e.what, "*/", "") + " */)")
}

// window prints a window function call.
func (p *printer) window(w *window) {
	p.funcName(w.f.name)
	p.sb.WriteByte('(')
	if w.f.star {
		p.sb.WriteByte('*')
	}
	p.list(w.f.args)
	p.sb.WriteByte(')')
	if w.f.filter != nil {
		p.sb.WriteString(" FILTER (WHERE ")
		p.expr(w.f.filter)
		p.sb.WriteByte(')')
	}
	p.sb.WriteString(" OVER (")
	sep := ""
	if len(w.partition) > 0 {
		p.sb.WriteString("PARTITION BY ")
		p.list(w.partition)
		sep = " "
	}
	if len(w.order) > 0 {
		p.sb.WriteString(sep + "ORDER BY ")
		for i, o := range w.order {
			if i > 0 {
				p.sb.WriteString(", ")
			}
			p.expr(o.e)
			p.sb.WriteString(o.suffix())
		}
		sep = " "
	}
	if w.frame&frameNonDefault != 0 {
		p.sb.WriteString(sep)
		p.frame(w)
	}
	p.sb.WriteByte(')')
}

// frame prints a window's frame clause from its options.
func (p *printer) frame(w *window) {
	switch {
	case w.frame&frameRows != 0:
		p.sb.WriteString("ROWS ")
	case w.frame&frameGroups != 0:
		p.sb.WriteString("GROUPS ")
	default:
		p.sb.WriteString("RANGE ")
	}
	bound := func(unboundedPre, unboundedFol, current, offsetPre, offsetFol int32, offset expr) {
		switch o := w.frame; {
		case o&unboundedPre != 0:
			p.sb.WriteString("UNBOUNDED PRECEDING")
		case o&unboundedFol != 0:
			p.sb.WriteString("UNBOUNDED FOLLOWING")
		case o&current != 0:
			p.sb.WriteString("CURRENT ROW")
		case o&offsetPre != 0:
			p.expr(offset)
			p.sb.WriteString(" PRECEDING")
		case o&offsetFol != 0:
			p.expr(offset)
			p.sb.WriteString(" FOLLOWING")
		}
	}
	if w.frame&frameBetween != 0 {
		p.sb.WriteString("BETWEEN ")
	}
	bound(frameStartUnboundedPre, frameStartUnboundedFol, frameStartCurrentRow, frameStartOffsetPre, frameStartOffsetFol, w.start)
	if w.frame&frameBetween != 0 {
		p.sb.WriteString(" AND ")
		bound(frameEndUnboundedPre, frameEndUnboundedFol, frameEndCurrentRow, frameEndOffsetPre, frameEndOffsetFol, w.end)
	}
	switch {
	case w.frame&frameExcludeCurrentRow != 0:
		p.sb.WriteString(" EXCLUDE CURRENT ROW")
	case w.frame&frameExcludeGroup != 0:
		p.sb.WriteString(" EXCLUDE GROUP")
	case w.frame&frameExcludeTies != 0:
		p.sb.WriteString(" EXCLUDE TIES")
	}
}

// subLink prints a subquery expression, the subquery as the client wrote
// it (deparsed).
func (p *printer) subLink(l *subLink) {
	switch l.kind {
	case "EXISTS":
		p.sb.WriteString("EXISTS (" + l.text + ")")
	case "ANY", "ALL":
		p.sb.WriteByte('(')
		p.expr(l.test)
		p.sb.WriteString(" " + l.op + " " + l.kind + " (" + l.text + "))")
	case "ARRAY":
		p.sb.WriteString("ARRAY(" + l.text + ")")
	default:
		p.sb.WriteString("(" + l.text + ")")
	}
}

func (p *printer) list(es []expr) {
	for i, a := range es {
		if i > 0 {
			p.sb.WriteString(", ")
		}
		p.expr(a)
	}
}

func (p *printer) funcName(names []string) {
	for i, n := range names {
		if i > 0 {
			p.sb.WriteByte('.')
		}
		if len(names) == 1 || i == 0 {
			p.sb.WriteString(quoteName(n))
		} else {
			// After a dot any keyword is a valid label.
			p.sb.WriteString(quoteLabel(n))
		}
	}
}

// sqlOfName prints a function or type name, quoting its parts as needed.
func sqlOfName(names []string) string {
	p := printer{}
	p.funcName(names)
	return p.sb.String()
}

func (p *printer) typeName(t *typeName) {
	p.funcName(t.names)
	if len(t.mods) > 0 {
		p.sb.WriteByte('(')
		p.list(t.mods)
		p.sb.WriteByte(')')
	}
	for i := 0; i < t.array; i++ {
		p.sb.WriteString("[]")
	}
}

// sqlOf prints e with an optional hook.
func sqlOf(e expr, hook func(expr) (string, bool)) string {
	p := printer{hook: hook}
	p.expr(e)
	return p.sb.String()
}

func constSQL(c *constExpr) string {
	switch c.kind {
	case "str":
		if strings.ContainsRune(c.val, '\\') {
			return "E'" + strings.ReplaceAll(strings.ReplaceAll(c.val, `\`, `\\`), "'", "''") + "'"
		}
		return "'" + strings.ReplaceAll(c.val, "'", "''") + "'"
	case "bits":
		// The parser keeps the b or x prefix.
		if c.val != "" {
			return strings.ToUpper(c.val[:1]) + "'" + c.val[1:] + "'"
		}
		return "B''"
	case "null":
		return "NULL"
	case "int", "float":
		if strings.HasPrefix(c.val, "-") {
			return "(" + c.val + ")"
		}
		return c.val
	}
	return c.val
}

// quoteName quotes a function or type name only when it must be: when it is
// not a plain lower-case identifier or is a keyword that cannot name a
// function or type.
func quoteName(s string) string {
	if plainIdent(s) && !keywords[s] {
		return s
	}
	return catalog.QuoteIdent(s)
}

func quoteLabel(s string) string {
	if plainIdent(s) {
		return s
	}
	return catalog.QuoteIdent(s)
}

func plainIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case (c >= '0' && c <= '9') || c == '$':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// keywords are PostgreSQL's reserved, type/function-name and column-name
// keywords: an unqualified function or type name spelled like one of them
// is printed quoted.
var keywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`all analyse analyze and any array as asc asymmetric both case cast check
	collate column constraint create current_catalog current_date current_role current_time current_timestamp
	current_user default deferrable desc distinct do else end except false fetch for foreign from grant group
	having in initially intersect into lateral leading limit localtime localtimestamp not null offset on only
	or order placing primary references returning select session_user some symmetric system_user table then
	to trailing true union unique user using variadic when where window with
	authorization binary collation concurrently cross current_schema freeze full ilike inner is isnull join
	left like natural notnull outer overlaps right similar tablesample verbose
	between bigint bit boolean char character coalesce dec decimal exists extract float greatest grouping
	inout int integer interval json json_array json_arrayagg json_exists json_object json_objectagg
	json_query json_scalar json_serialize json_table json_value least merge_action national nchar none
	normalize nullif numeric out overlay position precision real row setof smallint substring time
	timestamp treat trim values varchar xmlattributes xmlconcat xmlelement xmlexists xmlforest
	xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable`) {
		m[k] = true
	}
	return m
}()

// walk calls f for e and every expression below it, depth first; f returns
// false to skip a node's children.
func walk(e expr, f func(expr) bool) {
	if e == nil || !f(e) {
		return
	}
	switch e := e.(type) {
	case *funcCall:
		walkAll(f, e.args...)
		walk(e.filter, f)
	case *opExpr:
		walkAll(f, e.l, e.r)
	case *boolExpr:
		walkAll(f, e.args...)
	case *castExpr:
		walk(e.arg, f)
	case *nullTest:
		walk(e.arg, f)
	case *boolTest:
		walk(e.arg, f)
	case *inExpr:
		walk(e.arg, f)
		walkAll(f, e.list...)
	case *betweenExpr:
		walkAll(f, e.arg, e.lo, e.hi)
	case *kwExpr:
		walkAll(f, e.l, e.r)
	case *varFunc:
		walkAll(f, e.args...)
	case *arrayExpr:
		walkAll(f, e.elems...)
	case *groupingSet:
		walkAll(f, e.items...)
	case *caseExpr:
		walk(e.arg, f)
		for _, w := range e.whens {
			walkAll(f, w.cond, w.res)
		}
		walk(e.def, f)
	case *unsupported:
		if w := e.window; w != nil {
			// The call's arguments, not the call: it is no aggregate of
			// the statement's groups.
			for _, a := range w.f.args {
				walk(a, f)
			}
			walk(w.f.filter, f)
			for _, a := range w.partition {
				walk(a, f)
			}
			for _, o := range w.order {
				walk(o.e, f)
			}
			walk(w.start, f)
			walk(w.end, f)
		}
		if e.link != nil {
			walk(e.link.test, f)
		}
	}
}

// walkAll walks each of es in turn.
func walkAll(f func(expr) bool, es ...expr) {
	for _, e := range es {
		walk(e, f)
	}
}

// figureColname is the output column name PostgreSQL gives a select-list
// item without an alias (FigureColname in parse_target.c), so that the
// shaping SQL can restore it with an explicit alias.
func figureColname(e expr) string {
	if n, _ := colnameOf(e); n != "" {
		return n
	}
	return "?column?"
}

// colnameOf returns a name and its strength: 2 for a sure name (column,
// function), 1 for a fallback (a cast's type, "case"), 0 for none.
func colnameOf(e expr) (string, int) {
	switch e := e.(type) {
	case *colRef:
		last := e.parts[len(e.parts)-1]
		if last == "*" {
			return "", 0
		}
		return last, 2
	case *funcCall:
		return e.name[len(e.name)-1], 2
	case *castExpr:
		if n, s := colnameOf(e.arg); s > 1 {
			return n, s
		}
		return e.typ.names[len(e.typ.names)-1], 1
	case *caseExpr:
		if e.def != nil {
			if n, s := colnameOf(e.def); s > 1 {
				return n, s
			}
		}
		return "case", 1
	case *varFunc:
		return e.name, 2
	case *arrayExpr:
		return "array", 2
	case *kwExpr:
		if e.fn == "NULLIF" {
			return "nullif", 2
		}
	case *unsupported:
		switch {
		case e.window != nil:
			return e.window.f.name[len(e.window.f.name)-1], 2
		case e.link != nil && e.link.name != "":
			return e.link.name, 2
		}
	}
	return "", 0
}
