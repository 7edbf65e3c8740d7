// Package syntax is the rewriter's view of SQL: PostgreSQL's own parser
// (pg_query, imported by parse.go and command.go of this package and by no
// other package of the module), the small syntax tree the planners reason
// about (ast.go), its printer, and the byte scans that run before any
// parse (prefilter.go).
//
// Parse turns one SQL text into a Parsed: the statement's SELECT as a
// Select, or what else it is; EXPLAIN and its VERBOSE option; for a text
// that calls APPROX_COUNT_DISTINCT, the same text with each call counted
// exactly. Whatever the tree does not model becomes an Unsupported node
// naming the construct, for a passthrough's reason; a subquery used as an
// expression keeps its deparsed text and what it reads of the statement
// around it (SubLink), a window function its parts (Window), so that a
// planner that evaluates them as written can print them.
//
// The tree has one form for each construct (a FROM subquery, a join, a
// WITH clause, a subquery expression) and no field a single planner owns:
// planners read it through helpers of their own.
//
// Prefilter decides from the bytes alone whether a text could be answered
// at all; CheckLimits caps its length, nesting and words before the parser
// sees it, because the C parser exhausts its stack on pathological input
// and kills the process. Split cuts a text of several statements where the
// parser does; ParseCommand recognises the statements the proxy carries
// out itself (SHOW pgsketch.<setting>, SELECT pgsketch.refresh_rollup(...)).
package syntax
