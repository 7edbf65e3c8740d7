package rewrite

// This is the only file that imports the PostgreSQL parser. It turns the
// parser's tree into this package's AST (ast.go); whatever that AST does not
// model becomes an unsupported node naming the construct.

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ParseError is a syntax error reported by the PostgreSQL parser.
type ParseError struct{ Msg string }

func (e *ParseError) Error() string { return "parse: " + e.Msg }

// parseHook, when set (by tests), sees every text handed to the parser.
var parseHook func(sql string)

// parsed is one parsed SQL text.
type parsed struct {
	sel *selectStmt
	// explain: EXPLAIN of the statement; verbose: EXPLAIN (VERBOSE).
	explain, verbose bool
	// other names the statement when it is not a plain SELECT (or EXPLAIN
	// of one): "INSERT", "2 statements", ...
	other string
	// multi: the text holds several statements.
	multi bool
	// tree is the parser's tree of the text, for printing the statement
	// around its subqueries (outerText).
	tree *pg.ParseResult
	// approx: the statement calls APPROX_COUNT_DISTINCT somewhere (see
	// approxCall); exact is then the statement with each such call
	// counted exactly (exactText), or approxWhy says why it cannot be.
	approx           bool
	exact, approxWhy string
}

// parseTree is PostgreSQL's parse of sql; every parse of the package goes
// through it (for parseHook).
func parseTree(sql string) (*pg.ParseResult, error) {
	if parseHook != nil {
		parseHook(sql)
	}
	return pg.Parse(sql)
}

// parseSQL parses sql with PostgreSQL's parser. A syntax error is returned as
// *ParseError.
func parseSQL(sql string) (*parsed, error) {
	tree, err := parseTree(sql)
	if err != nil {
		return nil, &ParseError{Msg: strings.TrimPrefix(err.Error(), "pg_query: ")}
	}
	stmts := tree.GetStmts()
	switch len(stmts) {
	case 0:
		return &parsed{other: "an empty statement"}, nil
	case 1:
	default:
		return &parsed{other: strconv.Itoa(len(stmts)) + " statements", multi: true}, nil
	}
	n := stmts[0].GetStmt()
	out := &parsed{tree: tree}
	// The exact text is made before convSelect, whose AST points into
	// the tree, and from a copy of it.
	if containsFold(sql, "approx_count_distinct") {
		out.approx, out.exact, out.approxWhy = exactText(tree)
	}
	other := func(what string) (*parsed, error) {
		o := &parsed{other: what, approx: out.approx, approxWhy: out.approxWhy}
		if o.approx && o.approxWhy == "" {
			o.approxWhy = "APPROX_COUNT_DISTINCT is answered in a SELECT statement (or EXPLAIN of one, with no option but VERBOSE), not in " + what
		}
		return o, nil
	}
	if ex := n.GetExplainStmt(); ex != nil {
		verbose, ok := explainOptions(ex.GetOptions())
		if !ok {
			return other("EXPLAIN with options other than VERBOSE")
		}
		out.explain, out.verbose = true, verbose
		n = ex.GetQuery()
	}
	s := n.GetSelectStmt()
	if s == nil {
		return other(stmtKind(n))
	}
	out.sel = convSelect(s)
	return out, nil
}

// explainOptions reads EXPLAIN's options: none, or VERBOSE (on); ok is
// false for any other.
func explainOptions(opts []*pg.Node) (verbose, ok bool) {
	switch len(opts) {
	case 0:
		return false, true
	case 1:
	default:
		return false, false
	}
	d := opts[0].GetDefElem()
	if d == nil || d.GetDefname() != "verbose" {
		return false, false
	}
	switch arg := d.GetArg(); {
	case arg == nil:
		return true, true
	case arg.GetBoolean() != nil:
		return arg.GetBoolean().GetBoolval(), true
	case arg.GetString_() != nil:
		switch strings.ToLower(arg.GetString_().GetSval()) {
		case "on", "true":
			return true, true
		case "off", "false":
			return false, true
		}
	}
	return false, false
}

// approxCall reports whether f calls APPROX_COUNT_DISTINCT: unqualified,
// or in schema pg_catalog or pgsketch (as classifyAgg has it).
func approxCall(f *pg.FuncCall) bool {
	name, ok := strs(f.GetFuncname())
	if !ok {
		return false
	}
	switch len(name) {
	case 1:
		return name[0] == "approx_count_distinct"
	case 2:
		return (name[0] == "pg_catalog" || name[0] == "pgsketch") && name[1] == "approx_count_distinct"
	}
	return false
}

// approxNamed reports whether PostgreSQL names a select-list item whose
// expression is n after an APPROX_COUNT_DISTINCT call in it (its
// FigureColname: a function call's name, through casts, COLLATE and a
// CASE's ELSE), which counted exactly would be named count.
func approxNamed(n *pg.Node) bool {
	switch v := n.GetNode().(type) {
	case *pg.Node_FuncCall:
		return approxCall(v.FuncCall)
	case *pg.Node_TypeCast:
		return approxNamed(v.TypeCast.GetArg())
	case *pg.Node_CollateClause:
		return approxNamed(v.CollateClause.GetArg())
	case *pg.Node_CaseExpr:
		return v.CaseExpr.GetDefresult() != nil && approxNamed(v.CaseExpr.GetDefresult())
	}
	return false
}

