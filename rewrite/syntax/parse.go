package syntax

// This file turns the parser's tree into the package's syntax tree
// (ast.go); whatever the tree does not model becomes an Unsupported node
// naming the construct.

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
var ParseHook func(sql string)

// Parsed is one parsed SQL text.
type Parsed struct {
	Select *Select
	// explain: EXPLAIN of the statement; verbose: EXPLAIN (VERBOSE).
	Explain, Verbose bool
	// Other names the statement when it is not a plain SELECT (or EXPLAIN
	// of one): "INSERT", "2 statements", ...
	Other string
	// multi: the text holds several statements.
	Multi bool
	// tree is the parser's tree of the text, for printing the statement
	// around its subqueries (outerText).
	tree *pg.ParseResult
	// approx: the statement calls APPROX_COUNT_DISTINCT somewhere (see
	// approxCall); exact is then the statement with each such call
	// counted exactly (exactText), or approxWhy says why it cannot be.
	Approx           bool
	Exact, ApproxWhy string
}

// parseTree is PostgreSQL's parse of sql; every parse of the package goes
// through it (for parseHook).
func parseTree(sql string) (*pg.ParseResult, error) {
	if ParseHook != nil {
		ParseHook(sql)
	}
	return pg.Parse(sql)
}

// Parse parses sql with PostgreSQL's parser. A syntax error is returned as
// *ParseError.
func Parse(sql string) (*Parsed, error) {
	tree, err := parseTree(sql)
	if err != nil {
		return nil, &ParseError{Msg: strings.TrimPrefix(err.Error(), "pg_query: ")}
	}
	stmts := tree.GetStmts()
	switch len(stmts) {
	case 0:
		return &Parsed{Other: "an empty statement"}, nil
	case 1:
	default:
		return &Parsed{Other: strconv.Itoa(len(stmts)) + " statements", Multi: true}, nil
	}
	n := stmts[0].GetStmt()
	out := &Parsed{tree: tree}
	// The exact text is made before convSelect, whose AST points into
	// the tree, and from a copy of it.
	if ContainsFold(sql, "approx_count_distinct") {
		out.Approx, out.Exact, out.ApproxWhy = exactText(tree)
	}
	other := func(what string) (*Parsed, error) {
		o := &Parsed{Other: what, Approx: out.Approx, ApproxWhy: out.ApproxWhy}
		if o.Approx && o.ApproxWhy == "" {
			o.ApproxWhy = "APPROX_COUNT_DISTINCT is answered in a SELECT statement (or EXPLAIN of one, with no option but VERBOSE), not in " + what
		}
		return o, nil
	}
	if ex := n.GetExplainStmt(); ex != nil {
		verbose, ok := explainOptions(ex.GetOptions())
		if !ok {
			return other("EXPLAIN with options other than VERBOSE")
		}
		out.Explain, out.Verbose = true, verbose
		n = ex.GetQuery()
	}
	s := n.GetSelectStmt()
	if s == nil {
		return other(stmtKind(n))
	}
	out.Select = convSelect(s)
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
	if err := CheckLimits(sql); err != nil {
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

// Check reports whether sql parses as PostgreSQL; the tests use it to
// check that every emitted SQL parses again.
func Check(sql string) error {
	if _, err := pg.Parse(sql); err != nil {
		return &ParseError{Msg: strings.TrimPrefix(err.Error(), "pg_query: ")}
	}
	return nil
}

// TreeDepth returns how deep the parser's tree for sql nests (JSON objects
// and arrays), for the fuzz test's check that the caps bound it.
func TreeDepth(sql string) (int, error) {
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

func convSelect(s *pg.SelectStmt) *Select {
	out := &Select{}
	switch {
	case s.GetOp() != pg.SetOperation_SETOP_NONE && s.GetOp() != pg.SetOperation_SET_OPERATION_UNDEFINED:
		out.Unsupported = "a set operation (UNION, INTERSECT, EXCEPT)"
		out.SetOp = map[pg.SetOperation]string{pg.SetOperation_SETOP_UNION: "UNION",
			pg.SetOperation_SETOP_INTERSECT: "INTERSECT", pg.SetOperation_SETOP_EXCEPT: "EXCEPT"}[s.GetOp()]
		out.SetAll = s.GetAll()
		out.Left, out.Right = convSelect(s.GetLarg()), convSelect(s.GetRarg())
		out.Left.raw = &rawSelect{get: s.GetLarg, set: func(x *pg.SelectStmt) { s.Larg = x }}
		out.Right.raw = &rawSelect{get: s.GetRarg, set: func(x *pg.SelectStmt) { s.Rarg = x }}
		if w := s.GetWithClause(); w != nil {
			out.With = convWith(w)
		}
		switch {
		case s.GetWithClause() != nil:
			out.SetExtra = "a WITH clause"
		case len(s.GetSortClause()) > 0:
			out.SetExtra = "ORDER BY"
		case s.GetLimitCount() != nil || s.GetLimitOffset() != nil:
			out.SetExtra = "LIMIT or OFFSET"
		case len(s.GetLockingClause()) > 0:
			out.SetExtra = "a locking clause"
		}
		return out
	case s.GetWithClause() != nil:
		out.Unsupported = "a WITH clause"
		out.With = convWith(s.GetWithClause())
	}
	switch {
	case len(s.GetValuesLists()) > 0:
		out.Unsupported = "VALUES"
		if len(s.GetSortClause()) > 0 || s.GetLimitCount() != nil || s.GetLimitOffset() != nil || s.GetWithClause() != nil || len(s.GetLockingClause()) > 0 {
			// Rows the list would not return as written.
			return out
		}
		for _, row := range s.GetValuesLists() {
			out.Values = append(out.Values, convList(row.GetList().GetItems()))
		}
		return out
	case s.GetIntoClause() != nil:
		out.Unsupported = "SELECT INTO"
		return out
	case len(s.GetLockingClause()) > 0:
		out.Unsupported = "a locking clause (FOR UPDATE/SHARE)"
		return out
	case len(s.GetWindowClause()) > 0:
		out.Unsupported = "a WINDOW clause"
		return out
	case s.GetGroupDistinct():
		out.Unsupported = "GROUP BY DISTINCT"
		return out
	case s.GetLimitOption() == pg.LimitOption_LIMIT_OPTION_WITH_TIES:
		out.Unsupported = "FETCH ... WITH TIES"
		return out
	}
	if dc := s.GetDistinctClause(); len(dc) > 0 {
		if len(dc) == 1 && dc[0].GetNode() == nil {
			out.Distinct = true
		} else {
			out.Unsupported = "DISTINCT ON"
			return out
		}
	}
	for _, t := range s.GetTargetList() {
		rt := t.GetResTarget()
		if rt == nil {
			out.Unsupported = "an unexpected select-list item"
			return out
		}
		if cr := rt.GetVal().GetColumnRef(); cr != nil && isStarRef(cr) {
			out.Targets = append(out.Targets, Target{Star: true})
			continue
		}
		out.Targets = append(out.Targets, Target{Name: rt.GetName(), Expr: conv(rt.GetVal())})
	}
	for _, f := range s.GetFromClause() {
		out.From = append(out.From, convFrom(f))
	}
	out.Where = convOptional(s.GetWhereClause())
	for _, g := range s.GetGroupClause() {
		if gs := g.GetGroupingSet(); gs != nil {
			// Only the star-join planner answers these (starjoin.go),
			// regrouping the fact table's rows: every other planner
			// refuses the statement.
			if out.Unsupported == "" { // a WITH clause stays the reason
				out.Unsupported = GroupingSetsWhat
			}
			out.GroupBy = append(out.GroupBy, convGroupingSet(gs))
			continue
		}
		out.GroupBy = append(out.GroupBy, conv(g))
	}
	out.Having = convOptional(s.GetHavingClause())
	for _, o := range s.GetSortClause() {
		it, ok := convSortBy(o)
		if !ok {
			out.Unsupported = "an unexpected ORDER BY item"
			return out
		}
		out.OrderBy = append(out.OrderBy, it)
	}
	out.Limit = convOptional(s.GetLimitCount())
	out.Offset = convOptional(s.GetLimitOffset())
	return out
}

// convSortBy converts one ORDER BY item.
func convSortBy(o *pg.Node) (SortItem, bool) {
	sb := o.GetSortBy()
	if sb == nil {
		return SortItem{}, false
	}
	return SortItem{Expr: conv(sb.GetNode()), Dir: sortDirs[sb.GetSortbyDir()], Nulls: sortNulls[sb.GetSortbyNulls()]}, true
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

func convFrom(n *pg.Node) FromItem {
	rv := n.GetRangeVar()
	switch {
	case rv != nil:
		fi := FromItem{Schema: rv.GetSchemaname(), Name: rv.GetRelname(), Only: !rv.GetInh()}
		if rv.GetCatalogname() != "" {
			fi.Unsupported = "a database-qualified table name"
		}
		if a := rv.GetAlias(); a != nil {
			fi.Alias = a.GetAliasname()
			if len(a.GetColnames()) > 0 {
				fi.Unsupported = "a table alias with column aliases"
			}
		}
		return fi
	case n.GetJoinExpr() != nil:
		j := n.GetJoinExpr()
		return FromItem{Unsupported: "a JOIN", Join: &Join{
			Type: joinTypes[j.GetJointype()],
			Left: convFrom(j.GetLarg()), Right: convFrom(j.GetRarg()), On: convOptional(j.GetQuals()),
			Plain: !j.GetIsNatural() && len(j.GetUsingClause()) == 0 && j.GetAlias() == nil,
		}}
	case n.GetRangeSubselect() != nil:
		rs := n.GetRangeSubselect()
		fi := FromItem{Unsupported: "a subquery in FROM"}
		if sel := rs.GetSubquery().GetSelectStmt(); sel != nil && !rs.GetLateral() {
			fi.Query = convSelect(sel)
			fi.Query.raw = nodeSlot(rs.GetSubquery())
			if a := rs.GetAlias(); a != nil {
				fi.Alias = a.GetAliasname()
				fi.ColAliases = len(a.GetColnames()) > 0
				fi.AliasCols, _ = strs(a.GetColnames())
			}
		}
		return fi
	case n.GetRangeFunction() != nil:
		return convFromFunction(n.GetRangeFunction())
	case n.GetRangeTableSample() != nil:
		return FromItem{Unsupported: "TABLESAMPLE"}
	}
	return FromItem{Unsupported: "an unsupported FROM item"}
}

// convFromFunction converts a function in FROM. It stays unsupported
// (what reads a FROM item's rows reads only tables and subqueries); a
// plain call of one function (not LATERAL, WITH ORDINALITY or ROWS FROM,
// no column definition list) keeps its call, alias and column aliases for
// the planners that read it as a list of values.
func convFromFunction(rf *pg.RangeFunction) FromItem {
	fi := FromItem{Unsupported: "a function in FROM"}
	if rf.GetLateral() || rf.GetOrdinality() || rf.GetIsRowsfrom() || len(rf.GetColdeflist()) > 0 || len(rf.GetFunctions()) != 1 {
		return fi
	}
	pair := rf.GetFunctions()[0].GetList().GetItems()
	if len(pair) == 0 || len(pair) > 1 && pair[1] != nil && len(pair[1].GetList().GetItems()) > 0 {
		return fi
	}
	f, ok := conv(pair[0]).(*FuncCall)
	if !ok {
		return fi
	}
	fi.Func = f
	if a := rf.GetAlias(); a != nil {
		fi.Alias = a.GetAliasname()
		cols, ok := strs(a.GetColnames())
		if !ok {
			fi.Func = nil
			return fi
		}
		fi.FuncCols = cols
	}
	return fi
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
func convOptional(n *pg.Node) Expr {
	if n == nil {
		return nil
	}
	return conv(n)
}

func convList(ns []*pg.Node) []Expr {
	out := make([]Expr, len(ns))
	for i, n := range ns {
		out[i] = conv(n)
	}
	return out
}

// conv converts one expression node.
func conv(n *pg.Node) Expr {
	if n == nil {
		return &Unsupported{What: "an empty expression"}
	}
	switch v := n.GetNode().(type) {
	case *pg.Node_ColumnRef:
		parts, ok := columnParts(v.ColumnRef)
		switch {
		case !ok:
			return &Unsupported{What: "an unusual column reference"}
		case len(parts) == 0:
			return &Unsupported{What: "an empty column reference"}
		}
		return &ColRef{Parts: parts}
	case *pg.Node_AConst:
		return convConst(v.AConst)
	case *pg.Node_ParamRef:
		return &Param{N: int(v.ParamRef.GetNumber())}
	case *pg.Node_FuncCall:
		f := v.FuncCall
		name, ok := strs(f.GetFuncname())
		fn := ""
		if ok && len(name) > 0 {
			fn = strings.ToLower(name[len(name)-1])
		}
		switch {
		case f.GetOver() != nil:
			return &Unsupported{What: "a window function", Fn: fn, Window: convWindow(f, name, ok)}
		case len(f.GetAggOrder()) > 0:
			return &Unsupported{What: "an ordered aggregate", Fn: fn}
		case f.GetAggWithinGroup():
			return &Unsupported{What: "WITHIN GROUP", Fn: fn}
		case f.GetFuncVariadic():
			return &Unsupported{What: "a VARIADIC call", Fn: fn}
		}
		if !ok || len(name) == 0 {
			return &Unsupported{What: "an unusual function name"}
		}
		call := &FuncCall{
			Name:      name,
			Args:      convList(f.GetArgs()),
			Distinct:  f.GetAggDistinct(),
			Star:      f.GetAggStar(),
			sqlSyntax: f.GetFuncformat() == pg.CoercionForm_COERCE_SQL_SYNTAX,
		}
		call.Filter = convOptional(f.GetAggFilter())
		return call
	case *pg.Node_AExpr:
		return convAExpr(v.AExpr)
	case *pg.Node_BoolExpr:
		b := v.BoolExpr
		args := convList(b.GetArgs())
		switch b.GetBoolop() {
		case pg.BoolExprType_AND_EXPR:
			return &BoolExpr{Op: "AND", Args: args}
		case pg.BoolExprType_OR_EXPR:
			return &BoolExpr{Op: "OR", Args: args}
		case pg.BoolExprType_NOT_EXPR:
			if len(args) == 1 {
				return &BoolExpr{Op: "NOT", Args: args}
			}
		}
		return &Unsupported{What: "an unusual boolean expression"}
	case *pg.Node_TypeCast:
		if c := convIntervalField(v.TypeCast); c != nil {
			return c
		}
		t := convType(v.TypeCast.GetTypeName())
		if t == nil {
			return &Unsupported{What: "a cast to an unusual type"}
		}
		return &Cast{Arg: conv(v.TypeCast.GetArg()), Type: t}
	case *pg.Node_NullTest:
		return &NullTest{Arg: conv(v.NullTest.GetArg()), Not: v.NullTest.GetNulltesttype() == pg.NullTestType_IS_NOT_NULL}
	case *pg.Node_BooleanTest:
		t, ok := boolTests[v.BooleanTest.GetBooltesttype()]
		if !ok {
			return &Unsupported{What: "an unusual boolean test"}
		}
		return &BoolTest{Arg: conv(v.BooleanTest.GetArg()), test: t}
	case *pg.Node_CaseExpr:
		c := v.CaseExpr
		out := &Case{}
		if c.GetArg() != nil {
			out.Arg = conv(c.GetArg())
		}
		for _, w := range c.GetArgs() {
			cw := w.GetCaseWhen()
			if cw == nil {
				return &Unsupported{What: "an unusual CASE"}
			}
			out.Whens = append(out.Whens, When{Cond: conv(cw.GetExpr()), Result: conv(cw.GetResult())})
		}
		out.Else = convOptional(c.GetDefresult())
		return out
	case *pg.Node_CoalesceExpr:
		return &VarFunc{Name: "coalesce", Args: convList(v.CoalesceExpr.GetArgs()), mod: -1}
	case *pg.Node_MinMaxExpr:
		name := "greatest"
		if v.MinMaxExpr.GetOp() == pg.MinMaxOp_IS_LEAST {
			name = "least"
		}
		return &VarFunc{Name: name, Args: convList(v.MinMaxExpr.GetArgs()), mod: -1}
	case *pg.Node_SqlvalueFunction:
		return convSQLValue(v.SqlvalueFunction)
	case *pg.Node_AArrayExpr:
		return &Array{Elems: convList(v.AArrayExpr.GetElements())}
	case *pg.Node_SubLink:
		return convSubquery(v.SubLink)
	case *pg.Node_RowExpr:
		return &Unsupported{What: "a row constructor"}
	case *pg.Node_CollateClause:
		return &Unsupported{What: "COLLATE"}
	case *pg.Node_AIndirection:
		return &Unsupported{What: "a subscript or field selection"}
	case *pg.Node_GroupingFunc:
		// An aggregate to the planners (they refuse it), evaluated by
		// PostgreSQL over the arm's keys in a star join.
		return &FuncCall{Name: []string{"grouping"}, Args: convList(v.GroupingFunc.GetArgs()), sqlSyntax: true}
	}
	return &Unsupported{What: "an unsupported expression"}
}

// convSubquery converts a subquery in an expression: unsupported, with
// the subquery (link) when the rewriter reads its form.
func convSubquery(sl *pg.SubLink) Expr {
	return &Unsupported{What: "a subquery", Link: convSubLink(sl)}
}

func convConst(c *pg.A_Const) Expr {
	if c.GetIsnull() {
		return &Const{Type: "null", Val: "NULL"}
	}
	switch v := c.GetVal().(type) {
	case *pg.A_Const_Ival:
		return &Const{Type: "int", Val: strconv.FormatInt(int64(v.Ival.GetIval()), 10)}
	case *pg.A_Const_Fval:
		return &Const{Type: "float", Val: v.Fval.GetFval()}
	case *pg.A_Const_Sval:
		return &Const{Type: "str", Val: v.Sval.GetSval()}
	case *pg.A_Const_Boolval:
		return &Const{Type: "bool", Val: strconv.FormatBool(v.Boolval.GetBoolval())}
	case *pg.A_Const_Bsval:
		return &Const{Type: "bits", Val: v.Bsval.GetBsval()}
	}
	return &Unsupported{What: "an unusual constant"}
}

// intervalFields are the one-field masks of INTERVAL '...' FIELD (the
// INTERVAL_MASK bits of PostgreSQL's datetime.h), by the unit they name.
var intervalFields = map[int32]string{4: "year", 2: "month", 8: "day", 1024: "hour", 2048: "minute", 4096: "second"}

// convIntervalField reads INTERVAL 'n' DAY (and YEAR, MONTH, HOUR, MINUTE,
// SECOND) with n a whole number, as some SQL generators write intervals,
// as the cast of 'n day' to interval it equals; nil for any other cast.
func convIntervalField(c *pg.TypeCast) Expr {
	t := c.GetTypeName()
	names, ok := strs(t.GetNames())
	if !ok || len(names) != 2 || names[0] != "pg_catalog" || names[1] != "interval" || len(t.GetTypmods()) != 1 ||
		t.GetSetof() || len(t.GetArrayBounds()) > 0 {
		return nil
	}
	unit, ok := intervalFields[t.GetTypmods()[0].GetAConst().GetIval().GetIval()]
	n := c.GetArg().GetAConst().GetSval().GetSval()
	if !ok || !wholeNumber(n) {
		return nil
	}
	return &Cast{Arg: &Const{Type: "str", Val: n + " " + unit}, Type: &TypeName{Names: names}}
}

// wholeNumber reports whether s is an optionally signed decimal integer of
// at most nine digits.
func wholeNumber(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func convType(t *pg.TypeName) *TypeName {
	if t == nil || t.GetSetof() || t.GetPctType() {
		return nil
	}
	names, ok := strs(t.GetNames())
	if !ok || len(names) == 0 {
		return nil
	}
	out := &TypeName{Names: names, Array: len(t.GetArrayBounds())}
	if len(t.GetTypmods()) > 0 {
		if len(names) == 2 && names[0] == "pg_catalog" && names[1] == "interval" {
			// INTERVAL '1' DAY: the typmods are a field mask, not
			// printable as type modifiers.
			return nil
		}
		for _, m := range t.GetTypmods() {
			e := conv(m)
			if c, ok := e.(*Const); !ok || c.Type != "int" {
				return nil
			}
			out.Mods = append(out.Mods, e)
		}
	}
	for _, b := range t.GetArrayBounds() {
		if iv := b.GetInteger(); iv == nil || iv.GetIval() != -1 {
			return nil
		}
	}
	return out
}

func convSQLValue(f *pg.SQLValueFunction) Expr {
	name, ok := sqlValueFuncs[f.GetOp()]
	if !ok {
		return &Unsupported{What: "an unusual SQL value function"}
	}
	mod := -1
	switch f.GetOp() {
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N,
		pg.SQLValueFunctionOp_SVFOP_LOCALTIME_N, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
		mod = int(f.GetTypmod())
	}
	return &VarFunc{Name: name, mod: mod}
}

func convAExpr(a *pg.A_Expr) Expr {
	name, ok := strs(a.GetName())
	if !ok || len(name) == 0 || len(name) > 2 {
		return &Unsupported{What: "an unusual operator"}
	}
	op := name[len(name)-1]
	schema := ""
	if len(name) == 2 {
		schema = name[0]
	}
	l := func() Expr {
		if a.GetLexpr() == nil {
			return nil
		}
		return conv(a.GetLexpr())
	}
	switch a.GetKind() {
	case pg.A_Expr_Kind_AEXPR_OP:
		if a.GetRexpr() == nil {
			return &Unsupported{What: "a postfix operator"}
		}
		return &OpExpr{Schema: schema, Op: op, Left: l(), Right: conv(a.GetRexpr())}
	case pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
		if schema != "" || a.GetLexpr() == nil {
			return &Unsupported{What: "an unusual ANY/ALL"}
		}
		fn := "ANY"
		if a.GetKind() == pg.A_Expr_Kind_AEXPR_OP_ALL {
			fn = "ALL"
		}
		return &KeywordExpr{Left: l(), Right: conv(a.GetRexpr()), Kw: op, Fn: fn}
	case pg.A_Expr_Kind_AEXPR_DISTINCT:
		return &KeywordExpr{Left: l(), Right: conv(a.GetRexpr()), Kw: "IS DISTINCT FROM"}
	case pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		return &KeywordExpr{Left: l(), Right: conv(a.GetRexpr()), Kw: "IS NOT DISTINCT FROM"}
	case pg.A_Expr_Kind_AEXPR_NULLIF:
		return &KeywordExpr{Left: l(), Right: conv(a.GetRexpr()), Fn: "NULLIF"}
	case pg.A_Expr_Kind_AEXPR_IN:
		list := a.GetRexpr().GetList()
		if list == nil {
			return &Unsupported{What: "an unusual IN"}
		}
		return &In{Arg: l(), List: convList(list.GetItems()), Not: op == "<>"}
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		kw := map[string]string{"~~": "LIKE", "!~~": "NOT LIKE", "~~*": "ILIKE", "!~~*": "NOT ILIKE"}[op]
		if kw == "" || a.GetRexpr().GetFuncCall() != nil {
			// LIKE ... ESCAPE becomes a like_escape() call: fine, but
			// keep the set small.
			if kw == "" {
				return &Unsupported{What: "an unusual LIKE"}
			}
		}
		return &KeywordExpr{Left: l(), Right: conv(a.GetRexpr()), Kw: kw}
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		list := a.GetRexpr().GetList()
		if list == nil || len(list.GetItems()) != 2 {
			return &Unsupported{What: "an unusual BETWEEN"}
		}
		k := a.GetKind()
		return &Between{
			Arg: l(), Lo: conv(list.GetItems()[0]), Hi: conv(list.GetItems()[1]),
			Not:       k == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN || k == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM,
			Symmetric: k == pg.A_Expr_Kind_AEXPR_BETWEEN_SYM || k == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM,
		}
	case pg.A_Expr_Kind_AEXPR_SIMILAR:
		return &Unsupported{What: "SIMILAR TO"}
	}
	return &Unsupported{What: "an unusual operator expression"}
}

// convWith converts a WITH clause: every name (a table name in the
// statement may mean one), and the body of each that is a SELECT, with
// where it sits.
func convWith(w *pg.WithClause) *With {
	out := &With{Recursive: w.GetRecursive(), Plain: true}
	for _, n := range w.GetCtes() {
		c := n.GetCommonTableExpr()
		if c == nil {
			out.Plain = false
			continue
		}
		out.Names = append(out.Names, c.GetCtename())
		sel := c.GetCtequery().GetSelectStmt()
		if sel == nil {
			out.Modifying, out.Plain = true, false
			continue
		}
		if len(c.GetAliascolnames()) > 0 || c.GetSearchClause() != nil || c.GetCycleClause() != nil {
			out.Plain = false
		}
		body := convSelect(sel)
		body.raw = nodeSlot(c.GetCtequery())
		out.Bodies = append(out.Bodies, body)
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

// ArmMarker is the text outerText prints in place of subquery i.
func ArmMarker(i int) string { return "pgsketch_subquery_" + strconv.Itoa(i) }

// OuterText prints the parsed statement with each of subs (subqueries of
// it, found by convSelect) replaced: the pieces around them, len(subs)+1,
// in order. The text is the parser's deparse of the tree, which PostgreSQL
// reads as the same statement. Each subquery stands where a parenthesized
// SELECT may.
func (p *Parsed) OuterText(subs []*Select) ([]string, error) {
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
		m, err := pg.Parse("SELECT '" + ArmMarker(i) + "'")
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
		m := "SELECT '" + ArmMarker(i) + "'"
		at := strings.Index(text, m)
		if at < 0 || strings.Count(text, m) != 1 {
			return nil, errors.New("the printed statement does not hold its subquery once")
		}
		pieces = append(pieces, text[:at])
		text = text[at+len(m):]
	}
	return append(pieces, text), nil
}

// GroupingSetsWhat is the unsupported construct of a GROUP BY with
// grouping sets.
const GroupingSetsWhat = "GROUPING SETS, ROLLUP or CUBE"

// convGroupingSet converts GROUPING SETS, ROLLUP or CUBE, or one set of
// them.
func convGroupingSet(gs *pg.GroupingSet) Expr {
	kind, ok := groupingSetKinds[gs.GetKind()]
	if !ok {
		return &Unsupported{What: "an unknown grouping set"}
	}
	out := &GroupingSet{kind: kind}
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
func convWindow(f *pg.FuncCall, name []string, named bool) *Window {
	w := f.GetOver()
	if !named || len(name) == 0 || w.GetName() != "" || w.GetRefname() != "" || len(f.GetAggOrder()) > 0 ||
		f.GetAggWithinGroup() || f.GetFuncVariadic() || f.GetAggDistinct() {
		return nil
	}
	call := &FuncCall{Name: name, Args: convList(f.GetArgs()), Star: f.GetAggStar()}
	call.Filter = convOptional(f.GetAggFilter())
	out := &Window{Func: call, partition: convList(w.GetPartitionClause()), frame: w.GetFrameOptions()}
	for _, o := range w.GetOrderClause() {
		it, ok := convSortBy(o)
		if !ok || it.Dir == "USING" {
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
func convSubLink(sl *pg.SubLink) *SubLink {
	sel := sl.GetSubselect().GetSelectStmt()
	if sel == nil {
		return nil
	}
	l := &SubLink{}
	switch sl.GetSubLinkType() {
	case pg.SubLinkType_EXISTS_SUBLINK:
		l.Form, l.name = "EXISTS", "exists"
	case pg.SubLinkType_ANY_SUBLINK, pg.SubLinkType_ALL_SUBLINK:
		op, ok := strs(sl.GetOperName())
		switch {
		case !ok || len(op) > 1 || sl.GetTestexpr() == nil:
			return nil
		case len(op) == 0:
			op = []string{"="} // x IN (SELECT ...)
		}
		l.Form, l.Op, l.Test = "ANY", op[0], conv(sl.GetTestexpr())
		if sl.GetSubLinkType() == pg.SubLinkType_ALL_SUBLINK {
			l.Form = "ALL"
		}
	case pg.SubLinkType_EXPR_SUBLINK:
		l.Form = "EXPR"
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
		l.Form, l.name = "ARRAY", "array"
	default:
		return nil
	}
	text, err := pg.Deparse(&pg.ParseResult{Version: treeVersion(), Stmts: []*pg.RawStmt{{Stmt: sl.GetSubselect()}}})
	if err != nil {
		return nil
	}
	l.text = text
	l.Select = convSelect(sel)
	readSubquery(sl.GetSubselect().ProtoReflect(), l)
	return l
}

// readSubquery fills l's locals, free references, aggregates' free
// references, functions and other constructs from the subquery's tree.
func readSubquery(sub protoreflect.Message, l *SubLink) {
	l.Locals = map[string]bool{}
	eachMessage(sub, func(m proto.Message) bool {
		switch n := m.(type) {
		case *pg.RangeVar:
			if a := n.GetAlias(); a != nil {
				l.Locals[a.GetAliasname()] = true
			} else {
				l.Locals[n.GetRelname()] = true
			}
		case *pg.RangeSubselect:
			l.Locals[n.GetAlias().GetAliasname()] = true
		case *pg.RangeFunction:
			l.Locals[n.GetAlias().GetAliasname()] = true
		case *pg.JoinExpr:
			l.Locals[n.GetAlias().GetAliasname()] = true
		case *pg.CommonTableExpr:
			l.Locals[n.GetCtename()] = true
		}
		return true
	})
	delete(l.Locals, "")
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
				l.Other = "an unusual column reference"
			case len(parts) == 1 && parts[0] == "*":
				// The subquery's own FROM items' columns.
			case len(parts) >= 2 && l.Locals[parts[len(parts)-2]]:
			default:
				out = append(out, parts)
			}
			return false
		})
		return out
	}
	l.Free = free(sub)
	eachMessage(sub, func(m proto.Message) bool {
		switch n := m.(type) {
		case *pg.FuncCall:
			name, ok := strs(n.GetFuncname())
			if !ok {
				l.Other = "an unusual function name"
				return false
			}
			l.Calls = append(l.Calls, SubCall{Name: name, Free: free(n.ProtoReflect()), Over: n.GetOver() != nil})
		case *pg.A_Expr:
			switch n.GetKind() {
			case pg.A_Expr_Kind_AEXPR_OP, pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
				name, ok := strs(n.GetName())
				if !ok {
					l.Other = "an unusual operator"
					return false
				}
				l.Ops = append(l.Ops, name)
			}
		case *pg.GroupingFunc:
			l.Other = "GROUPING() inside a subquery"
		case *pg.SelectStmt:
			if len(n.GetLockingClause()) > 0 {
				l.Other = "a subquery that locks rows"
			}
			if n.GetIntoClause() != nil {
				l.Other = "SELECT INTO inside a subquery"
			}
		case *pg.RangeTableSample:
			// Sampled once per arm row, not once per row of the table.
			l.Other = "TABLESAMPLE inside a subquery"
		case *pg.InsertStmt, *pg.UpdateStmt, *pg.DeleteStmt, *pg.MergeStmt:
			l.Other = "a data-modifying statement inside a subquery"
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
