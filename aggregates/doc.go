// Package aggregates owns pgsketch's materialized aggregates: the rollup
// catalog model (package catalog), building and refreshing rollup tables
// (package refresh), and later the execution of rewrite plans against them.
//
// The sub-packages reach PostgreSQL only through small interfaces they
// declare themselves, so the logic can be read, and much of it tested,
// without a server.
package aggregates