// exactText finds the APPROX_COUNT_DISTINCT calls of a parsed text and
// prints it with each counted exactly: APPROX_COUNT_DISTINCT([DISTINCT] x
// [ORDER BY ...]) [FILTER (WHERE c)] becomes count(DISTINCT x) [FILTER
// (WHERE c)] (an ORDER BY changes no count), and a select-list item
// PostgreSQL would have named approx_count_distinct keeps that name. found
// reports any call; why says which call has no exact equivalent (a
// window function, *, other than one argument, ...), and exact is then
// empty. The tree is left as it was.
func exactText(tree *pg.ParseResult) (found bool, exact, why string) {
	t := proto.Clone(tree).(*pg.ParseResult)
	eachMessage(t.ProtoReflect(), func(m proto.Message) bool {
		switch v := m.(type) {
		case *pg.ResTarget:
			if v.GetName() == "" && v.GetVal() != nil && approxNamed(v.GetVal()) {
				v.Name = "approx_count_distinct"
			}
		case *pg.FuncCall:
			if !approxCall(v) {
				return true
			}
			found = true
			if why != "" {
				return true
			}
			switch {
			case v.GetOver() != nil:
				why = "APPROX_COUNT_DISTINCT as a window function (OVER) is not supported"
			case v.GetAggStar():
				why = "APPROX_COUNT_DISTINCT(*) is not supported: it counts the distinct values of one expression"
			case len(v.GetArgs()) != 1:
				why = "APPROX_COUNT_DISTINCT of " + strconv.Itoa(len(v.GetArgs())) + " arguments is not supported: it counts the distinct values of one expression"
			case v.GetAggWithinGroup():
				why = "APPROX_COUNT_DISTINCT ... WITHIN GROUP is not supported"
			case v.GetFuncVariadic():
				why = "APPROX_COUNT_DISTINCT with VARIADIC is not supported"
			}
			v.Funcname = []*pg.Node{pg.MakeStrNode("count")}
			v.AggDistinct = true
			v.AggOrder = nil
		}
		return true
	})
	if !found || why != "" {
		return found, "", why
	}
	out, err := pg.Deparse(t)
	if err != nil {
		return true, "", "the statement cannot be printed with APPROX_COUNT_DISTINCT counted exactly: " + err.Error()
	}
	return true, out, ""
}

// Statement is one statement of a text holding several (Split).
type Statement struct {
	// SQL is the statement's text, without the separating semicolon.
	SQL string
	// Control is set for statements that steer transactions (BEGIN,
	// COMMIT, ROLLBACK, SAVEPOINT, PREPARE TRANSACTION, ...) and for COPY:
	// the ones a caller running the statements one by one inside a
	// transaction of its own cannot run as PostgreSQL would.
	Control bool
}

// Split splits sql into its statements, as PostgreSQL's parser delimits
// them. A syntax error is returned as *ParseError.
func Split(sql string) ([]Statement, error) {
	// The parser must never see what could exhaust its stack.
	if err := checkLimits(sql); err != nil {
		return nil, err
	}
	tree, err := parseTree(sql)
	if err != nil {
		return nil, &ParseError{Msg: strings.TrimPrefix(err.Error(), "pg_query: ")}
	}
	var out []Statement
	for _, rs := range tree.GetStmts() {
		start, n := int(rs.GetStmtLocation()), int(rs.GetStmtLen())
		if start < 0 || start > len(sql) || n < 0 || start+n > len(sql) {
			return nil, &ParseError{Msg: "statement bounds out of range"}
		}
		text := sql[start:]
		if n > 0 {
			text = sql[start : start+n]
		}
		node := rs.GetStmt()
		out = append(out, Statement{SQL: strings.TrimSpace(text),
			Control: node.GetTransactionStmt() != nil || node.GetCopyStmt() != nil})
	}
	return out, nil
}

// parseCheck reports whether sql parses as PostgreSQL; the tests use it to
// check that every emitted SQL parses again.
func parseCheck(sql string) error {
	if _, err := pg.Parse(sql); err != nil {
		return &ParseError{Msg: strings.TrimPrefix(err.Error(), "pg_query: ")}
	}
	return nil
}

// treeDepth returns how deep the parser's tree for sql nests (JSON objects
// and arrays), for the fuzz test's check that the caps bound it.
func treeDepth(sql string) (int, error) {
	js, err := pg.ParseToJSON(sql)
	if err != nil {
		return 0, err
	}
	depth, max := 0, 0
	for i := 0; i < len(js); i++ {
		switch js[i] {
		case '{', '[':
			depth++
			if depth > max {
				max = depth
			}
		case '}', ']':
			depth--
		case '"':
			for i++; i < len(js) && js[i] != '"'; i++ {
				if js[i] == '\\' {
					i++
				}
			}
		}
	}
	return max, nil
}

// stmtKinds names, by the parser's field for them, the statements other
// than SELECT that stmtKind tells apart.
var stmtKinds = map[protoreflect.Name]string{
	"insert_stmt":          "INSERT",
	"update_stmt":          "UPDATE",
	"delete_stmt":          "DELETE",
	"variable_set_stmt":    "SET",
	"create_table_as_stmt": "CREATE TABLE AS",
	"declare_cursor_stmt":  "DECLARE CURSOR",
	"copy_stmt":            "COPY",
	"prepare_stmt":         "PREPARE",
	"view_stmt":            "CREATE VIEW",
}

