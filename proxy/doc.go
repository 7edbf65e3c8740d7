// Package proxy is the wire.Handler that pgsketch-proxy plugs into its
// relay: it answers, on the client's own upstream session, the statements
// pgsketch executes itself, and leaves everything else to the relay.
//
// Today that is SHOW of a pgsketch setting, and SELECT
// pgsketch.refresh_rollup(...), sent with the simple query protocol: the
// refresh needs xxhash64, which PostgreSQL lacks, so the proxy runs package
// refresh over the session (sessionConn) as the client's role.
//
// And queries the rewriter answers from a rollup. Every protocol entry
// goes through one pipeline (pipeline.go): readView reads the session's
// settings and the rollup catalog on the session itself (as the client's
// role, in its transaction); decide plans a statement with package rewrite,
// or says why it passes through; answer takes a plan to its answer (the
// table guard, then package exec over the session: sessionConn in conn.go,
// the same upstream.Session that package refresh runs on).
// The entries only turn a verdict into their protocol's messages: a simple
// Query (simple.go), a Query string of several statements (multi.go: one
// statement at a time, in a transaction of the proxy's own that stands for
// PostgreSQL's implicit one), and the extended protocol, whose bookkeeping
// of statements, portals and replies is a state machine of its own
// (extended.go) that asks the pipeline to answer a portal through an
// interface it declares (portalAnswerer; portal.go is the pipeline's side),
// so that it is tested as scripted conversations (package wire/wiretest).
// Inside a transaction block a plan runs under a savepoint; on any error
// but a cancel the proxy rolls back to it and sends the statement upstream
// (its APPROX_COUNT_DISTINCT counted exactly: fallback.go) after a NOTICE
// saying why the rollup was not used, so the client gets exactly
// PostgreSQL's answer or error and its transaction is never left in a
// state the original statement would not have left it in.
//
// The session variables pgsketch.approx, pgsketch.merge,
// pgsketch.max_overlap_error and pgsketch.topk are PostgreSQL placeholder
// settings the handler reads with the session's other settings; a value of
// the last three that a plan cannot run with is refused by PostgreSQL itself
// (a RAISE, SQLSTATE 22023), so that the session's state is what an error
// makes it.
package proxy
