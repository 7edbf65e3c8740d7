#!/usr/bin/env bash
# A Citus cluster of this machine for the benchmarks (docs/benchmarks.md,
# "Citus"): a coordinator on PORT and two workers on PORT+1 and PORT+2, one
# PostgreSQL 15 each (fsync off, 32 shards per distributed table, otherwise
# the defaults), and a database DB on every node with the citus extension
# and, on the coordinator, hll (Citus creates it on the workers).
#
#   scripts/citus-cluster.sh start DIR [PORT] [DB]   make (first time) and start
#   scripts/citus-cluster.sh stop DIR                stop the three nodes
#
# PORT defaults to 56001 and DB to bench (made on every node when the
# cluster lacks it); the nodes live in DIR/nPORT. It
# prints the coordinator's URL, which scripts/bench-query.sh and
# scripts/bench-capture.sh take as --dsn (with --distribute user_id). It
# needs Citus installed (scripts/citus.sh) and runs the servers as the user
# postgres when started as root.
set -euo pipefail
prog=citus-cluster.sh die_status=1
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { print_help "$0"; exit 2; }
port=${3:-56001} db=${4:-bench}
ports=("$port" "$((port + 1))" "$((port + 2))")
find_postgres
as_postgres

case "$cmd" in
stop)
  for d in "$dir"/n*; do
    "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$d" status >/dev/null 2>&1 &&
      "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$d" -m fast stop >/dev/null
  done
  exit 0 ;;
start) ;;
*) die "unknown command $cmd (start or stop)" ;;
esac

"$(dirname "$0")/citus.sh" --check >/dev/null || die "Citus is not installed: run scripts/citus.sh (as root)"
mkdir -p "$dir"
share_with_postgres "$dir"
fresh=0
for p in "${ports[@]}"; do
  d=$dir/n$p
  if [ ! -d "$d" ]; then
    fresh=1
    "${as_pg[@]}" "$pg_bin/initdb" -D "$d" -U postgres --auth=trust >/dev/null
    cat >>"$d/postgresql.conf" <<EOF
port = $p
listen_addresses = '127.0.0.1'
unix_socket_directories = '$d'
shared_preload_libraries = 'citus'
max_prepared_transactions = 100
fsync = off
citus.shard_count = 32
EOF
  fi
  # pg_ctl status, not the pid file: a machine that restarted leaves one behind.
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$d" status >/dev/null 2>&1 ||
    "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$d" -l "$d.log" -w start >/dev/null
done
url() { echo "postgres://postgres@127.0.0.1:$1/$2?sslmode=disable"; }
# A database the cluster does not have yet (the first start, or another
# DB named on a later one) is made on every node.
has_db=$(echo "SELECT 1 FROM pg_database WHERE datname = :'db'" | "$psql" -X -Atq "$(url "$port" postgres)" -v db="$db")
if [ "$fresh" = 1 ] || [ -z "$has_db" ]; then
  for p in "${ports[@]}"; do
    "$psql" -q -X -v ON_ERROR_STOP=1 "$(url "$p" postgres)" -c "CREATE DATABASE \"$db\""
    "$psql" -q -X -v ON_ERROR_STOP=1 "$(url "$p" "$db")" -c "CREATE EXTENSION citus"
  done
  "$psql" -q -X -v ON_ERROR_STOP=1 "$(url "$port" "$db")" \
    -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" \
    -c "SELECT citus_add_node('127.0.0.1', ${ports[1]})" \
    -c "SELECT citus_add_node('127.0.0.1', ${ports[2]})" \
    -c "CREATE EXTENSION hll" >/dev/null
fi
url "$port" "$db"