func stmtKind(n *pg.Node) string {
	if n.GetNode() != nil {
		m := n.ProtoReflect()
		if k, ok := stmtKinds[m.WhichOneof(m.Descriptor().Oneofs().ByName("node")).Name()]; ok {
			return k
		}
	}
	return "not a SELECT"
}

func convSelect(s *pg.SelectStmt) *selectStmt {
	out := &selectStmt{}
	switch {
	case s.GetOp() != pg.SetOperation_SETOP_NONE && s.GetOp() != pg.SetOperation_SET_OPERATION_UNDEFINED:
		out.unsupported = "a set operation (UNION, INTERSECT, EXCEPT)"
		out.setOp = map[pg.SetOperation]string{pg.SetOperation_SETOP_UNION: "UNION",
			pg.SetOperation_SETOP_INTERSECT: "INTERSECT", pg.SetOperation_SETOP_EXCEPT: "EXCEPT"}[s.GetOp()]
		out.setAll = s.GetAll()
		out.larg, out.rarg = convSelect(s.GetLarg()), convSelect(s.GetRarg())
		out.larg.raw = &rawSelect{get: s.GetLarg, set: func(x *pg.SelectStmt) { s.Larg = x }}
		out.rarg.raw = &rawSelect{get: s.GetRarg, set: func(x *pg.SelectStmt) { s.Rarg = x }}
		if w := s.GetWithClause(); w != nil {
			out.with = convWith(w)
		}
		switch {
		case s.GetWithClause() != nil:
			out.setExtra = "a WITH clause"
		case len(s.GetSortClause()) > 0:
			out.setExtra = "ORDER BY"
		case s.GetLimitCount() != nil || s.GetLimitOffset() != nil:
			out.setExtra = "LIMIT or OFFSET"
		case len(s.GetLockingClause()) > 0:
			out.setExtra = "a locking clause"
		}
		return out
	case s.GetWithClause() != nil:
		out.unsupported = "a WITH clause"
		out.with = convWith(s.GetWithClause())
	}
	switch {
	case len(s.GetValuesLists()) > 0:
		out.unsupported = "VALUES"
		return out
	case s.GetIntoClause() != nil:
		out.unsupported = "SELECT INTO"
		return out
	case len(s.GetLockingClause()) > 0:
		out.unsupported = "a locking clause (FOR UPDATE/SHARE)"
		return out
	case len(s.GetWindowClause()) > 0:
		out.unsupported = "a WINDOW clause"
		return out
	case s.GetGroupDistinct():
		out.unsupported = "GROUP BY DISTINCT"
		return out
	case s.GetLimitOption() == pg.LimitOption_LIMIT_OPTION_WITH_TIES:
		out.unsupported = "FETCH ... WITH TIES"
		return out
	}
	if dc := s.GetDistinctClause(); len(dc) > 0 {
		if len(dc) == 1 && dc[0].GetNode() == nil {
			out.distinct = true
		} else {
			out.unsupported = "DISTINCT ON"
			return out
		}
	}
	for _, t := range s.GetTargetList() {
		rt := t.GetResTarget()
		if rt == nil {
			out.unsupported = "an unexpected select-list item"
			return out
		}
		if cr := rt.GetVal().GetColumnRef(); cr != nil && isStarRef(cr) {
			out.targets = append(out.targets, target{star: true})
			continue
		}
		out.targets = append(out.targets, target{name: rt.GetName(), e: conv(rt.GetVal())})
	}
	for _, f := range s.GetFromClause() {
		out.from = append(out.from, convFrom(f))
	}
	out.where = convOptional(s.GetWhereClause())
	for _, g := range s.GetGroupClause() {
		if gs := g.GetGroupingSet(); gs != nil {
			// Only the star-join planner answers these (starjoin.go),
			// regrouping the fact table's rows: every other planner
			// refuses the statement.
			if out.unsupported == "" { // a WITH clause stays the reason
				out.unsupported = groupingSetsWhat
			}
			out.groupBy = append(out.groupBy, convGroupingSet(gs))
			continue
		}
		out.groupBy = append(out.groupBy, conv(g))
	}
	out.having = convOptional(s.GetHavingClause())
	for _, o := range s.GetSortClause() {
		it, ok := convSortBy(o)
		if !ok {
			out.unsupported = "an unexpected ORDER BY item"
			return out
		}
		out.orderBy = append(out.orderBy, it)
	}
	out.limit = convOptional(s.GetLimitCount())
	out.offset = convOptional(s.GetLimitOffset())
	return out
}

// convSortBy converts one ORDER BY item.
func convSortBy(o *pg.Node) (sortItem, bool) {
	sb := o.GetSortBy()
	if sb == nil {
		return sortItem{}, false
	}
	return sortItem{e: conv(sb.GetNode()), dir: sortDirs[sb.GetSortbyDir()], nulls: sortNulls[sb.GetSortbyNulls()]}, true
}

// columnParts reads a column reference's names, "*" for a star; ok is
// false for any other field.
func columnParts(cr *pg.ColumnRef) (parts []string, ok bool) {
	for _, f := range cr.GetFields() {
		switch {
		case f.GetString_() != nil:
			parts = append(parts, f.GetString_().GetSval())
		case f.GetAStar() != nil:
			parts = append(parts, "*")
		default:
			return nil, false
		}
	}
	return parts, true
}

func isStarRef(cr *pg.ColumnRef) bool {
	f := cr.GetFields()
	return len(f) > 0 && f[len(f)-1].GetAStar() != nil
}

