#!/usr/bin/env bash
# Rollup query benchmark: "one month, distinct users
# by country" over a generated 20 M-row events table (90 days, an index on
# created_at) with a daily rollup by country and device holding an HLL of
# user_id (log2m 14, regwidth 5), timed four ways, interleaved:
#   proxy-cold  through a freshly started pgsketch-proxy serve --approx on
#               (its first query, on a new connection);
#   proxy-warm  the same, repeated on one connection through one proxy;
#   hll-direct  hll_cardinality(hll_union_agg(distinct_user_id::hll)) over
#               the same rollup table, in PostgreSQL;
#   exact       the COUNT(DISTINCT) query in PostgreSQL (fewer runs).
# Prints each round, p50 and p99 of each kind and the ratios of the targets.
#
# --merge-bench times the proxy's merge strategies instead, cold (one proxy
# with --cache-bytes 0): pgsketch.merge = 'proxy',
# 'server' and 'auto' on three connections through it, and hll_union_agg +
# hll_cardinality on the rollup directly, for four queries: distinct users
# over the 90 days from an hourly rollup events_hourly (made with the CLI if
# absent; 2160 rows into one group), one month by day, country and device
# (one daily row per group), by day and country (3 rows per group), and by
# country (84 rows per group).
# It prints p50/p99 per query and kind, and auto / min(proxy, server) with
# PASS when <= 1.10 at p50. --merge-more adds four queries near the boundary
# of auto's rule.
#
# --matrix times the rollup `rollup create` makes without tuning flags (a
# daily rollup with its default week and month levels) instead, for six
# ranges (a day, a week, a month, a quarter, all time, 7 days from noon to
# noon) by three groupings (none, country, country and device): exact,
# hll_union_agg (but over the ragged 7 days) over the daily
# table and over a monthly table built by hand, and through the proxy cold
# (no cache), warm, and on a new connection per query, over a simple-protocol
# client and pgx (matrix.go); it first measures the default levels' storage
# and one-day refresh cost.
# --join times a star join instead: distinct users by region for one month,
# the events joined to a 15-row dimension table on its key (join.go): exact,
# by hand over the rollup (hll_union_agg of the daily sketches joined to the
# same table), and through the proxy without and with its cache.
# --rolling times rolling windows instead: 7-day active users per day over
# the table's 90 days, a series of days joined to the events on a window of
# created_at per day (rolling.go): exact, by hand over the rollup, and
# through the proxy without and with its cache. --cube (with --rolling)
# asks the proxy the same windows as Cube writes them (a VALUES list of
# days joined to a subquery of the events); exact and by hand stay the
# series form.
# --local-zone times charts cut in New York's days, weeks and months over the
# hourly UTC rollup events_hourly, built if missing (localzone.go): exact, by
# hand over the rollup's hours, and through the proxy without and with its
# cache.
# --first-seen times new users instead (firstseen.go): users by first-seen
# month and day and the new users of one month, from the daily rollup's
# first-seen bookkeeping of user_id (added and built if missing) through the
# proxy against PostgreSQL, each answer checked equal; then the new users
# per month by HLL and Theta A-NOT-B differences (a Theta rollup
# events_theta is built if missing) with their errors, and the
# bookkeeping's size, build and one-day recompute times.
#
#   scripts/bench-query.sh [--rows N] [--days N] [--runs N] [--exact-runs N]
#                          [--keep DIR] [--dsn URL] [--profile DIR]
#                          [--cache-bytes N] [--merge-bench [--merge-more]]
#                          [--matrix] [--join] [--rolling [--cube]] [--local-zone] [--first-seen]
#
# It builds bin/pgsketch-proxy, then starts a throwaway PostgreSQL 15 cluster
# (removed at the end; --keep DIR keeps it and reuses its table and rollup
# next time) unless --dsn names a database with the hll extension.
# --profile DIR writes a CPU profile of the proxy answering warm queries.
# It needs the Debian packages postgresql-15 and postgresql-15-hll (make deps
# installs them) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,68p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy
exec go run ./scripts/benchquery --proxy bin/pgsketch-proxy "$@"
