// Package plan holds what the rewriter decides for a query and the executor
// carries out: a Plan (the statements to run, the aggregates to merge and
// how, the time split between rollup and base rows, the merge strategy),
// printable for EXPLAIN and the golden tests. It is plain data with no
// dependency on the SQL parser, so the executor links none.
package plan
