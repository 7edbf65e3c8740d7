package rewrite

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pgsketch/pgsketch/catalog"
	"github.com/pgsketch/pgsketch/rewrite/plan"
	"github.com/pgsketch/pgsketch/rewrite/syntax"
)

// Result is what Rewrite decides for one SQL text: a Plan, or the reason the
// text passes through untouched.
type Result struct {
	Plan Plan
	// Reason says why the text passes through; empty when Plan is set.
	Reason string
	// Err is set when the text could not be analysed at all: a
	// *syntax.ParseError or a *LimitError. Reason says so too.
	Err error
	// ApproxUnanswered is set on a passthrough whose statement calls
	// APPROX_COUNT_DISTINCT (see Unsupported), or whose text mentions it
	// and could not be parsed: sent to PostgreSQL as it is, it fails with
	// "function approx_count_distinct does not exist" (docs/design.md §3 says
	// never that error).
	ApproxUnanswered bool
	// Unsupported is set on a passthrough whose statement calls
	// APPROX_COUNT_DISTINCT in a form pgsketch neither answers from a
	// rollup nor counts exactly (a window function, *, two arguments, a
	// statement other than SELECT): it says which, for the error the
	// client is to get instead of PostgreSQL's "function does not exist".
	Unsupported string
	// Multi is set when the text holds several statements: a caller may
	// Split it and plan each.
	Multi bool
	// ZoneParams, on a passthrough or an exact substitute, are the
	// parameters the statement uses as a time zone that Session.Zones
	// holds no value for: planned again with their bound values, the
	// statement may be answered from a rollup.
	ZoneParams []int
}

// panicHook, when set (by tests), is called at the start of planning.
var panicHook func(sql string)

// Rewrite plans sql against the rollups in snap for a session with settings
// sess. It never panics: a panic inside the planner becomes a passthrough
// with reason "internal error: ...".
func Rewrite(sql string, snap *catalog.Snapshot, sess Session) (res Result) {
	if !syntax.Prefilter(sql) {
		return Result{Reason: "no COUNT(DISTINCT ...), APPROX_COUNT_DISTINCT, count over INTERSECT or EXCEPT, count with GROUP BY and LIMIT or HAVING, or pgsketch in the text"}
	}
	// calls: the text may call APPROX_COUNT_DISTINCT; once parsed, the
	// parser's tree says.
	calls := true
	defer func() {
		if v := recover(); v != nil {
			res = Result{Reason: fmt.Sprintf("internal error: %v", v)}
		}
		if res.Plan == nil && calls && syntax.ContainsFold(sql, "approx_count_distinct") {
			res.ApproxUnanswered = true
			res.Reason += "; APPROX_COUNT_DISTINCT is left unanswered (PostgreSQL has no such function)"
		}
	}()
	if panicHook != nil {
		panicHook(sql)
	}
	if !shippedAbbreviationSets[sess.Abbreviations] {
		return Result{Reason: "timezone_abbreviations is " + strconv.Quote(sess.Abbreviations) +
			", not a set PostgreSQL ships (Default, Australia, India), whose abbreviations pgsketch knows"}
	}
	if r, over := overLimits(sql); over {
		return r
	}
	p, err := syntax.Parse(sql)
	if err != nil {
		return Result{Reason: "does not parse: " + err.(*syntax.ParseError).Msg, Err: err}
	}
	if p.Multi {
		return Result{Reason: "the text holds " + p.Other, Multi: true}
	}
	calls = p.Approx
	if p.Other != "" {
		return Result{Reason: "statement is " + p.Other + ", not a single SELECT", Unsupported: p.ApproxWhy}
	}
	caseFilters(p.Select)
	// Every $n of the text, also where the AST does not reach (a LATERAL
	// subquery, VALUES, a window's frame), that the statement may bind.
	params := maxParam(p.Select)
	if ps := paramsIn(sql); len(ps) > 0 {
		params = max(params, ps[len(ps)-1])
	}
	b, reason := tryPlanners(planners, p, snap, env{Session: sess, params: params})
	if b == nil && p.Approx {
		// No planner answered, nor could reprint the statement with its
		// APPROX_COUNT_DISTINCT counted exactly: the parser's tree can
		// (a join, a subquery, a set operation, FILTER), or says why not.
		if p.ApproxWhy != "" {
			return Result{Reason: reason, Unsupported: p.ApproxWhy}
		}
		b = &built{Plan: &plan.Substitute{SQL: p.Exact,
			Head: plan.Head{Notice: "pgsketch: APPROX_COUNT_DISTINCT counted exactly: " + reason}}}
	} else if sub := b.substitute(); sub != nil && p.Explain {
		// The statement the substitute runs is the EXPLAIN the client
		// asked for (the tree's text has it already).
		sub.SQL = "EXPLAIN " + sub.SQL
		if p.Verbose {
			sub.SQL = "EXPLAIN (VERBOSE) " + strings.TrimPrefix(sub.SQL, "EXPLAIN ")
		}
	}
	if b == nil {
		return Result{Reason: reason, ZoneParams: zoneParams(p.Select, sess)}
	}
	b.Header().Explain, b.Header().Verbose = p.Explain, p.Verbose
	finish(b.Plan, params, quotesRelativeTime(sql), snap, sess)
	res = Result{Plan: b.Plan}
	if b.substitute() != nil {
		res.ZoneParams = zoneParams(p.Select, sess)
	}
	return res
}