func convFrom(n *pg.Node) fromItem {
	rv := n.GetRangeVar()
	switch {
	case rv != nil:
		fi := fromItem{schema: rv.GetSchemaname(), name: rv.GetRelname(), only: !rv.GetInh()}
		if rv.GetCatalogname() != "" {
			fi.unsupported = "a database-qualified table name"
		}
		if a := rv.GetAlias(); a != nil {
			fi.alias = a.GetAliasname()
			if len(a.GetColnames()) > 0 {
				fi.unsupported = "a table alias with column aliases"
			}
		}
		return fi
	case n.GetJoinExpr() != nil:
		j := n.GetJoinExpr()
		return fromItem{unsupported: "a JOIN", join: &joinItem{
			typ: joinTypes[j.GetJointype()],
			l:   convFrom(j.GetLarg()), r: convFrom(j.GetRarg()), on: convOptional(j.GetQuals()),
			plain: !j.GetIsNatural() && len(j.GetUsingClause()) == 0 && j.GetAlias() == nil,
		}}
	case n.GetRangeSubselect() != nil:
		rs := n.GetRangeSubselect()
		fi := fromItem{unsupported: "a subquery in FROM"}
		if sel := rs.GetSubquery().GetSelectStmt(); sel != nil && !rs.GetLateral() {
			fi.query = convSelect(sel)
			fi.query.raw = nodeSlot(rs.GetSubquery())
			if a := rs.GetAlias(); a != nil {
				fi.alias = a.GetAliasname()
				fi.colAliases = len(a.GetColnames()) > 0
			}
		}
		return fi
	case n.GetRangeFunction() != nil:
		return fromItem{unsupported: "a function in FROM"}
	case n.GetRangeTableSample() != nil:
		return fromItem{unsupported: "TABLESAMPLE"}
	}
	return fromItem{unsupported: "an unsupported FROM item"}
}

// joinTypes are the join types of SQL's syntax, as printed.
var joinTypes = map[pg.JoinType]string{pg.JoinType_JOIN_INNER: "JOIN", pg.JoinType_JOIN_LEFT: "LEFT JOIN",
	pg.JoinType_JOIN_RIGHT: "RIGHT JOIN", pg.JoinType_JOIN_FULL: "FULL JOIN"}

func strs(ns []*pg.Node) ([]string, bool) {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		s := n.GetString_()
		if s == nil {
			return nil, false
		}
		out = append(out, s.GetSval())
	}
	return out, true
}

// convOptional converts an optional part of a statement: one left out
// stays nil.
func convOptional(n *pg.Node) expr {
	if n == nil {
		return nil
	}
	return conv(n)
}

func convList(ns []*pg.Node) []expr {
	out := make([]expr, len(ns))
	for i, n := range ns {
		out[i] = conv(n)
	}
	return out
}

// conv converts one expression node.
func conv(n *pg.Node) expr {
	if n == nil {
		return &unsupported{what: "an empty expression"}
	}
	switch v := n.GetNode().(type) {
	case *pg.Node_ColumnRef:
		parts, ok := columnParts(v.ColumnRef)
		switch {
		case !ok:
			return &unsupported{what: "an unusual column reference"}
		case len(parts) == 0:
			return &unsupported{what: "an empty column reference"}
		}
		return &colRef{parts: parts}
	case *pg.Node_AConst:
		return convConst(v.AConst)
	case *pg.Node_ParamRef:
		return &paramRef{n: int(v.ParamRef.GetNumber())}
	case *pg.Node_FuncCall:
		f := v.FuncCall
		name, ok := strs(f.GetFuncname())
		fn := ""
		if ok && len(name) > 0 {
			fn = strings.ToLower(name[len(name)-1])
		}
		switch {
		case f.GetOver() != nil:
			return &unsupported{what: "a window function", fn: fn, window: convWindow(f, name, ok)}
		case len(f.GetAggOrder()) > 0:
			return &unsupported{what: "an ordered aggregate", fn: fn}
		case f.GetAggWithinGroup():
			return &unsupported{what: "WITHIN GROUP", fn: fn}
		case f.GetFuncVariadic():
			return &unsupported{what: "a VARIADIC call", fn: fn}
		}
		if !ok || len(name) == 0 {
			return &unsupported{what: "an unusual function name"}
		}
		call := &funcCall{
			name:      name,
			args:      convList(f.GetArgs()),
			distinct:  f.GetAggDistinct(),
			star:      f.GetAggStar(),
			sqlSyntax: f.GetFuncformat() == pg.CoercionForm_COERCE_SQL_SYNTAX,
		}
		call.filter = convOptional(f.GetAggFilter())
		return call
	case *pg.Node_AExpr:
		return convAExpr(v.AExpr)
	case *pg.Node_BoolExpr:
		b := v.BoolExpr
		args := convList(b.GetArgs())
		switch b.GetBoolop() {
		case pg.BoolExprType_AND_EXPR:
			return &boolExpr{op: "AND", args: args}
		case pg.BoolExprType_OR_EXPR:
			return &boolExpr{op: "OR", args: args}
		case pg.BoolExprType_NOT_EXPR:
			if len(args) == 1 {
				return &boolExpr{op: "NOT", args: args}
			}
		}
		return &unsupported{what: "an unusual boolean expression"}
	case *pg.Node_TypeCast:
		t := convType(v.TypeCast.GetTypeName())
		if t == nil {
			return &unsupported{what: "a cast to an unusual type"}
		}
		return &castExpr{arg: conv(v.TypeCast.GetArg()), typ: t}
	case *pg.Node_NullTest:
		return &nullTest{arg: conv(v.NullTest.GetArg()), not: v.NullTest.GetNulltesttype() == pg.NullTestType_IS_NOT_NULL}
	case *pg.Node_BooleanTest:
		t, ok := boolTests[v.BooleanTest.GetBooltesttype()]
		if !ok {
			return &unsupported{what: "an unusual boolean test"}
		}
		return &boolTest{arg: conv(v.BooleanTest.GetArg()), test: t}
	case *pg.Node_CaseExpr:
		c := v.CaseExpr
		out := &caseExpr{}
		if c.GetArg() != nil {
			out.arg = conv(c.GetArg())
		}
		for _, w := range c.GetArgs() {
			cw := w.GetCaseWhen()
			if cw == nil {
				return &unsupported{what: "an unusual CASE"}
			}
			out.whens = append(out.whens, caseWhen{cond: conv(cw.GetExpr()), res: conv(cw.GetResult())})
		}
		out.def = convOptional(c.GetDefresult())
		return out
	case *pg.Node_CoalesceExpr:
		return &varFunc{name: "coalesce", args: convList(v.CoalesceExpr.GetArgs()), mod: -1}
	case *pg.Node_MinMaxExpr:
		name := "greatest"
		if v.MinMaxExpr.GetOp() == pg.MinMaxOp_IS_LEAST {
			name = "least"
		}
		return &varFunc{name: name, args: convList(v.MinMaxExpr.GetArgs()), mod: -1}
	case *pg.Node_SqlvalueFunction:
		return convSQLValue(v.SqlvalueFunction)
	case *pg.Node_AArrayExpr:
		return &arrayExpr{elems: convList(v.AArrayExpr.GetElements())}
	case *pg.Node_SubLink:
		return convSubquery(v.SubLink)
	case *pg.Node_RowExpr:
		return &unsupported{what: "a row constructor"}
	case *pg.Node_CollateClause:
		return &unsupported{what: "COLLATE"}
	case *pg.Node_AIndirection:
		return &unsupported{what: "a subscript or field selection"}
	case *pg.Node_GroupingFunc:
		// An aggregate to the planners (they refuse it), evaluated by
		// PostgreSQL over the arm's keys in a star join.
		return &funcCall{name: []string{"grouping"}, args: convList(v.GroupingFunc.GetArgs()), sqlSyntax: true}
	}
	return &unsupported{what: "an unsupported expression"}
}

