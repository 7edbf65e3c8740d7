package syntax

import (
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
)

// The syntax tree: the subset of PostgreSQL's raw parse tree that the
// rewriter reasons about. parse.go converts the parser's tree into it; any
// construct it does not model becomes an Unsupported node carrying a name for
// passthrough reasons. The printer below turns it back into SQL that
// PostgreSQL parses (the golden and fuzz tests parse every emitted SQL).

type Expr interface{ isExpr() }

type (
	// ColRef is a column reference, possibly qualified (table, schema.table).
	ColRef struct{ Parts []string }
	// Const is a literal: kind is one of "int", "float", "str", "bool",
	// "bits", "null"; val holds its text.
	Const struct{ Type, Val string }
	// Param is $n.
	Param struct{ N int }
	// FuncCall is a function or aggregate call.
	FuncCall struct {
		Name     []string
		Args     []Expr
		Distinct bool
		Star     bool
		// sqlSyntax is set for calls the grammar produced from SQL syntax
		// (EXTRACT(f FROM x), x AT TIME ZONE z, ...).
		sqlSyntax bool
		// Filter is an aggregate's FILTER (WHERE ...) condition, nil if
		// none. Only the star-join planner answers such aggregates
		// (classifyAgg makes them otherAgg for the rest).
		Filter Expr
	}
	// OpExpr is a binary operator, or a prefix one when l is nil. schema is
	// set for OPERATOR(schema.op).
	OpExpr struct {
		Schema, Op  string
		Left, Right Expr
	}
	// BoolExpr is AND, OR (two or more args) or NOT (one).
	BoolExpr struct {
		Op   string
		Args []Expr
	}
	Cast struct {
		Arg  Expr
		Type *TypeName
	}
	TypeName struct {
		Names []string
		Mods  []Expr
		Array int
	}
	NullTest struct {
		Arg Expr
		Not bool
	}
	BoolTest struct {
		Arg  Expr
		test string // "IS TRUE", "IS NOT FALSE", ...
	}
	// In is x [NOT] IN (list).
	In struct {
		Arg  Expr
		List []Expr
		Not  bool
	}
	// Between is x [NOT] BETWEEN [SYMMETRIC] lo AND hi.
	Between struct {
		Arg, Lo, Hi    Expr
		Not, Symmetric bool
	}
	// KeywordExpr is x [NOT] LIKE/ILIKE p, and IS [NOT] DISTINCT FROM, NULLIF
	// and op ANY/ALL, all printed with a keyword between two operands.
	KeywordExpr struct {
		Left, Right Expr
		Kw          string // "LIKE", "NOT ILIKE", "IS DISTINCT FROM", ...
		// Fn is set for NULLIF(l, r) and for "op ANY(r)" forms
		Fn string
	}
	Case struct {
		Arg   Expr
		Whens []When
		Else  Expr
	}
	When struct{ Cond, Result Expr }
	// VarFunc is a call that takes no parentheses-and-args in SQL: name is
	// "coalesce", "greatest", "least" (args) or a SQL value function such as
	// "current_date", "current_timestamp" (no args).
	VarFunc struct {
		Name string
		Args []Expr
		mod  int // precision of current_timestamp(p) etc., -1 if none
	}
	// Array is ARRAY[...].
	Array struct{ Elems []Expr }
	// GroupingSet is GROUPING SETS (...), ROLLUP (...) or CUBE (...) in
	// GROUP BY (kind), or one set inside them: "(...)" for a parenthesized
	// list, "()" for the empty set.
	GroupingSet struct {
		kind  string
		items []Expr
	}
	// Unsupported stands for a construct the rewriter does not handle.
	Unsupported struct {
		What string
		// Fn names the function call the construct applies to (FILTER,
		// OVER, WITHIN GROUP, ...), if any.
		Fn string
		// Window is set for a window function call and link for a
		// subquery used as an expression.
		Window *Window
		Link   *SubLink
	}
)

