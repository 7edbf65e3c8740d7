#!/usr/bin/env bash
# Rollup query benchmark (issue 7, must-show 3): "one month, distinct users
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
#   scripts/bench-query.sh [--rows N] [--days N] [--runs N] [--exact-runs N]
#                          [--keep DIR] [--dsn URL] [--profile DIR]
#
# It builds bin/pgsketch-proxy, then starts a throwaway PostgreSQL 15 cluster
# (removed at the end; --keep DIR keeps it and reuses its table and rollup
# next time) unless --dsn names a database with the hll extension.
# --profile DIR writes a CPU profile of the proxy answering warm queries.
# It needs the Debian packages postgresql-15 and postgresql-15-hll (make deps
# installs them) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy
exec go run ./scripts/benchquery --proxy bin/pgsketch-proxy "$@"
