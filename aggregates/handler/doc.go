// Package handler is the wire.Handler that pgsketch-proxy plugs into its
// relay: it answers, on the client's own upstream session, the statements
// pgsketch executes itself, and leaves everything else to the relay.
//
// Today that is SELECT pgsketch.refresh_rollup(...), sent with the simple
// query protocol: the refresh needs xxhash64, which PostgreSQL lacks, so the
// proxy runs package refresh over the session (sessionConn) as the client's
// role.
//
// And queries the rewriter answers from a rollup (rollup.go): for a simple
// Query that passes the rewriter's prefilter, the handler reads the session's
// settings and the rollup catalog on the session itself (as the client's
// role, in its transaction), plans with package rewrite, and runs the plan
// with package exec (querier in query.go). Inside a transaction block the
// plan runs under a savepoint; on any error but a cancel the proxy rolls
// back to it and sends the original query upstream, so the client gets
// exactly PostgreSQL's answer or error and its transaction is never left in
// a state the original query would not have left it in. The extended
// protocol is served by extended.go, Query strings of several statements
// by multi.go (one statement at a time, in a transaction of the proxy's own
// that stands for PostgreSQL's implicit one).
//
// The session variables pgsketch.approx and pgsketch.merge are PostgreSQL
// placeholder settings the handler reads with the session's other settings;
// a value pgsketch.merge cannot run is refused by PostgreSQL itself (a RAISE),
// so that the session's state is what an error makes it.
package handler
