// Package handler is the wire.Handler that pgsketch-proxy plugs into its
// relay: it answers, on the client's own upstream session, the statements
// pgsketch executes itself, and leaves everything else to the relay.
//
// Today that is SELECT pgsketch.refresh_rollup(...), sent with the simple
// query protocol: the refresh needs xxhash64, which PostgreSQL lacks, so the
// proxy runs package refresh over the session (sessionConn) as the client's
// role. Rewritten COUNT(DISTINCT) queries join here with the executor.
package handler
