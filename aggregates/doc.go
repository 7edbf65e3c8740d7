// Package aggregates owns pgsketch's materialized aggregates: building and
// refreshing rollup tables (package refresh), the execution of rewrite plans
// against them (package exec), and the request handler the proxy plugs in
// (package handler). The rollup catalog model they share is the top-level
// package catalog, which the rewriter imports too.
//
// The sub-packages reach PostgreSQL only through small interfaces they
// declare themselves, so the logic can be read, and much of it tested,
// without a server.
package aggregates
