// Package upstream describes the upstream PostgreSQL session pgsketch runs
// its own statements on, once for every package that does.
//
// Session is that session: the executor (package exec) runs a plan's
// statements through its Query and QueryPair (a fetch and the base read
// that follows it in one transaction, on Citus), and the refresher (package
// refresh) its transaction through Query, Exec, CopyTo and CopyFrom.
// Statement and Result are what Query takes and returns; Rows is the
// refresher's shorthand for a query with text parameters and text rows,
// built on Query.
//
// Two types implement Session: the proxy's sessionConn, over the
// connection the relay borrows from a client (its role, its transaction),
// and pgsession.Conn (package upstream/pgsession), over a connection of
// pgx's pgconn that pgsketch opened itself (the rollup command, the
// background refresher, the refresh's parallel readers, tests and
// benchmarks). This package imports no connection package, so that the
// executor depends on the session only through it (docs/design.md §8);
// pgconn is imported by upstream/pgsession alone.
package upstream
