#!/usr/bin/env bash
# Change capture benchmark: what the capture triggers of a rolled-up table
# cost its writers, and what a query answered from a rollup costs while some
# of its buckets changed since the last refresh. In one run, interleaved,
# medians over --rounds rounds (5):
#   write cost  a 1 M-row INSERT ... SELECT ... generate_series and 10000
#               one-row prepared INSERTs (autocommit), into a table a daily
#               rollup covers (four capture triggers) and into a twin table
#               no rollup covers, alternating; goals <= 1.20 and <= 1.30;
#   query cost  "one month, distinct users by country" through
#               pgsketch-proxy serve --approx on (its default cache) over the
#               daily rollup of a generated events table (2 M rows; --rows
#               20000000 as bench-query), with 0, 1 and 5 changed days in the
#               month (an UPDATE of a few rows per day, no refresh), against
#               the exact query in PostgreSQL; goal: 1 changed day <= 2x the
#               clean answer. Each NOTICE must count the changed buckets.
#               With inserted days, three more queries each follow one more
#               one-row INSERT into a changed day ("ingest"), against the
#               clean cold answer: goal <= 1.5x.
# Prints each round, then the medians and ratios.
#
#   scripts/bench-capture.sh [--rows N] [--write-rows N] [--single-rows N]
#                            [--rounds N] [--cache-bytes N] [--only write|query]
#                            [--keep DIR] [--dsn URL] [--durable]
#
# It builds bin/pgsketch-proxy, then starts a throwaway PostgreSQL 15 cluster
# (removed at the end; --keep DIR keeps it and reuses its events table next
# time) unless --dsn names a database with the hll extension. It needs the
# Debian packages postgresql-15 and postgresql-15-hll (make deps installs
# them) and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
go build -o bin/pgsketch-proxy ./cmd/pgsketch-proxy
exec go run ./scripts/benchcapture --proxy bin/pgsketch-proxy "$@"
