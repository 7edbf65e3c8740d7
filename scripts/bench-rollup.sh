#!/usr/bin/env bash
# Rollup build benchmark: a daily rollup (dimensions
# country, device; the row count, an HLL of user_id at log2m 14,
# regwidth 5, and sum(amount) unless --sum=false) of a generated 20 M-row events table over 90 days, built by
# pgsketch's refresher and, in the same run, inside PostgreSQL with
# hll_add_agg(hll_hash_bigint(user_id), 14, 5) in one CREATE TABLE AS ...
# GROUP BY; alternating, several rounds; prints each run, the medians and
# their ratio.
#
#   scripts/bench-rollup.sh [--rows N] [--days N] [--rounds N] [--streams N]
#                           [--keep DIR] [--dsn URL] [--sum=false]
#
# It starts a throwaway PostgreSQL 15 cluster (removed at the end; --keep DIR
# keeps it and reuses its table next time) unless --dsn names a database
# with the hll extension. It needs the Debian packages postgresql-15 and
# postgresql-15-hll (make deps installs them) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
exec go run ./scripts/benchrollup "$@"
