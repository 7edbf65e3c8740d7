// Package exec executes a plan.Plan on the client's own upstream session
// (docs/design.md §1), in the steps RunCached follows in order: it runs the plan's
// fetch statement (whole rollup buckets and base edge/tail rows in one
// statement), takes the rollup half from the cache or builds it, runs the
// exact statement if the plan has one, merges the sketches of every group
// in Go (sketch.HLL Union of the rollup's bytes, canonical-text hashes of
// the base rows' distinct values), estimates, and evaluates the plan's
// shaping statement over the merged groups, so that PostgreSQL itself
// restores the select list, HAVING, ORDER BY and LIMIT with the column
// names and types the original query would have. fetch.go holds the first
// three steps, merge.go the merge, exec.go the shaping statement, and
// project.go the rows it writes itself, without a shaping statement, when
// the plan only selects the groups' keys and aggregates.
//
// On a source Citus distributes, the base rows come from a second
// statement (plan.BaseRead, baseread.go) that QueryPair runs in the
// fetch's transaction, over the spans the fetch returned.
//
// It talks to PostgreSQL only through upstream.Session's Query and
// QueryPair (package upstream imports no connection package), so that the
// merge and shape logic is testable without a server.
//
// The merged groups reach the shaping statement as one-dimensional arrays
// bound in binary format and read with unnest:
//
//	WITH pgsketch_groups(k1, .., a1, ..) AS (
//	    SELECT u.c1, .., max(u.cA), CAST(COALESCE(sum(u.cB), 0) AS bigint), ..
//	    FROM unnest($N+1, $N+2, ..) AS u(c1, ..) GROUP BY 1, ..)
//	<ShapeSQL>
//
// Each array holds one element per fetched row (and per ExactSQL row), and
// one extra row per group carrying the HLL estimates; counts, sums, minima
// and maxima are merged there by PostgreSQL's own aggregates (so sums keep
// PostgreSQL's types and overflow rules) while the sketches are merged here.
// Group keys keep the binary values and type OIDs the fetch returned.
//
// The rollup half arrives either as every rollup row's sketch (the plan's
// FetchSQL; MergeSketches unions them) or, when the plan merges in
// PostgreSQL, as one sketch per group that hll_union_agg merged there
// (ServerFetchSQL): the same bytes, estimated here either way. Cache keeps
// the merged rollup half between queries, under a token the fetch itself
// computes, whichever statement filled it.
//
// A Nested plan (nested.go) runs each arm up to its merged groups
// (runGroups) and then one statement: the plan's outer statement with each
// arm's shaping statement, parenthesized, in its place, the arms' arrays
// bound after the client's parameters, one arm after the other.
package exec
