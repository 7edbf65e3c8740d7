#!/usr/bin/env bash
# The fixed cost of a warm answer in a database with many tables: one month
# of distinct users by country, answered from the proxy's cache, in a
# database of 200 000 events (a daily rollup made by rollup create), first
# as it is and then with --tables more empty tables (default 20 000), asked
# of two proxies in turn: one built from --base (a commit, default HEAD~1)
# and one from the work tree. Each is asked back to back and after 200 ms
# pauses (scripts/pausedquery, -n 60), and the script prints the medians.
#
#   scripts/bench-wide-catalog.sh [--base REV] [--tables N]
#
# It starts a throwaway PostgreSQL 15 cluster (removed at the end) and needs
# the Debian packages postgresql-15 and postgresql-15-hll (make deps
# installs them), git and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
prog=bench-wide-catalog die_status=1
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
base=HEAD~1 tables=20000
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base=$2; shift 2 ;;
    --tables) tables=$2; shift 2 ;;
    -h | --help) print_help "$0"; exit 0 ;;
    *) bad_argument "$1" ;;
  esac
done
find_postgres
as_postgres
dir=$(mktemp -d)
share_with_postgres "$dir"
old_pid="" new_pid=""
cleanup() {
  stop_process "$old_pid"
  stop_process "$new_pid"
  stop_postgres "$dir"
  rm -rf "$dir"
}
on_exit cleanup

say "building the proxy at $base and from the work tree"
build_proxy_at . "$base" "$dir/base" "$dir/old"
go build -o "$dir/new" ./cmd/pgsketch-proxy
go build -o "$dir/pausedquery" ./scripts/pausedquery

init_postgres "$dir" C.UTF-8
port=$(free_port)
start_postgres "$dir" "$port" "$dir"
db="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
"$psql" "$db" -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION hll;
CREATE TABLE events AS
SELECT g AS id, timestamptz '2026-01-01' + (g % 90) * interval '1 day' + (g % 86400) * interval '1 second' AS created_at,
       (ARRAY['us', 'de', 'fr', 'jp'])[1 + g % 4] AS country, (ARRAY['ios', 'android', 'web'])[1 + g % 3] AS device,
       (g * 7919) % 50000 AS user_id, (g % 100)::numeric AS amount
  FROM generate_series(1, 200000) AS g;
CREATE INDEX ON events (created_at);
SQL
"$dir/new" migrate up --dsn "$db" >/dev/null 2>&1 || die "migrate up failed"
"$dir/new" rollup create events_daily --dsn "$db" --table public.events --time created_at \
  --dims country,device --distinct user_id --sum amount >/dev/null 2>&1 || die "rollup create failed"

old_port=$(free_port)
"$dir/old" serve --listen "127.0.0.1:$old_port" --upstream "$db" --approx on --refresh-interval 0 >"$dir/old.log" 2>&1 &
old_pid=$!
new_port=$(free_port)
"$dir/new" serve --listen "127.0.0.1:$new_port" --upstream "$db" --approx on --refresh-interval 0 >"$dir/new.log" 2>&1 &
new_pid=$!
sleep 1
q="SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-02-01' AND created_at < '2026-03-01' GROUP BY country"
measure() {
  local pause
  echo "$1 ($("$psql" "$db" -AtXc "SELECT count(*) FROM pg_class") rows in pg_class): $base, then the work tree"
  for pause in 0 200ms; do
    echo "  pause $pause:"
    "$dir/pausedquery" -n 60 -pause "$pause" -q "$q" "postgres://postgres@127.0.0.1:$old_port/postgres?sslmode=disable" \
      "postgres://postgres@127.0.0.1:$new_port/postgres?sslmode=disable" | sed 's/^/    /'
  done
}
measure "the database as made"
say "making $tables empty tables"
for ((i = 1; i <= tables; i += 5000)); do
  "$psql" "$db" -qX -v ON_ERROR_STOP=1 -c "DO \$\$ BEGIN FOR i IN $i..$((i + 4999 < tables ? i + 4999 : tables)) LOOP
    EXECUTE format('CREATE TABLE filler_%s (id int)', i); END LOOP; END \$\$"
done
"$psql" "$db" -qX -c "VACUUM ANALYZE pg_class"
measure "with $tables more tables"