// Window is a window function call, f OVER (PARTITION BY ... ORDER BY ...
// frame), evaluated over a grouped statement's rows.
type Window struct {
	Func      *FuncCall
	partition []Expr
	order     []SortItem
	// frame is PostgreSQL's frame options (FRAMEOPTION_* in parsenodes.h);
	// start and end are the frame's offsets, nil when it has none.
	frame      int32
	start, end Expr
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

// SubLink is a subquery used as an expression: EXISTS (SELECT ...),
// x op ANY (SELECT ...) (x IN (SELECT ...) is = ANY), x op ALL (...),
// (SELECT ...) or ARRAY(SELECT ...). The subquery is kept as the
// parser's deparse of it, for PostgreSQL to evaluate as written; what it
// reads of the statement around it is listed for the planner to check.
type SubLink struct {
	Form string // "EXISTS", "ANY", "ALL", "EXPR", "ARRAY"
	Op   string // ANY and ALL's operator
	Test Expr   // ANY and ALL's left operand
	text string
	// Select is the subquery.
	Select *Select
	// name is the output column name PostgreSQL gives the expression in
	// a select list, "" when the planner cannot tell.
	name string
	// Locals are the names the subquery's FROM items (and WITH clauses,
	// at any depth) can be referred to by.
	Locals map[string]bool
	// Free are the column references, by their parts, that no local
	// name qualifies: unqualified ones may be the outer statement's.
	Free [][]string
	// Calls are the subquery's function calls: an aggregate's may be the
	// outer statement's aggregate.
	Calls []SubCall
	// Ops are the names of its operators.
	Ops [][]string
	// Other names what else it does that the planner must refuse
	// (locking rows, GROUPING() of outer columns), "" if nothing.
	Other string
}

// SubCall is a function call inside a subquery expression.
type SubCall struct {
	Name []string
	// Free are those of the subquery's free references its arguments read.
	Free [][]string
	// over: the call is a window function's (OVER).
	Over bool
}

// IsNotTrue is the test e IS NOT TRUE.
func IsNotTrue(e Expr) *BoolTest { return &BoolTest{Arg: e, test: "IS NOT TRUE"} }

func (*ColRef) isExpr()      {}
func (*Const) isExpr()       {}
func (*Param) isExpr()       {}
func (*FuncCall) isExpr()    {}
func (*OpExpr) isExpr()      {}
func (*BoolExpr) isExpr()    {}
func (*Cast) isExpr()        {}
func (*NullTest) isExpr()    {}
func (*BoolTest) isExpr()    {}
func (*In) isExpr()          {}
func (*Between) isExpr()     {}
func (*KeywordExpr) isExpr() {}
func (*Case) isExpr()        {}
func (*VarFunc) isExpr()     {}
func (*Array) isExpr()       {}
func (*Unsupported) isExpr() {}
func (*GroupingSet) isExpr() {}

// Select is one simple SELECT.
type Select struct {
	Targets  []Target
	From     []FromItem
	Where    Expr
	GroupBy  []Expr
	Having   Expr
	OrderBy  []SortItem
	Limit    Expr
	Offset   Expr
	Distinct bool
	// Unsupported names the first construct (WITH, UNION, window, ...)
	// a plain SELECT of one table lacks; empty if none.
	Unsupported string
	// A set operation (unsupported is then set too): setOp is INTERSECT,
	// EXCEPT or UNION, setAll its ALL, larg and rarg its arms; setExtra
	// names what the operation adds around its arms (ORDER BY, LIMIT,
	// WITH).
	SetOp       string
	SetAll      bool
	Left, Right *Select
	SetExtra    string
	// With is the WITH clause, nil if none.
	With *With
	// Values are the rows of a VALUES list (Unsupported is then
	// "VALUES"), each its expressions; none when the list is sorted or
	// limited.
	Values [][]Expr
	// raw is where the statement sits in the parser's tree when it is a
	// subquery (in FROM, a WITH clause, a set operation's arm).
	raw *rawSelect
}

// Placed reports whether s is a subquery whose place in the parser's tree
// is known (in FROM, a WITH clause, a set operation's arm), so that
// Parsed.OuterText can print the statement around it.
func (s *Select) Placed() bool { return s.raw != nil }

// With is a WITH clause: its names and the bodies that are SELECTs.
type With struct {
	Recursive bool
	// modifying: a body is INSERT, UPDATE, DELETE or MERGE.
	Modifying bool
	// plain: every body is a SELECT, and no common table expression has
	// column aliases or a SEARCH or CYCLE clause (names[i]'s body is then
	// bodies[i]).
	Plain  bool
	Names  []string
	Bodies []*Select
}

// EachExpr calls f on each top-level expression of the statement, in
// clause order (nil for an absent clause).
func (s *Select) EachExpr(f func(Expr)) {
	for _, t := range s.Targets {
		f(t.Expr)
	}
	f(s.Where)
	for _, g := range s.GroupBy {
		f(g)
	}
	f(s.Having)
	for _, o := range s.OrderBy {
		f(o.Expr)
	}
	f(s.Limit)
	f(s.Offset)
}

// EachFrom calls f for each item of s's FROM clause and, inside joins,
// for each joined item, the join first.
func (s *Select) EachFrom(f func(FromItem)) {
	var each func(fi FromItem)
	each = func(fi FromItem) {
		f(fi)
		if fi.Join != nil {
			each(fi.Join.Left)
			each(fi.Join.Right)
		}
	}
	for _, fi := range s.From {
		each(fi)
	}
}

// AnyExpr reports whether an expression of s, at any depth, satisfies
// pred.
func (s *Select) AnyExpr(pred func(Expr) bool) bool {
	found := false
	s.EachExpr(func(e Expr) {
		Walk(e, func(x Expr) bool {
			found = found || pred(x)
			return !found
		})
	})
	return found
}

type Target struct {
	Name string // alias, "" if none
	Expr Expr
	Star bool
}

// FromItem is an item of FROM: a table (name), a subquery (query) or a
// join (join). unsupported is set for all but a table.
type FromItem struct {
	Schema, Name, Alias string
	Only                bool
	Unsupported         string // join, subquery, function, ...
	// Query is a subquery in FROM (not LATERAL); colAliases: its alias
	// names its columns.
	Query      *Select
	ColAliases bool
	// AliasCols are the column names the alias of a subquery gives.
	AliasCols []string
	Join      *Join
	// Func is a function in FROM called plainly (Unsupported is still
	// set), FuncCols the column names its alias gives, if any.
	Func     *FuncCall
	FuncCols []string
}

// Join is l typ r [ON on].
type Join struct {
	// Type is "JOIN" (inner, or CROSS JOIN), "LEFT JOIN", "RIGHT JOIN" or
	// "FULL JOIN".
	Type        string
	Left, Right FromItem
	On          Expr // nil if none
	// plain: neither NATURAL nor USING, and no alias.
	Plain bool
}

type SortItem struct {
	Expr  Expr
	Dir   string // "", "ASC", "DESC", or "USING op" (unsupported)
	Nulls string // "", "NULLS FIRST", "NULLS LAST"
}

// Suffix prints the item's direction and NULLS order, each after a space.
func (o SortItem) Suffix() string {
	s := ""
	if o.Dir != "" {
		s += " " + o.Dir
	}
	if o.Nulls != "" {
		s += " " + o.Nulls
	}
	return s
}

// funcName returns the unqualified, lower-case name of a call, and whether it
// was qualified with pg_catalog or not at all (a call in another schema is
// a user function and never treated as a built-in).
func (f *FuncCall) Builtin() (string, bool) {
	switch len(f.Name) {
	case 1:
		return f.Name[0], true
	case 2:
		if f.Name[0] == "pg_catalog" {
			return f.Name[1], true
		}
	}
	return "", false
}

// Builtin returns the name of a type PostgreSQL defines, unqualified or
// in pg_catalog and not an array (timestamp for pg_catalog.timestamp), or
// ok false for any other.
func (t *TypeName) Builtin() (string, bool) {
	if t == nil || t.Array > 0 {
		return "", false
	}
	switch {
	case len(t.Names) == 1:
		return t.Names[0], true
	case len(t.Names) == 2 && t.Names[0] == "pg_catalog":
		return t.Names[1], true
	}
	return "", false
}

// IsGrouping reports whether f is the GROUPING(...) operation of grouped
// queries (not a function named grouping).
func (f *FuncCall) IsGrouping() bool {
	return f.sqlSyntax && len(f.Name) == 1 && f.Name[0] == "grouping"
}

// printer renders an expression as SQL. hook, when set, may replace any
// node's rendering (column mapping, substitution of group keys and
// aggregates); it is consulted before the node's own rule.
type printer struct {
	sb   strings.Builder
	hook func(e Expr) (string, bool)
}

// expr prints e: as the hook renders it, if it does, else by the rule of
// e's node type (the methods below, one per type).
func (p *printer) expr(e Expr) {
	if p.hook != nil {
		if s, ok := p.hook(e); ok {
			p.sb.WriteString(s)
			return
		}
	}
	switch e := e.(type) {
	case *ColRef:
		p.colRef(e)
	case *Const:
		p.sb.WriteString(ConstSQL(e))
	case *Param:
		p.sb.WriteByte('$')
		p.sb.WriteString(strconv.Itoa(e.N))
	case *FuncCall:
		p.funcCall(e)
	case *OpExpr:
		p.opExpr(e)
	case *BoolExpr:
		p.boolExpr(e)
	case *Cast:
		p.castExpr(e)
	case *NullTest:
		p.nullTest(e)
	case *BoolTest:
		p.boolTest(e)
	case *In:
		p.inExpr(e)
	case *Between:
		p.betweenExpr(e)
	case *KeywordExpr:
		p.kwExpr(e)
	case *Case:
		p.caseExpr(e)
	case *VarFunc:
		p.varFunc(e)
	case *Array:
		p.arrayExpr(e)
	case *GroupingSet:
		p.groupingSet(e)
	case *Unsupported:
		p.unsupported(e)
	}
}

// colRef prints a column reference, each part quoted as needed.
func (p *printer) colRef(e *ColRef) {
	for i, part := range e.Parts {
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
func (p *printer) funcCall(e *FuncCall) {
	if e.IsGrouping() {
		p.sb.WriteString("GROUPING")
	} else {
		p.funcName(e.Name)
	}
	p.sb.WriteByte('(')
	if e.Star {
		p.sb.WriteByte('*')
	}
	if e.Distinct {
		p.sb.WriteString("DISTINCT ")
	}
	p.list(e.Args)
	p.sb.WriteByte(')')
	if e.Filter != nil {
		p.sb.WriteString(" FILTER (WHERE ")
		p.expr(e.Filter)
		p.sb.WriteByte(')')
	}
}

// opExpr prints a binary or prefix operator, parenthesized.
func (p *printer) opExpr(e *OpExpr) {
	p.sb.WriteByte('(')
	if e.Left != nil {
		p.expr(e.Left)
		p.sb.WriteByte(' ')
	}
	if e.Schema != "" {
		p.sb.WriteString("OPERATOR(" + catalog.QuoteIdent(e.Schema) + "." + e.Op + ")")
	} else {
		p.sb.WriteString(e.Op)
	}
	p.sb.WriteByte(' ')
	p.expr(e.Right)
	p.sb.WriteByte(')')
}

// boolExpr prints NOT x, or the arguments of AND or OR joined by it,
// parenthesized.
func (p *printer) boolExpr(e *BoolExpr) {
	p.sb.WriteByte('(')
	if e.Op == "NOT" {
		p.sb.WriteString("NOT ")
		p.expr(e.Args[0])
	} else {
		for i, a := range e.Args {
			if i > 0 {
				p.sb.WriteString(" " + e.Op + " ")
			}
			p.expr(a)
		}
	}
	p.sb.WriteByte(')')
}

// castExpr prints CAST(x AS type).
func (p *printer) castExpr(e *Cast) {
	p.sb.WriteString("CAST(")
	p.expr(e.Arg)
	p.sb.WriteString(" AS ")
	p.typeName(e.Type)
	p.sb.WriteByte(')')
}

// nullTest prints x IS [NOT] NULL, parenthesized.
func (p *printer) nullTest(e *NullTest) {
	p.sb.WriteByte('(')
	p.expr(e.Arg)
	if e.Not {
		p.sb.WriteString(" IS NOT NULL)")
	} else {
		p.sb.WriteString(" IS NULL)")
	}
}

// boolTest prints x IS [NOT] TRUE, FALSE or UNKNOWN, parenthesized.
func (p *printer) boolTest(e *BoolTest) {
	p.sb.WriteByte('(')
	p.expr(e.Arg)
	p.sb.WriteString(" " + e.test + ")")
}

// testStart prints the start of a parenthesized test on x: "(", x, " NOT"
// when not is set, and " "+kw.
func (p *printer) testStart(x Expr, not bool, kw string) {
	p.sb.WriteByte('(')
	p.expr(x)
	if not {
		p.sb.WriteString(" NOT")
	}
	p.sb.WriteString(" " + kw)
}

// inExpr prints x [NOT] IN (list), parenthesized.
func (p *printer) inExpr(e *In) {
	p.testStart(e.Arg, e.Not, "IN (")
	p.list(e.List)
	p.sb.WriteString("))")
}

// betweenExpr prints x [NOT] BETWEEN [SYMMETRIC] lo AND hi, parenthesized.
func (p *printer) betweenExpr(e *Between) {
	p.testStart(e.Arg, e.Not, "BETWEEN ")
	if e.Symmetric {
		p.sb.WriteString("SYMMETRIC ")
	}
	// The bounds are b_expr in the grammar: parenthesize them.
	p.infix("(", e.Lo, ") AND (", e.Hi, "))")
}

// kwExpr prints NULLIF(l, r), l op ANY/ALL (r), or l and r with a keyword
// between them (LIKE, IS DISTINCT FROM, ...).
func (p *printer) kwExpr(e *KeywordExpr) {
	switch e.Fn {
	case "NULLIF":
		p.infix("NULLIF(", e.Left, ", ", e.Right, ")")
	case "":
		p.infix("(", e.Left, " "+e.Kw+" ", e.Right, ")")
	default: // op ANY/ALL: fn is "ANY" or "ALL", kw the operator
		p.infix("(", e.Left, " "+e.Kw+" "+e.Fn+" (", e.Right, "))")
	}
}

// infix prints l and r with pre before, mid between and post after them.
func (p *printer) infix(pre string, l Expr, mid string, r Expr, post string) {
	p.sb.WriteString(pre)
	p.expr(l)
	p.sb.WriteString(mid)
	p.expr(r)
	p.sb.WriteString(post)
}

// caseExpr prints CASE [arg] WHEN ... THEN ... [ELSE ...] END.
func (p *printer) caseExpr(e *Case) {
	p.sb.WriteString("CASE")
	if e.Arg != nil {
		p.sb.WriteByte(' ')
		p.expr(e.Arg)
	}
	for _, w := range e.Whens {
		p.sb.WriteString(" WHEN ")
		p.expr(w.Cond)
		p.sb.WriteString(" THEN ")
		p.expr(w.Result)
	}
	if e.Else != nil {
		p.sb.WriteString(" ELSE ")
		p.expr(e.Else)
	}
	p.sb.WriteString(" END")
}

// varFunc prints COALESCE, GREATEST or LEAST with its arguments, or a SQL
// value function with its precision, if any.
func (p *printer) varFunc(e *VarFunc) {
	switch e.Name {
	case "coalesce", "greatest", "least":
		p.sb.WriteString(strings.ToUpper(e.Name) + "(")
		p.list(e.Args)
		p.sb.WriteByte(')')
	default:
		p.sb.WriteString(strings.ToUpper(e.Name))
		if e.mod >= 0 {
			p.sb.WriteString("(" + strconv.Itoa(e.mod) + ")")
		}
	}
}

// arrayExpr prints ARRAY[...].
func (p *printer) arrayExpr(e *Array) {
	p.sb.WriteString("ARRAY[")
	p.list(e.Elems)
	p.sb.WriteByte(']')
}

// groupingSet prints GROUPING SETS, ROLLUP or CUBE with its items, or one
// set inside them.
func (p *printer) groupingSet(e *GroupingSet) {
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
func (p *printer) unsupported(e *Unsupported) {
	switch {
	case e.Window != nil:
		p.window(e.Window)
		return
	case e.Link != nil:
		p.subLink(e.Link)
		return
	}
	// Never emitted: plans are only built from supported trees. It
	// shows in passthrough reasons; keep it parseable all the same.
	p.sb.WriteString("(NULL /* " + strings.ReplaceAll(e.What, "*/", "") + " */)")
}

// window prints a window function call.
func (p *printer) window(w *Window) {
	p.funcName(w.Func.Name)
	p.sb.WriteByte('(')
	if w.Func.Star {
		p.sb.WriteByte('*')
	}
	p.list(w.Func.Args)
	p.sb.WriteByte(')')
	if w.Func.Filter != nil {
		p.sb.WriteString(" FILTER (WHERE ")
		p.expr(w.Func.Filter)
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
			p.expr(o.Expr)
			p.sb.WriteString(o.Suffix())
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
func (p *printer) frame(w *Window) {
	switch {
	case w.frame&frameRows != 0:
		p.sb.WriteString("ROWS ")
	case w.frame&frameGroups != 0:
		p.sb.WriteString("GROUPS ")
	default:
		p.sb.WriteString("RANGE ")
	}
	bound := func(unboundedPre, unboundedFol, current, offsetPre, offsetFol int32, offset Expr) {
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
func (p *printer) subLink(l *SubLink) {
	switch l.Form {
	case "EXISTS":
		p.sb.WriteString("EXISTS (" + l.text + ")")
	case "ANY", "ALL":
		p.sb.WriteByte('(')
		p.expr(l.Test)
		p.sb.WriteString(" " + l.Op + " " + l.Form + " (" + l.text + "))")
	case "ARRAY":
		p.sb.WriteString("ARRAY(" + l.text + ")")
	default:
		p.sb.WriteString("(" + l.text + ")")
	}
}

func (p *printer) list(es []Expr) {
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
			p.sb.WriteString(QuoteIdent(n))
		} else {
			// After a dot any keyword is a valid label.
			p.sb.WriteString(quoteLabel(n))
		}
	}
}

// NameSQL prints a function or type name, quoting its parts as needed.
func NameSQL(names []string) string {
	p := printer{}
	p.funcName(names)
	return p.sb.String()
}

func (p *printer) typeName(t *TypeName) {
	p.funcName(t.Names)
	if len(t.Mods) > 0 {
		p.sb.WriteByte('(')
		p.list(t.Mods)
		p.sb.WriteByte(')')
	}
	for i := 0; i < t.Array; i++ {
		p.sb.WriteString("[]")
	}
}

// SQL prints e with an optional hook.
func SQL(e Expr, hook func(Expr) (string, bool)) string {
	p := printer{hook: hook}
	p.expr(e)
	return p.sb.String()
}

func ConstSQL(c *Const) string {
	switch c.Type {
	case "str":
		if strings.ContainsRune(c.Val, '\\') {
			return "E'" + strings.ReplaceAll(strings.ReplaceAll(c.Val, `\`, `\\`), "'", "''") + "'"
		}
		return "'" + strings.ReplaceAll(c.Val, "'", "''") + "'"
	case "bits":
		// The parser keeps the b or x prefix.
		if c.Val != "" {
			return strings.ToUpper(c.Val[:1]) + "'" + c.Val[1:] + "'"
		}
		return "B''"
	case "null":
		return "NULL"
	case "int", "float":
		if strings.HasPrefix(c.Val, "-") {
			return "(" + c.Val + ")"
		}
		return c.Val
	}
	return c.Val
}

// QuoteIdent quotes a function or type name only when it must be: when it is
// not a plain lower-case identifier or is a keyword that cannot name a
// function or type.
func QuoteIdent(s string) string {
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

// Walk calls f for e and every expression below it, depth first; f returns
// false to skip a node's children.
func Walk(e Expr, f func(Expr) bool) {
	if e == nil || !f(e) {
		return
	}
	switch e := e.(type) {
	case *FuncCall:
		walkAll(f, e.Args...)
		Walk(e.Filter, f)
	case *OpExpr:
		walkAll(f, e.Left, e.Right)
	case *BoolExpr:
		walkAll(f, e.Args...)
	case *Cast:
		Walk(e.Arg, f)
	case *NullTest:
		Walk(e.Arg, f)
	case *BoolTest:
		Walk(e.Arg, f)
	case *In:
		Walk(e.Arg, f)
		walkAll(f, e.List...)
	case *Between:
		walkAll(f, e.Arg, e.Lo, e.Hi)
	case *KeywordExpr:
		walkAll(f, e.Left, e.Right)
	case *VarFunc:
		walkAll(f, e.Args...)
	case *Array:
		walkAll(f, e.Elems...)
	case *GroupingSet:
		walkAll(f, e.items...)
	case *Case:
		Walk(e.Arg, f)
		for _, w := range e.Whens {
			walkAll(f, w.Cond, w.Result)
		}
		Walk(e.Else, f)
	case *Unsupported:
		if w := e.Window; w != nil {
			// The call's arguments, not the call: it is no aggregate of
			// the statement's groups.
			for _, a := range w.Func.Args {
				Walk(a, f)
			}
			Walk(w.Func.Filter, f)
			for _, a := range w.partition {
				Walk(a, f)
			}
			for _, o := range w.order {
				Walk(o.Expr, f)
			}
			Walk(w.start, f)
			Walk(w.end, f)
		}
		if e.Link != nil {
			Walk(e.Link.Test, f)
		}
	}
}

// walkAll walks each of es in turn.
func walkAll(f func(Expr) bool, es ...Expr) {
	for _, e := range es {
		Walk(e, f)
	}
}

// ColumnName is the output column name PostgreSQL gives a select-list
// item without an alias (FigureColname in parse_target.c), so that the
// shaping SQL can restore it with an explicit alias.
func ColumnName(e Expr) string {
	if n, _ := colnameOf(e); n != "" {
		return n
	}
	return "?column?"
}

// colnameOf returns a name and its strength: 2 for a sure name (column,
// function), 1 for a fallback (a cast's type, "case"), 0 for none.
func colnameOf(e Expr) (string, int) {
	switch e := e.(type) {
	case *ColRef:
		last := e.Parts[len(e.Parts)-1]
		if last == "*" {
			return "", 0
		}
		return last, 2
	case *FuncCall:
		return e.Name[len(e.Name)-1], 2
	case *Cast:
		if n, s := colnameOf(e.Arg); s > 1 {
			return n, s
		}
		return e.Type.Names[len(e.Type.Names)-1], 1
	case *Case:
		if e.Else != nil {
			if n, s := colnameOf(e.Else); s > 1 {
				return n, s
			}
		}
		return "case", 1
	case *VarFunc:
		return e.Name, 2
	case *Array:
		return "array", 2
	case *KeywordExpr:
		if e.Fn == "NULLIF" {
			return "nullif", 2
		}
	case *Unsupported:
		switch {
		case e.Window != nil:
			return e.Window.Func.Name[len(e.Window.Func.Name)-1], 2
		case e.Link != nil && e.Link.name != "":
			return e.Link.name, 2
		}
	}
	return "", 0
}

// Map returns a copy of e in which every node for which f returns a
// replacement (ok true) is that replacement, not walked further; f sees a
// node before its operands. Constructs the rewriter does not handle
// (Unsupported, grouping sets) are kept as they are, not copied.
func Map(e Expr, f func(Expr) (Expr, bool)) Expr {
	if e == nil {
		return nil
	}
	if r, ok := f(e); ok {
		return r
	}
	each := func(es []Expr) []Expr {
		if es == nil {
			return nil
		}
		out := make([]Expr, len(es))
		for i, x := range es {
			out[i] = Map(x, f)
		}
		return out
	}
	switch e := e.(type) {
	case *ColRef:
		c := *e
		c.Parts = append([]string(nil), e.Parts...)
		return &c
	case *Const:
		c := *e
		return &c
	case *Param:
		c := *e
		return &c
	case *FuncCall:
		c := *e
		c.Name = append([]string(nil), e.Name...)
		c.Args, c.Filter = each(e.Args), Map(e.Filter, f)
		return &c
	case *OpExpr:
		c := *e
		c.Left, c.Right = Map(e.Left, f), Map(e.Right, f)
		return &c
	case *BoolExpr:
		c := *e
		c.Args = each(e.Args)
		return &c
	case *Cast:
		c := *e
		c.Arg = Map(e.Arg, f)
		return &c
	case *NullTest:
		c := *e
		c.Arg = Map(e.Arg, f)
		return &c
	case *BoolTest:
		c := *e
		c.Arg = Map(e.Arg, f)
		return &c
	case *In:
		c := *e
		c.Arg, c.List = Map(e.Arg, f), each(e.List)
		return &c
	case *Between:
		c := *e
		c.Arg, c.Lo, c.Hi = Map(e.Arg, f), Map(e.Lo, f), Map(e.Hi, f)
		return &c
	case *KeywordExpr:
		c := *e
		c.Left, c.Right = Map(e.Left, f), Map(e.Right, f)
		return &c
	case *VarFunc:
		c := *e
		c.Args = each(e.Args)
		return &c
	case *Array:
		c := *e
		c.Elems = each(e.Elems)
		return &c
	case *Case:
		c := *e
		c.Arg, c.Else = Map(e.Arg, f), Map(e.Else, f)
		c.Whens = make([]When, len(e.Whens))
		for i, w := range e.Whens {
			c.Whens[i] = When{Cond: Map(w.Cond, f), Result: Map(w.Result, f)}
		}
		return &c
	}
	return e
}
