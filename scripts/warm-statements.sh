#!/usr/bin/env bash
# warm-statements.sh BINARY DATADIR: the statements PostgreSQL runs for one
# warm answer of "one month, distinct users by country" through the proxy.
# DATADIR is a cluster holding the benchmark's events and events_daily
# (scripts/bench-query.sh --keep DIR keeps one, in DIR/data); it is started
# with log_statement = all on port 55999, the proxy on 56999, and both are
# stopped at the end. The query runs three times on new connections, and
# three times on one; each third answer's statements are counted and
# listed.
set -euo pipefail
bin=$1 data=$2
log=$(mktemp) plog=$(mktemp)
q="SELECT country, count(DISTINCT user_id) AS users FROM events WHERE created_at >= '2026-01-01' AND created_at < '2026-02-01' GROUP BY country ORDER BY country"
as_owner() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sh -c "$*"; fi; }
chmod a+rw "$log"
as_owner "/usr/lib/postgresql/15/bin/pg_ctl -D '$data' -o '-p 55999 -k /tmp -c listen_addresses=127.0.0.1 -c log_statement=all -c log_line_prefix=' -l '$log' start -w" >/dev/null
"$bin" serve --listen 127.0.0.1:56999 --upstream "postgres://127.0.0.1:55999/?sslmode=disable" --approx on >"$plog" 2>&1 &
proxy=$!
stop() {
  kill "$proxy" 2>/dev/null || true
  wait "$proxy" 2>/dev/null || true
  as_owner "/usr/lib/postgresql/15/bin/pg_ctl -D '$data' stop -m fast" >/dev/null
  rm -f "$log" "$plog"
}
trap stop EXIT
sleep 1
url="postgres://postgres@127.0.0.1:56999/postgres?sslmode=disable"
count() { # the statements logged after line $1
  sleep 0.5
  stmts=$(tail -n +"$(($1 + 1))" "$log" | grep "^LOG:  \(statement\|execute\)" | grep -v "pgsketch_marker" || true)
  echo "$(printf '%s\n' "$stmts" | grep -c . || true) statements $2:"
  printf '%s\n' "$stmts" | cut -c1-120
}
for _ in 1 2; do psql "$url" -Atqc "$q" >/dev/null 2>&1; done
before=$(wc -l <"$log")
psql "$url" -Atqc "$q" >/dev/null 2>&1
count "$before" "for the third (warm) answer, on a new connection"
# The same query three times on one connection: the third is planned in
# the view the second read, confirmed in its fetch's round trip.
before=$(wc -l <"$log")
psql "$url" -Atq -c "$q" -c "$q" -c "SELECT 'pgsketch_marker'" >/dev/null 2>&1
sleep 0.5
before=$(wc -l <"$log")
psql "$url" -Atq -c "$q" -c "$q" -c "SELECT 'pgsketch_marker'" -c "$q" >/dev/null 2>&1
marker=$(grep -n "pgsketch_marker" "$log" | tail -1 | cut -d: -f1)
count "$marker" "for the third (warm) answer on one connection"