// env is what planning a statement needs besides the catalog: the
// session's settings, and the highest $n the statement uses (a plan's
// statements bind what they add after it).
type env struct {
	Session
	params int
}

// overLimits checks sql against the caps on its size, nesting and tokens,
// before the parser sees it.
func overLimits(sql string) (Result, bool) {
	if err := syntax.CheckLimits(sql); err != nil {
		return Result{Reason: err.Reason(), Err: err}, true
	}
	return Result{}, false
}

// finish completes a plan the planner made for a statement whose highest
// parameter is $params: the session, the merge strategy, the parameters
// each statement binds, and whether its statements must be parsed anew
// each time, in the plan and its arms.
func finish(pl plan.Plan, params int, reparse bool, snap *catalog.Snapshot, sess Session) {
	h := pl.Header()
	h.Params, h.Session, h.Reparse = params, sess, reparse
	if r, ok := snap.Rollup(h.Rollup); ok && r.Distributed {
		h.OwnSnapshot = true
	}
	if t, ok := pl.(*plan.TopK); ok {
		t.ShapeParams = paramsIn(t.ShapeSQL)
	}
	setting, ok := ParseMerge(string(sess.Merge))
	if !ok {
		setting = MergeAuto // the executor refuses the setting
	}
	for _, r := range pl.Fetches() {
		if plan.Plan(r) != pl {
			r.Columns = nil // an arm's groups are not the answer: the plan around it shapes them
		}
		r.Params, r.Session, r.Reparse = params, sess, reparse
		if r.ShardLog != "" {
			h.OwnSnapshot = true
		}
		chooseMerge(r, snap.HLL(), setting)
		r.FetchParams, r.ExactParams, r.ShapeParams = paramsIn(r.FetchSQL), paramsIn(r.ExactSQL), paramsIn(r.ShapeSQL)
		// The fetch binds the lifted literals after the client's.
		r.FetchParams = slices.DeleteFunc(r.FetchParams, func(n int) bool { return n > params })
		if b := r.BaseRead; b != nil {
			b.Params = slices.DeleteFunc(paramsIn(b.SQL), func(n int) bool { return n > params })
		}
	}
}

// paramsIn lists the $n parameters a statement references, ascending,
// without repeats.
func paramsIn(sql string) []int {
	if sql == "" {
		return nil
	}
	ps := syntax.Scan(sql, int(^uint(0)>>1), int(^uint(0)>>1), true).Params
	sort.Ints(ps)
	var out []int
	for i, n := range ps {
		if i == 0 || n != ps[i-1] {
			out = append(out, n)
		}
	}
	return out
}

