#!/usr/bin/env bash
# Overlap benchmark: what Theta sketches cost a rollup and what they buy,
# over a generated 20 M-row events table (90 days from 2026-01-01, 2 M
# users, an index on created_at).
#   Build cost and storage: a daily rollup by country and device with an
#   HLL of user_id only, and one with the same plus a Theta sketch of
#   user_id (lg_k 12), each created and built by the refresher, timed and
#   sized; the HLL-only one is then dropped.
#   Queries, through pgsketch-proxy serve --approx on (cold: a fresh proxy's
#   first query; warm: repeated on one connection) against the same SQL
#   answered exactly by PostgreSQL, interleaved round by round:
#     "active in January but not in February" as EXCEPT and as NOT IN;
#     week-over-week retention for 12 weeks (INTERSECT), timed together.
# Prints each round, then a Markdown section for docs/benchmarks.md: the
# command line, the machine, medians and min-max spreads, the ratios exact /
# proxy (goal: at least 50x), each answer's estimate, 95 % interval and
# exact count, and PostgreSQL's plans and buffer hits.
#
#   scripts/bench-overlap.sh [--rows N] [--days N] [--users N] [--keep DIR]
#                            [--runs N] [--exact-runs N] [--build-rounds N]
#                            [--lgk N] [--streams N] [--cache-bytes N]
#                            [--work-mem SIZE] [--skip-build]
#
# It builds bin/pgsketch-proxy, then starts a throwaway PostgreSQL 15 cluster
# (removed at the end; --keep DIR keeps it and reuses its events table next
# time, and --skip-build its Theta rollup too). A quick check of the setup:
# --rows 200000. It needs the Debian packages postgresql-15 and
# postgresql-15-hll (make deps installs them) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy
exec go run ./scripts/benchoverlap --proxy bin/pgsketch-proxy "$@"