// convSubquery converts a subquery in an expression: unsupported, with
// the subquery (link) when the rewriter reads its form.
func convSubquery(sl *pg.SubLink) expr {
	return &unsupported{what: "a subquery", link: convSubLink(sl)}
}

func convConst(c *pg.A_Const) expr {
	if c.GetIsnull() {
		return &constExpr{kind: "null", val: "NULL"}
	}
	switch v := c.GetVal().(type) {
	case *pg.A_Const_Ival:
		return &constExpr{kind: "int", val: strconv.FormatInt(int64(v.Ival.GetIval()), 10)}
	case *pg.A_Const_Fval:
		return &constExpr{kind: "float", val: v.Fval.GetFval()}
	case *pg.A_Const_Sval:
		return &constExpr{kind: "str", val: v.Sval.GetSval()}
	case *pg.A_Const_Boolval:
		return &constExpr{kind: "bool", val: strconv.FormatBool(v.Boolval.GetBoolval())}
	case *pg.A_Const_Bsval:
		return &constExpr{kind: "bits", val: v.Bsval.GetBsval()}
	}
	return &unsupported{what: "an unusual constant"}
}

func convType(t *pg.TypeName) *typeName {
	if t == nil || t.GetSetof() || t.GetPctType() {
		return nil
	}
	names, ok := strs(t.GetNames())
	if !ok || len(names) == 0 {
		return nil
	}
	out := &typeName{names: names, array: len(t.GetArrayBounds())}
	if len(t.GetTypmods()) > 0 {
		if len(names) == 2 && names[0] == "pg_catalog" && names[1] == "interval" {
			// INTERVAL '1' DAY: the typmods are a field mask, not
			// printable as type modifiers.
			return nil
		}
		for _, m := range t.GetTypmods() {
			e := conv(m)
			if c, ok := e.(*constExpr); !ok || c.kind != "int" {
				return nil
			}
			out.mods = append(out.mods, e)
		}
	}
	for _, b := range t.GetArrayBounds() {
		if iv := b.GetInteger(); iv == nil || iv.GetIval() != -1 {
			return nil
		}
	}
	return out
}

func convSQLValue(f *pg.SQLValueFunction) expr {
	name, ok := sqlValueFuncs[f.GetOp()]
	if !ok {
		return &unsupported{what: "an unusual SQL value function"}
	}
	mod := -1
	switch f.GetOp() {
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N,
		pg.SQLValueFunctionOp_SVFOP_LOCALTIME_N, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
		mod = int(f.GetTypmod())
	}
	return &varFunc{name: name, mod: mod}
}