func maxParam(s *syntax.Select) int {
	top := 0
	walkStatement(s, func(x syntax.Expr) {
		if x, ok := x.(*syntax.Param); ok {
			top = max(top, x.N)
		}
	})
	return top
}

// walkStatement calls f for every expression of s, and of the statements
// that bind the same parameters: a set operation's, subqueries' in FROM
// and in expressions, a WITH clause's.
func walkStatement(s *syntax.Select, f func(syntax.Expr)) {
	subs := []*syntax.Select{s.Left, s.Right}
	visit := func(e syntax.Expr) {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if u, ok := x.(*syntax.Unsupported); ok && u.Link != nil {
				subs = append(subs, u.Link.Select)
			}
			f(x)
			return true
		})
	}
	s.EachExpr(visit)
	s.EachFrom(func(fi syntax.FromItem) {
		subs = append(subs, fi.Query)
		if fi.Join != nil {
			visit(fi.Join.On)
		}
	})
	if s.With != nil {
		subs = append(subs, s.With.Bodies...)
	}
	for _, sub := range subs {
		if sub != nil {
			walkStatement(sub, f)
		}
	}
}

// zoneParams are the $n that s uses as a time zone (timezone's first
// argument, date_trunc's third) and sess holds no value for, in order.
func zoneParams(s *syntax.Select, sess Session) []int {
	var out []int
	walkStatement(s, func(x syntax.Expr) {
		f, ok := x.(*syntax.FuncCall)
		if !ok {
			return
		}
		var arg syntax.Expr
		switch name, _ := f.Builtin(); {
		case name == "timezone" && len(f.Args) == 2:
			arg = f.Args[0]
		case name == "date_trunc" && len(f.Args) == 3:
			arg = f.Args[2]
		}
		if p, ok := arg.(*syntax.Param); ok {
			if _, bound := sess.Zone(p.N); !bound {
				out = append(out, p.N)
			}
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// planTable matches a SELECT of one table against the rollups of that
// table, answering its distinct counts with sketches of the given kind
// (HLL; Theta for an overlap's or a retention grid's sets). Every planner
// answers the parts it reads from one table through it.
func planTable(s *syntax.Select, sketch catalog.Aggregate, snap *catalog.Snapshot, sess env) (*built, string) {
	if s.Unsupported != "" {
		return nil, "query uses " + s.Unsupported
	}
	// Find the aggregates first: a query without an approximable one is
	// not the rewriter's business, whatever else it does.
	acd, cd, bad := findAggs(s)
	if !acd && !cd && bad != "" {
		return nil, "query uses " + bad
	}
	if !acd && !cd {
		return nil, "no COUNT(DISTINCT ...) or APPROX_COUNT_DISTINCT(...) aggregate in the query"
	}
	if !acd && !sess.Approx {
		return nil, "pgsketch.approx is off and the query has no APPROX_COUNT_DISTINCT"
	}
	// fallback is the plan when no rollup answers: for APPROX_COUNT_DISTINCT
	// the query with exact counts instead (a Substitute), else none.
	fallback := func(reason string) (*built, string) {
		if !acd {
			return nil, reason
		}
		p, why := substitutePlan(s, reason)
		if p == nil {
			return nil, why
		}
		return &built{Plan: p}, why
	}
	if bad != "" {
		return fallback("query uses " + bad)
	}
	if why := unanswerable(s, sess); why != "" {
		return fallback(why)
	}
	fi := s.From[0]
	table, rollups := resolveTable(fi, snap, sess)
	if len(rollups) == 0 {
		return fallback("no rollup reads table " + table)
	}
	best, why := bestRollup(rollups, func(r *catalog.Rollup) (*built, string) { return matchRollup(s, sketch, fi, r, sess) })
	if best == nil {
		return fallback(why)
	}
	best.Header().Guard = guard(fi, best.Header().Source)
	return best, ""
}

// guard is the query a plan's Guard states for FROM item fi answered from
// a rollup of source (guardCond, as a query); none when the name is
// qualified.
func guard(fi syntax.FromItem, source catalog.Table) string {
	if c := guardCond(fi, source); c != "" {
		return "SELECT " + c
	}
	return ""
}

// guardCond is true when FROM item fi's unqualified name resolves to
// source on the session's search_path; "" when the name is qualified. The
// fetch evaluates it in its info row.
func guardCond(fi syntax.FromItem, source catalog.Table) string {
	if fi.Schema != "" {
		return ""
	}
	return fmt.Sprintf("to_regclass(%s) = to_regclass(%s)",
		catalog.QuoteLiteral(catalog.QuoteIdent(fi.Name)), catalog.QuoteLiteral(source.String()))
}

// findAggs reports whether the select list, HAVING or ORDER BY call
// APPROX_COUNT_DISTINCT (acd) or COUNT(DISTINCT ...) (cd), and names the
// first construct there the rewriter does not handle (bad).
func findAggs(s *syntax.Select) (acd, cd bool, bad string) {
	var allExprs []syntax.Expr
	for _, t := range s.Targets {
		if !t.Star {
			allExprs = append(allExprs, t.Expr)
		}
	}
	allExprs = append(allExprs, s.Having)
	for _, o := range s.OrderBy {
		allExprs = append(allExprs, o.Expr)
	}
	for _, e := range allExprs {
		syntax.Walk(e, func(x syntax.Expr) bool {
			if f, ok := x.(*syntax.FuncCall); ok && f.Filter != nil && bad == "" {
				bad = "an aggregate FILTER clause on " + strings.ToLower(f.Name[len(f.Name)-1]) + "()"
			}
			if f, ok := x.(*syntax.FuncCall); ok {
				switch classifyAgg(f) {
				case approxCountDistinct:
					acd = true
				case countDistinct:
					cd = true
				}
				// Behind FILTER too: no rollup answers it here, but the
				// query is then counted exactly (substitutePlan).
				if f.Filter != nil && classifyAgg(unfiltered(f)) == approxCountDistinct {
					acd = true
				}
			}
			if u, ok := x.(*syntax.Unsupported); ok && bad == "" {
				bad = u.What
				if u.Fn != "" {
					bad += " on " + u.Fn + "()"
				}
			}
			return true
		})
	}
	return acd, cd, bad
}

// unanswerable says why no rollup can answer s whatever the catalog holds
// (a *, LIMIT or OFFSET not constant, a function the rewriter does not
// know, pg_catalog not first on the search_path, not one plain table), or
// "".
func unanswerable(s *syntax.Select, sess env) string {
	for _, t := range s.Targets {
		if t.Star {
			return "select list has *"
		}
	}
	for _, c := range []struct {
		what string
		e    syntax.Expr
	}{{"LIMIT", s.Limit}, {"OFFSET", s.Offset}} {
		if why := constantClause(c.e); why != "" {
			return c.what + " " + why
		}
	}
	if why := unknownFunctions(s); why != "" {
		return why
	}
	if why := pgCatalogFirst(sess); why != "" {
		return why
	}
	switch len(s.From) {
	case 0:
		return "query has no FROM clause"
	case 1:
	default:
		return fmt.Sprintf("FROM lists %d tables; joins are not rewritten", len(s.From))
	}
	fi := s.From[0]
	if fi.Unsupported != "" {
		return "FROM has " + fi.Unsupported
	}
	if fi.Only {
		return "FROM ONLY reads the table without its inheritance children and partitions, which its rollups include"
	}
	return ""
}

// bestRollup matches each of the rollups of a table with match and
// returns the plan of the one with the fewest rows, or why none answers.
func bestRollup(rollups []*catalog.Rollup, match func(*catalog.Rollup) (*built, string)) (*built, string) {
	var best *built
	var reasons []string
	for _, r := range rollups {
		p, why := match(r)
		if p == nil {
			reasons = append(reasons, "rollup "+r.Name+": "+why)
			continue
		}
		if best == nil || p.rows < best.rows {
			best = p
		}
	}
	if best == nil {
		return nil, strings.Join(reasons, "; ")
	}
	return best, ""
}
