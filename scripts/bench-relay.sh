#!/usr/bin/env bash
# Relay benchmark: pgbench -S against a throwaway
# PostgreSQL 15 directly, through PgBouncer (session mode) and through
# `pgsketch-proxy serve`, interleaved, several rounds; prints the TPS median
# per target and mode and the ratios proxy/PgBouncer and proxy/direct, and,
# for each relay, its CPU time and context switches per transaction.
#
#   scripts/bench-relay.sh [--quick] [--rounds N] [--duration S] [--clients N]
#                          [--jobs N] [--scale N] [--modes "simple extended prepared"]
#                          [--proxy-args "ARGS"] [--baseline REV] [--handed] [--keep-going]
#
# Defaults: 3 rounds of 20 s runs, 8 clients, 2 pgbench threads, scale 10,
# modes simple, extended and prepared. --quick: 1 round of 2 s runs, to check
# the setup. Within a round, each mode runs on every target before the next
# mode, and the order of the targets rotates from round to round.
# --baseline REV also builds pgsketch-proxy from the git revision REV and runs
# it as a fourth target, for an A/B comparison within the same run (the
# report adds its TPS and the ratio proxy/baseline).
# --handed adds, per mode, a run (MODE+handed) in which each connection
# first sends one query pgsketch-proxy hands to its handler (a distinct
# count it passes through, as there is no rollup), then pgbench -S's query:
# the relay of sessions that had a query of their own served by pgsketch.
#
# PgBouncer and each proxy run in a session of their own, as services do (see
# start_proxy). Everything it starts (PostgreSQL, PgBouncer, the proxy) lives
# in a temporary directory and is stopped and removed on exit, also on Ctrl-C
# or an error.
# It needs the Debian packages postgresql-15 and pgbouncer (installed with
# apt-get when run as root and missing) and Go to build the proxy. As root,
# PostgreSQL and PgBouncer run as the OS user postgres. Exit status: 0 when
# every run completed, 1 on a setup failure or a failed run.
set -euo pipefail
prog=bench-relay die_status=1
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

rounds=3 duration=20 clients=8 jobs=2 scale=10
modes="simple extended prepared"
proxy_args=""
keep_going=0
baseline=""
handed=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) rounds=1 duration=2 ;;
    --rounds) rounds=$2; shift ;;
    --duration) duration=$2; shift ;;
    --clients) clients=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --scale) scale=$2; shift ;;
    --modes) modes=$2; shift ;;
    --proxy-args) proxy_args=$2; shift ;;
    --baseline) baseline=$2; shift ;;
    --handed) handed=1 ;;
    --keep-going) keep_going=1 ;;
    -h|--help) print_help "$0"; exit 0 ;;
    *) bad_argument "$1" ;;
  esac
  shift
done

repo=$(cd "$(dirname "$0")/.." && pwd)

# --- tools -------------------------------------------------------------------
find_postgres
pgbench=$(pg_program pgbench) || die "pgbench not found (Debian package postgresql-client-15 or postgresql-15)"
pg_isready=$(pg_program pg_isready) || die "pg_isready not found"

if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  [ "$(id -u)" -eq 0 ] || die "pgbouncer is not installed; as root: apt-get install -y pgbouncer"
  say "installing pgbouncer with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends pgbouncer >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends pgbouncer >/dev/null; } ||
    die "apt-get install pgbouncer failed"
fi
pgbouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
command -v go >/dev/null 2>&1 || die "go not found (needed to build pgsketch-proxy)"

# As root, PostgreSQL and PgBouncer refuse to run: they run as user postgres.
as_postgres

# --- cleanup -----------------------------------------------------------------
work=$(mktemp -d /tmp/pgsketch-bench-relay.XXXXXX)
proxy_pid="" base_pid=""
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  stop_process "$proxy_pid"
  stop_process "$base_pid"
  if [ -f "$work/pgbouncer.pid" ]; then kill "$(cat "$work/pgbouncer.pid")" 2>/dev/null || true; fi
  stop_postgres "$work"
  rm -rf "$work"
  exit "$code"
}
on_exit cleanup
share_with_postgres "$work"

# wait_ready PORT NAME LOGFILE: until a connection to database bench answers.
wait_ready() {
  for _ in $(seq 1 100); do
    if "$pg_isready" -q -h 127.0.0.1 -p "$1" -U postgres -d bench -t 1; then return 0; fi
    sleep 0.2
  done
  say "$2 on port $1 is not ready; its log:"; tail -n 30 "$3" >&2 || true
  exit 1
}