func convAExpr(a *pg.A_Expr) expr {
	name, ok := strs(a.GetName())
	if !ok || len(name) == 0 || len(name) > 2 {
		return &unsupported{what: "an unusual operator"}
	}
	op := name[len(name)-1]
	schema := ""
	if len(name) == 2 {
		schema = name[0]
	}
	l := func() expr {
		if a.GetLexpr() == nil {
			return nil
		}
		return conv(a.GetLexpr())
	}
	switch a.GetKind() {
	case pg.A_Expr_Kind_AEXPR_OP:
		if a.GetRexpr() == nil {
			return &unsupported{what: "a postfix operator"}
		}
		return &opExpr{schema: schema, op: op, l: l(), r: conv(a.GetRexpr())}
	case pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
		if schema != "" || a.GetLexpr() == nil {
			return &unsupported{what: "an unusual ANY/ALL"}
		}
		fn := "ANY"
		if a.GetKind() == pg.A_Expr_Kind_AEXPR_OP_ALL {
			fn = "ALL"
		}
		return &kwExpr{l: l(), r: conv(a.GetRexpr()), kw: op, fn: fn}
	case pg.A_Expr_Kind_AEXPR_DISTINCT:
		return &kwExpr{l: l(), r: conv(a.GetRexpr()), kw: "IS DISTINCT FROM"}
	case pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		return &kwExpr{l: l(), r: conv(a.GetRexpr()), kw: "IS NOT DISTINCT FROM"}
	case pg.A_Expr_Kind_AEXPR_NULLIF:
		return &kwExpr{l: l(), r: conv(a.GetRexpr()), fn: "NULLIF"}
	case pg.A_Expr_Kind_AEXPR_IN:
		list := a.GetRexpr().GetList()
		if list == nil {
			return &unsupported{what: "an unusual IN"}
		}
		return &inExpr{arg: l(), list: convList(list.GetItems()), not: op == "<>"}
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		kw := map[string]string{"~~": "LIKE", "!~~": "NOT LIKE", "~~*": "ILIKE", "!~~*": "NOT ILIKE"}[op]
		if kw == "" || a.GetRexpr().GetFuncCall() != nil {
			// LIKE ... ESCAPE becomes a like_escape() call: fine, but
			// keep the set small.
			if kw == "" {
				return &unsupported{what: "an unusual LIKE"}
			}
		}
		return &kwExpr{l: l(), r: conv(a.GetRexpr()), kw: kw}
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		list := a.GetRexpr().GetList()
		if list == nil || len(list.GetItems()) != 2 {
			return &unsupported{what: "an unusual BETWEEN"}
		}
		k := a.GetKind()
		return &betweenExpr{
			arg: l(), lo: conv(list.GetItems()[0]), hi: conv(list.GetItems()[1]),
			not:       k == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN || k == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM,
			symmetric: k == pg.A_Expr_Kind_AEXPR_BETWEEN_SYM || k == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM,
		}
	case pg.A_Expr_Kind_AEXPR_SIMILAR:
		return &unsupported{what: "SIMILAR TO"}
	}
	return &unsupported{what: "an unusual operator expression"}
}

// convWith converts a WITH clause: every name (a table name in the
// statement may mean one), and the body of each that is a SELECT, with
// where it sits.
func convWith(w *pg.WithClause) *withClause {
	out := &withClause{recursive: w.GetRecursive(), plain: true}
	for _, n := range w.GetCtes() {
		c := n.GetCommonTableExpr()
		if c == nil {
			out.plain = false
			continue
		}
		out.names = append(out.names, c.GetCtename())
		sel := c.GetCtequery().GetSelectStmt()
		if sel == nil {
			out.modifying, out.plain = true, false
			continue
		}
		if len(c.GetAliascolnames()) > 0 || c.GetSearchClause() != nil || c.GetCycleClause() != nil {
			out.plain = false
		}
		body := convSelect(sel)
		body.raw = nodeSlot(c.GetCtequery())
		out.bodies = append(out.bodies, body)
	}
	return out
}

// rawSelect is where a subquery's statement sits in the parser's tree, so
// that outerText can print the statement around it.
type rawSelect struct {
	get func() *pg.SelectStmt
	set func(*pg.SelectStmt)
}

// nodeSlot is the rawSelect of the SELECT a node holds.
func nodeSlot(n *pg.Node) *rawSelect {
	return &rawSelect{
		get: n.GetSelectStmt,
		set: func(x *pg.SelectStmt) { n.Node = &pg.Node_SelectStmt{SelectStmt: x} },
	}
}

// armMarker is the text outerText prints in place of subquery i.
func armMarker(i int) string { return "pgsketch_subquery_" + strconv.Itoa(i) }

// outerText prints the parsed statement with each of subs (subqueries of
// it, found by convSelect) replaced: the pieces around them, len(subs)+1,
// in order. The text is the parser's deparse of the tree, which PostgreSQL
// reads as the same statement. Each subquery stands where a parenthesized
// SELECT may.
func (p *parsed) outerText(subs []*selectStmt) ([]string, error) {
	if p.tree == nil {
		return nil, errors.New("no parse tree")
	}
	type swapped struct {
		slot *rawSelect
		orig *pg.SelectStmt
	}
	var undo []swapped
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i].slot.set(undo[i].orig)
		}
	}()
	for i, sub := range subs {
		if sub.raw == nil {
			return nil, errors.New("a subquery without its place in the tree")
		}
		m, err := pg.Parse("SELECT '" + armMarker(i) + "'")
		if err != nil {
			return nil, err
		}
		undo = append(undo, swapped{sub.raw, sub.raw.get()})
		sub.raw.set(m.GetStmts()[0].GetStmt().GetSelectStmt())
	}
	text, err := pg.Deparse(p.tree)
	if err != nil {
		return nil, err
	}
	pieces := make([]string, 0, len(subs)+1)
	for i := range subs {
		m := "SELECT '" + armMarker(i) + "'"
		at := strings.Index(text, m)
		if at < 0 || strings.Count(text, m) != 1 {
			return nil, errors.New("the printed statement does not hold its subquery once")
		}
		pieces = append(pieces, text[:at])
		text = text[at+len(m):]
	}
	return append(pieces, text), nil
}

