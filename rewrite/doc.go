// Package rewrite decides, for one SQL text a client sends, whether a rollup
// can answer it, and how (docs/design.md §1 and §3).
//
// It is pure and deterministic: SQL text, a catalog snapshot and the
// session's settings go in; a Result comes out, holding either a Plan or the
// precise reason the query passes through untouched. It does no I/O.
//
// The steps are: a cheap byte scan (syntax.Prefilter) so that only SQL that
// could be rewritten is parsed at all; caps on length, nesting depth and the
// number of operators and words, checked before parsing
// (syntax.CheckLimits); parsing with the real PostgreSQL parser into the
// syntax tree of package syntax (the only importer of the parser);
// resolving the
// table on the session's search_path and checking the functions and
// clauses the rewriter must evaluate (resolve.go); matching against every
// rollup over the queried table (match.go: the WHERE clause, the time
// range, the aggregates against the stored measures); and building the Plan
// for the rollup with the fewest rows (build.go, fetch.go). rewrite.go holds
// the entry, Rewrite, and planTable, which runs these steps for one SELECT
// of one table; planners.go lists the planners in the order they are tried
// (overlap, retention grid, first seen, top-k, single table; then the star
// join and the nested subqueries), none of which calls another.
//
// nested.go handles distinct counts inside larger statements: a FROM
// subquery that only filters and projects the table is merged into the
// query (pullUp), and aggregate subqueries the single-table or star-join planner answers, in a WITH
// clause, in FROM or as a set operation's arm, become the arms of a
// Nested plan, whose outer statement is the parser's deparse of the
// client's tree with those subqueries cut out (syntax.Parsed.OuterText).
// starjoin.go (reading the statement: joins.go) plans a join of a
// rollup's table to dimension tables (one,
// or several as the leaves of a join tree printed as written), and
// grouping sets, FILTER, window functions over the groups and subquery
// expressions (x IN (SELECT ...), EXISTS, scalar subqueries) that read
// the table's dimensions, as a Nested plan too: the table aggregated from
// the rollup per value of the columns the rest reads, merged sketches and
// all, which PostgreSQL joins and regroups (hll_union_agg), evaluating
// windows and subqueries as written. The syntax tree keeps those two
// constructs as Unsupported nodes that carry what the regrouping prints (a
// window's parts; a subquery's deparsed text and what it reads of the
// statement around it), so that every other planner still refuses them;
// regroup.go checks them.
//
// A statement calling APPROX_COUNT_DISTINCT that no planner answers is
// counted exactly instead (a Substitute plan): reprinted from the syntax
// tree (shape.go, substitutePlan), or, for what the tree does not model
// (joins, subqueries, set operations, ordered aggregates), from the
// parser's tree with each call replaced by COUNT(DISTINCT ...)
// (syntax.Parsed.Exact). A
// form with no exact equivalent (a window function, *, several
// arguments, a statement other than SELECT) is named in
// Result.Unsupported, for the caller to refuse.
//
// The plan types (package plan, beside this one) are plain data the
// executor imports without linking the SQL parser. A Plan carries SQL text
// only: whole buckets are read from the rollup, edge
// and tail rows and the buckets the change log lists from the base table
// (with rows whose time is NULL, which no rollup holds), all in one
// statement so that now(), parameters, the snapshot, the change log and the
// watermark, which the statement reads from schema pgsketch itself, are the
// same for every part. The same statement checks that the rollup's change
// capture is in place (pgsketch.capture_check), failing otherwise so that
// the query runs exactly. The executor (exec) merges per group
// and evaluates the shaping SQL over the merged groups; see Plan for the
// contract.
//
// Two choices are the plan's too: which level of the rollup the whole
// buckets are read from (build.go: the coarsest level whose buckets the
// query's keys and filters do not split), and where the rollup's sketches
// are merged (strategy.go: in the proxy, or in PostgreSQL with the hll
// extension's hll_union_agg, by an estimate of rollup rows per group).
package rewrite