# --- PostgreSQL --------------------------------------------------------------
pg_port=$(free_port)
say "PostgreSQL ($pg_bin) on 127.0.0.1:$pg_port in $work"
init_postgres "$work" C
start_postgres "$work" "$pg_port" "$work" "-c max_connections=100 -c shared_buffers=256MB"
"$psql" -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres -c "CREATE DATABASE bench" >/dev/null || die "create database bench failed"
say "pgbench -i -s $scale"
"$pgbench" -i -q -s "$scale" -h 127.0.0.1 -p "$pg_port" -U postgres bench >"$work/pgbench-init.log" 2>&1 ||
  { cat "$work/pgbench-init.log" >&2; die "pgbench -i failed"; }
"$psql" -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -d bench -c "VACUUM ANALYZE" >/dev/null

# --- PgBouncer, session mode -------------------------------------------------
bouncer_port=$(free_port)
cat >"$work/userlist.txt" <<EOF
"postgres" ""
EOF
cat >"$work/pgbouncer.ini" <<EOF
[databases]
bench = host=127.0.0.1 port=$pg_port dbname=bench

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $work/userlist.txt
pool_mode = session
max_client_conn = 200
default_pool_size = 20
log_connections = 0
log_disconnections = 0
logfile = $work/pgbouncer.log
pidfile = $work/pgbouncer.pid
EOF
[ ${#as_pg[@]} -eq 0 ] || chown postgres: "$work/pgbouncer.ini" "$work/userlist.txt"
"${as_pg[@]}" "$pgbouncer" -d "$work/pgbouncer.ini" >"$work/pgbouncer.out" 2>&1 ||
  { cat "$work/pgbouncer.out" "$work/pgbouncer.log" >&2 2>/dev/null; die "PgBouncer did not start"; }
say "PgBouncer $("$pgbouncer" --version | head -n 1 | awk '{print $2}') (session mode) on 127.0.0.1:$bouncer_port"
wait_ready "$bouncer_port" PgBouncer "$work/pgbouncer.log"

# --- pgsketch-proxy ----------------------------------------------------------
# start_proxy BIN PORT LOG NAME PIDVAR: `BIN serve` on PORT in the background,
# its stderr in LOG, its pid in the variable PIDVAR (set at once, so cleanup
# stops it even if it never answers); then waits until it answers.
#
# Each proxy runs in a session of its own (setsid), as PgBouncer does: -d
# makes it a daemon, which calls setsid. It matters for the comparison. With
# the kernel's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled,
# on by default in Debian's kernels), CPU time is first shared between
# sessions, so a relay started in this script's session would share one
# share with pgbench, and PgBouncer would have one to itself. A service
# started by systemd has a session and a cgroup of its own, too.
start_proxy() {
  # shellcheck disable=SC2086 # --proxy-args is split into words on purpose
  setsid "$1" serve --listen "127.0.0.1:$2" \
    --upstream "postgres://127.0.0.1:$pg_port/?sslmode=disable" --log-level warn $proxy_args 2>"$3" &
  printf -v "$5" %s "$!"
  say "$4 serve on 127.0.0.1:$2"
  wait_ready "$2" "$4" "$3"
  # setsid forks first when it is a process group leader (only with job
  # control on); then the pid above would not be the proxy's.
  # Field 6 of /proc/PID/stat is the session id (the command names here hold
  # no spaces), read as cpu_ticks reads its fields, without procps.
  [ "$(awk '{print $6}' "/proc/${!5}/stat" 2>/dev/null)" = "${!5}" ] || die "$4 is not in a session of its own (pid ${!5})"
}
say "building pgsketch-proxy"
(cd "$repo" && go build -o "$work/pgsketch-proxy" ./cmd/pgsketch-proxy) || die "go build ./cmd/pgsketch-proxy failed"
proxy_port=$(free_port)
start_proxy "$work/pgsketch-proxy" "$proxy_port" "$work/proxy.log" pgsketch-proxy proxy_pid

targets=(direct pgbouncer proxy)
declare -A port=([direct]=$pg_port [pgbouncer]=$bouncer_port [proxy]=$proxy_port)
if [ -n "$baseline" ]; then
  base_rev=$(cd "$repo" && git rev-parse --short "$baseline^{commit}") || die "--baseline $baseline is not a git revision"
  say "building the baseline pgsketch-proxy at $base_rev"
  build_proxy_at "$repo" "$base_rev" "$work/base" "$work/pgsketch-proxy-base"
  base_port=$(free_port)
  start_proxy "$work/pgsketch-proxy-base" "$base_port" "$work/base.log" "baseline pgsketch-proxy ($base_rev)" base_pid
  targets+=(baseline)
  port[baseline]=$base_port
fi
ntargets=${#targets[@]}

# --- runs --------------------------------------------------------------------
# The handed script: once per connection (pgbench keeps a client's variables
# from one transaction to the next, starting from -D handed=0), a query the
# proxy's handler takes.
cat >"$work/handed.sql" <<'EOF2'
\if :handed = 0
SELECT count(DISTINCT bid) FROM pgbench_branches WHERE false;
\set handed 1
\endif
\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
EOF2
if [ "$handed" -eq 1 ]; then
  for m in $modes; do modes="$modes $m+handed"; done
fi
results=$work/results.txt
: >"$results"
failed=0
total=$((rounds * $(wc -w <<<"$modes") * ${#targets[@]}))
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
clk_tck=$(getconf CLK_TCK)
declare -A relay_pid=([pgbouncer]=$(cat "$work/pgbouncer.pid") [proxy]=$proxy_pid [baseline]=$base_pid)
# cpu_ticks PID: user + system CPU time the process has used, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# ctx_switches PID: voluntary + involuntary context switches of the process's
# threads now (a thread that has exited takes its count with it; the relays
# keep theirs).
ctx_switches() { cat "/proc/$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches:/ {s += $2} END {print s + 0}'; }
n=0
say "$total runs of ${duration} s: pgbench -S, $clients clients, $jobs threads"
for round in $(seq 1 "$rounds"); do
  for mode in $modes; do
    for i in $(seq 0 $((ntargets - 1))); do
      target=${targets[$(((i + round - 1) % ntargets))]}
      n=$((n + 1))
      out=$work/run-$round-$mode-$target.log
      rpid=${relay_pid[$target]:-}
      ticks0=0; [ -z "$rpid" ] || ticks0=$(cpu_ticks "$rpid")
      switches0=0; [ -z "$rpid" ] || switches0=$(ctx_switches "$rpid")
      script=(-S); [ "${mode%+handed}" = "$mode" ] || script=(-f "$work/handed.sql" -D handed=0)
      if "$pgbench" "${script[@]}" -n -M "${mode%+handed}" -c "$clients" -j "$jobs" -T "$duration" \
          -h 127.0.0.1 -p "${port[$target]}" -U postgres bench >"$out" 2>&1 &&
        tps=$(awk '/^tps = /{print $3; exit}' "$out") && [ -n "$tps" ]; then
        # The relay's own CPU time per transaction, in microseconds, and
        # its context switches per transaction.
        cpu=- switches=-
        if [ -n "$rpid" ]; then
          txs=$(awk -F': ' '/^number of transactions actually processed/{print $2; exit}' "$out")
          cpu=$(awk -v a="$ticks0" -v b="$(cpu_ticks "$rpid")" -v hz="$clk_tck" -v n="${txs%%/*}" \
            'BEGIN {if (n > 0) printf "%.1f", (b - a) * 1e6 / hz / n; else print "-"}')
          switches=$(awk -v a="$switches0" -v b="$(ctx_switches "$rpid")" -v n="${txs%%/*}" \
            'BEGIN {if (n > 0 && b >= a) printf "%.3f", (b - a) / n; else print "-"}')
        fi
        echo "$target $mode $round $tps $cpu $switches" >>"$results"
        say "[$n/$total] round $round $mode $target: $tps TPS${rpid:+, relay CPU $cpu µs and $switches context switches per transaction}"
      else
        say "[$n/$total] round $round $mode $target: pgbench FAILED:"; tail -n 15 "$out" >&2
        if [ "$target" = proxy ]; then
          if ! kill -0 "$proxy_pid" 2>/dev/null; then
            st=0; wait "$proxy_pid" || st=$?; proxy_pid=""
            say "pgsketch-proxy is gone (exit status $st; 137 = SIGKILL, 143 = SIGTERM from outside this script)"
          fi
          say "proxy log:"; tail -n 20 "$work/proxy.log" >&2
        fi
        failed=1
        [ "$keep_going" -eq 1 ] || die "a run failed (--keep-going to continue)"
      fi
    done
  done
done

# --- report ------------------------------------------------------------------
median() { # target mode [column: 4 TPS (default), 5 relay CPU, 6 relay context switches]
  awk -v t="$1" -v m="$2" -v c="${3:-4}" '$1 == t && $2 == m && $c != "-" {print $c}' "$results" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.3f", a / b}'; }
# round_ratios MODE A B: the ratio A/B in each round (the two runs were
# minutes apart at most), then their median: steadier than the ratio of
# medians when the machine's background load drifts between rounds.
round_ratios() {
  awk -v m="$1" -v a="$2" -v b="$3" '$2 == m && $1 == a {x[$3] = $4} $2 == m && $1 == b {y[$3] = $4}
    END {for (r in x) if ((r in y) && y[r] > 0) printf "%.3f\n", x[r] / y[r]}' "$results" | sort -g | tr '\n' ' '
}
median_of() { tr ' ' '\n' | awk 'NF {v[++n] = $1} END {if (n == 0) print "n/a"; else if (n % 2) printf "%.3f", v[(n + 1) / 2]; else printf "%.3f", (v[n / 2] + v[n / 2 + 1]) / 2}'; }
# versus MODE OTHER: the cells that compare the proxy with the relay OTHER
# in MODE: the per-round ratios proxy/OTHER and their median, the relays'
# CPU time per transaction and their context switches per transaction
# (OTHER's, then the proxy's).
versus() {
  local rr
  rr=$(round_ratios "$1" proxy "$2")
  printf '%s(%s) | %s / %s | %s / %s' "$rr" "$(median_of <<<"$rr")" "$(median "$2" "$1" 5)" "$(median proxy "$1" 5)" \
    "$(median "$2" "$1" 6)" "$(median proxy "$1" 6)"
}

commit=$(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(cd "$repo" && git status --porcelain -- wire cmd 2>/dev/null)" ]; then commit="$commit (wire/ or cmd/ modified)"; fi
cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
echo
echo "machine: $(nproc) cores${cpu:+, $cpu}, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
echo "software: $("$pg_bin/postgres" --version), PgBouncer $("$pgbouncer" --version | head -n 1 | awk '{print $2}'), $(go version | awk '{print $3}'), pgsketch-proxy at $commit${proxy_args:+ with $proxy_args}"
echo "command: pgbench -S -n -M MODE -c $clients -j $jobs -T $duration (scale $scale), $rounds round(s), targets interleaved"
echo
echo "load average (1, 5, 15 min): $load_before before the runs, $(cut -d' ' -f1-3 /proc/loadavg) after"
echo
echo "| mode | direct TPS | PgBouncer TPS | pgsketch-proxy TPS | proxy / PgBouncer | proxy / direct | proxy / PgBouncer, per round (median) | relay CPU µs/transaction, PgBouncer / proxy | relay context switches/transaction, PgBouncer / proxy |"
echo "|---|---:|---:|---:|---:|---:|---|---|---|"
for mode in $modes; do
  d=$(median direct "$mode"); b=$(median pgbouncer "$mode"); p=$(median proxy "$mode")
  printf '| %s | %.0f | %.0f | %.0f | %s | %s | %s |\n' "$mode" "$d" "$b" "$p" "$(ratio "$p" "$b")" "$(ratio "$p" "$d")" "$(versus "$mode" pgbouncer)"
done
if [ -n "$baseline" ]; then
  printf '\nbaseline: pgsketch-proxy at %s\n\n' "$base_rev"
  echo "| mode | baseline TPS | baseline / PgBouncer | proxy / baseline | proxy / baseline, per round (median) | relay CPU µs/transaction, baseline / proxy | relay context switches/transaction, baseline / proxy |"
  echo "|---|---:|---:|---:|---|---|---|"
  for mode in $modes; do
    b=$(median pgbouncer "$mode"); p=$(median proxy "$mode"); a=$(median baseline "$mode")
    printf '| %s | %.0f | %s | %s | %s |\n' "$mode" "$a" "$(ratio "$a" "$b")" "$(ratio "$p" "$a")" "$(versus "$mode" baseline)"
  done
fi
echo
echo "TPS medians over $rounds round(s); every run (target mode round TPS relay-CPU-µs/transaction relay-context-switches/transaction):"
sed 's/^/    /' "$results"
exit "$failed"