// groupingSetsWhat is the unsupported construct of a GROUP BY with
// grouping sets.
const groupingSetsWhat = "GROUPING SETS, ROLLUP or CUBE"

// convGroupingSet converts GROUPING SETS, ROLLUP or CUBE, or one set of
// them.
func convGroupingSet(gs *pg.GroupingSet) expr {
	kind, ok := groupingSetKinds[gs.GetKind()]
	if !ok {
		return &unsupported{what: "an unknown grouping set"}
	}
	out := &groupingSet{kind: kind}
	for _, n := range gs.GetContent() {
		if sub := n.GetGroupingSet(); sub != nil {
			out.items = append(out.items, convGroupingSet(sub))
			continue
		}
		out.items = append(out.items, conv(n))
	}
	return out
}

// convWindow converts a window function call, or returns nil for one the
// regrouping planner cannot print (a named window, an ordered or
// VARIADIC call, DISTINCT).
func convWindow(f *pg.FuncCall, name []string, named bool) *window {
	w := f.GetOver()
	if !named || len(name) == 0 || w.GetName() != "" || w.GetRefname() != "" || len(f.GetAggOrder()) > 0 ||
		f.GetAggWithinGroup() || f.GetFuncVariadic() || f.GetAggDistinct() {
		return nil
	}
	call := &funcCall{name: name, args: convList(f.GetArgs()), star: f.GetAggStar()}
	call.filter = convOptional(f.GetAggFilter())
	out := &window{f: call, partition: convList(w.GetPartitionClause()), frame: w.GetFrameOptions()}
	for _, o := range w.GetOrderClause() {
		it, ok := convSortBy(o)
		if !ok || it.dir == "USING" {
			return nil
		}
		out.order = append(out.order, it)
	}
	out.start = convOptional(w.GetStartOffset())
	out.end = convOptional(w.GetEndOffset())
	return out
}

// convSubLink reads a subquery expression for the regrouping planner: its
// text as the parser deparses it, and what it reads of the statement
// around it. It returns nil for one the planner cannot print.
func convSubLink(sl *pg.SubLink) *subLink {
	sel := sl.GetSubselect().GetSelectStmt()
	if sel == nil {
		return nil
	}
	l := &subLink{}
	switch sl.GetSubLinkType() {
	case pg.SubLinkType_EXISTS_SUBLINK:
		l.kind, l.name = "EXISTS", "exists"
	case pg.SubLinkType_ANY_SUBLINK, pg.SubLinkType_ALL_SUBLINK:
		op, ok := strs(sl.GetOperName())
		switch {
		case !ok || len(op) > 1 || sl.GetTestexpr() == nil:
			return nil
		case len(op) == 0:
			op = []string{"="} // x IN (SELECT ...)
		}
		l.kind, l.op, l.test = "ANY", op[0], conv(sl.GetTestexpr())
		if sl.GetSubLinkType() == pg.SubLinkType_ALL_SUBLINK {
			l.kind = "ALL"
		}
	case pg.SubLinkType_EXPR_SUBLINK:
		l.kind = "EXPR"
		// PostgreSQL names it after the subquery's one output column.
		if ts := sel.GetTargetList(); len(ts) > 0 {
			if rt := ts[0].GetResTarget(); rt != nil {
				if l.name = rt.GetName(); l.name == "" {
					if n, strength := colnameOf(conv(rt.GetVal())); strength == 2 {
						l.name = n
					}
				}
			}
		}
	case pg.SubLinkType_ARRAY_SUBLINK:
		l.kind, l.name = "ARRAY", "array"
	default:
		return nil
	}
	text, err := pg.Deparse(&pg.ParseResult{Version: treeVersion(), Stmts: []*pg.RawStmt{{Stmt: sl.GetSubselect()}}})
	if err != nil {
		return nil
	}
	l.text = text
	l.sel = convSelect(sel)
	readSubquery(sl.GetSubselect().ProtoReflect(), l)
	return l
}

