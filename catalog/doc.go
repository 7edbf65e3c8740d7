// Package catalog is the Go model of the pgsketch rollup catalog (schema
// pgsketch, docs/design.md §2.6): what rollups exist, what their tables hold, and how
// far they are materialized.
//
// A Snapshot is an immutable value loaded in one query (Load) and shared by
// the rewriter, the executor and the refresher. It is plain data: the
// rewriter plans against it without I/O.
package catalog
