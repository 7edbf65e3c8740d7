#!/usr/bin/env bash
# Top-k benchmark: top 10 users by events for a month, a week and all time,
# and the users above a threshold in a month, over a generated 20 M-row
# events table (90 days from 2026-01-01, 2 M users, user_id skewed as
# floor(2 M · u³), an index on created_at), with a daily rollup holding a
# top-k summary of user_id (1024 counters). Each query runs exactly in
# PostgreSQL, through pgsketch-proxy in verified mode (the default) and in
# approx mode, round by round, first without an index on user_id, then
# with a btree index on it. Every verified answer must be PostgreSQL's,
# row for row, and answered on the verified path; every approx answer must
# have as many rows, each true count inside the bounds its NOTICE states.
# Prints a Markdown section for docs/benchmarks.md.
#
#   scripts/bench-topk.sh [--rows N] [--days N] [--users N] [--keep DIR]
#                         [--runs N] [--exact-runs N]
#
# It builds bin/pgsketch-proxy, then starts a throwaway PostgreSQL 15
# cluster (removed at the end; --keep DIR keeps it and reuses its events
# table, as scripts/bench-overlap.sh's --keep does). A quick check of the
# setup: --rows 200000. It needs postgresql-15 and postgresql-15-hll (make
# deps installs them) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy
exec go run ./scripts/benchtopk --proxy bin/pgsketch-proxy "$@"