// readSubquery fills l's locals, free references, aggregates' free
// references, functions and other constructs from the subquery's tree.
func readSubquery(sub protoreflect.Message, l *subLink) {
	l.locals = map[string]bool{}
	eachMessage(sub, func(m proto.Message) bool {
		switch n := m.(type) {
		case *pg.RangeVar:
			if a := n.GetAlias(); a != nil {
				l.locals[a.GetAliasname()] = true
			} else {
				l.locals[n.GetRelname()] = true
			}
		case *pg.RangeSubselect:
			l.locals[n.GetAlias().GetAliasname()] = true
		case *pg.RangeFunction:
			l.locals[n.GetAlias().GetAliasname()] = true
		case *pg.JoinExpr:
			l.locals[n.GetAlias().GetAliasname()] = true
		case *pg.CommonTableExpr:
			l.locals[n.GetCtename()] = true
		}
		return true
	})
	delete(l.locals, "")
	// free lists the column references below m that no local name
	// qualifies.
	free := func(m protoreflect.Message) [][]string {
		var out [][]string
		eachMessage(m, func(m proto.Message) bool {
			cr, ok := m.(*pg.ColumnRef)
			if !ok {
				return true
			}
			parts, ok := columnParts(cr)
			switch {
			case !ok:
				l.other = "an unusual column reference"
			case len(parts) == 1 && parts[0] == "*":
				// The subquery's own FROM items' columns.
			case len(parts) >= 2 && l.locals[parts[len(parts)-2]]:
			default:
				out = append(out, parts)
			}
			return false
		})
		return out
	}
	l.free = free(sub)
	eachMessage(sub, func(m proto.Message) bool {
		switch n := m.(type) {
		case *pg.FuncCall:
			name, ok := strs(n.GetFuncname())
			if !ok {
				l.other = "an unusual function name"
				return false
			}
			l.calls = append(l.calls, subCall{name: name, free: free(n.ProtoReflect()), over: n.GetOver() != nil})
		case *pg.A_Expr:
			switch n.GetKind() {
			case pg.A_Expr_Kind_AEXPR_OP, pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
				name, ok := strs(n.GetName())
				if !ok {
					l.other = "an unusual operator"
					return false
				}
				l.ops = append(l.ops, name)
			}
		case *pg.GroupingFunc:
			l.other = "GROUPING() inside a subquery"
		case *pg.SelectStmt:
			if len(n.GetLockingClause()) > 0 {
				l.other = "a subquery that locks rows"
			}
			if n.GetIntoClause() != nil {
				l.other = "SELECT INTO inside a subquery"
			}
		case *pg.RangeTableSample:
			// Sampled once per arm row, not once per row of the table.
			l.other = "TABLESAMPLE inside a subquery"
		case *pg.InsertStmt, *pg.UpdateStmt, *pg.DeleteStmt, *pg.MergeStmt:
			l.other = "a data-modifying statement inside a subquery"
		}
		return true
	})
}

// treeVersion is the version the parser stamps on its trees, which the
// deparser requires of a tree it is given.
var treeVersion = sync.OnceValue(func() int32 {
	t, err := pg.Parse("SELECT")
	if err != nil {
		return 0
	}
	return t.GetVersion()
})

// eachMessage calls f on m and, while f returns true, on every message
// below it, depth first.
func eachMessage(m protoreflect.Message, f func(proto.Message) bool) {
	if !m.IsValid() || !f(m.Interface()) {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Message() != nil:
			list := v.List()
			for i := 0; i < list.Len(); i++ {
				eachMessage(list.Get(i).Message(), f)
			}
		case fd.Message() != nil:
			eachMessage(v.Message(), f)
		}
		return true
	})
}

// The parser's enumerations, spelled as SQL. A value missing from a table
// is one the AST does not model.
var (
	// sortDirs and sortNulls spell an ORDER BY item's direction and NULLS
	// placement; the defaults are left unsaid.
	sortDirs = map[pg.SortByDir]string{
		pg.SortByDir_SORTBY_ASC:   "ASC",
		pg.SortByDir_SORTBY_DESC:  "DESC",
		pg.SortByDir_SORTBY_USING: "USING",
	}
	sortNulls = map[pg.SortByNulls]string{
		pg.SortByNulls_SORTBY_NULLS_FIRST: "NULLS FIRST",
		pg.SortByNulls_SORTBY_NULLS_LAST:  "NULLS LAST",
	}

	// boolTests spells the IS [NOT] TRUE, FALSE and UNKNOWN tests.
	boolTests = map[pg.BoolTestType]string{
		pg.BoolTestType_IS_TRUE:        "IS TRUE",
		pg.BoolTestType_IS_NOT_TRUE:    "IS NOT TRUE",
		pg.BoolTestType_IS_FALSE:       "IS FALSE",
		pg.BoolTestType_IS_NOT_FALSE:   "IS NOT FALSE",
		pg.BoolTestType_IS_UNKNOWN:     "IS UNKNOWN",
		pg.BoolTestType_IS_NOT_UNKNOWN: "IS NOT UNKNOWN",
	}

	// sqlValueFuncs names the SQL value functions (CURRENT_DATE and the like),
	// with or without a precision.
	sqlValueFuncs = map[pg.SQLValueFunctionOp]string{
		pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE:        "current_date",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME:        "current_time",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N:      "current_time",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP:   "current_timestamp",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N: "current_timestamp",
		pg.SQLValueFunctionOp_SVFOP_LOCALTIME:           "localtime",
		pg.SQLValueFunctionOp_SVFOP_LOCALTIME_N:         "localtime",
		pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:      "localtimestamp",
		pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:    "localtimestamp",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:        "current_role",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_USER:        "current_user",
		pg.SQLValueFunctionOp_SVFOP_USER:                "user",
		pg.SQLValueFunctionOp_SVFOP_SESSION_USER:        "session_user",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:     "current_catalog",
		pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:      "current_schema",
	}

	// groupingSetKinds spells the kinds of grouping set.
	groupingSetKinds = map[pg.GroupingSetKind]string{
		pg.GroupingSetKind_GROUPING_SET_EMPTY:  "()",
		pg.GroupingSetKind_GROUPING_SET_SIMPLE: "(...)",
		pg.GroupingSetKind_GROUPING_SET_ROLLUP: "ROLLUP",
		pg.GroupingSetKind_GROUPING_SET_CUBE:   "CUBE",
		pg.GroupingSetKind_GROUPING_SET_SETS:   "GROUPING SETS",
	}
)
