#!/usr/bin/env bash
# pgx test suite through pgsketch-proxy: runs the test suite of the Go driver
# jackc/pgx v5.12.0 twice against a throwaway PostgreSQL 15 cluster, once
# directly and once through `pgsketch-proxy serve` (default settings), and
# prints the counts of each run (pass/fail/skip), the tests (full names,
# subtests included) that pass directly but fail through the proxy, and,
# apart from them, the tests that fail in both runs (the environment).
#
#   scripts/pgx-suite.sh [--proxy-bin PATH] [--run REGEX] [--pkgs "PKGS"]
#                        [--timeout DURATION] [--keep DIR]
#
#   --proxy-bin PATH  the pgsketch-proxy binary to test; default: built from
#                     this work tree (uncommitted changes included)
#   --run REGEX       only the tests go test -run REGEX selects (both runs)
#   --pkgs "PKGS"     pgx packages, relative to its module root; default
#                     "./ ./pgconn/... ./pgtype/... ./pgxpool/... ./stdlib/..."
#   --timeout D       go test -timeout for each package binary; default 30m
#   --keep DIR        work in DIR and leave the cluster and the proxy running
#                     on exit, with the go test -json outputs and the logs
#                     (a later run with the same DIR stops them and starts
#                     afresh); without it everything lives in a temporary
#                     directory that is removed on exit, also on Ctrl-C
#
# The pgx source comes from the Go module cache (go mod download fetches it
# when missing) and is copied to the work directory. The cluster is set up as
# pgx's CI does (testsetup/pg_hba.conf and testsetup/postgresql_setup.sql:
# the database pgx_test with hstore, ltree and the domain uint64, the roles
# pgx_md5, pgx_pw, pgx_scram, ...), without TLS, plus the role
# TestTextCodecACLItemRoleWithSpecialCharacters looks for (the setup SQL
# misspells it, so the test skips in pgx's CI). Each run gets a fresh
# pgx_test, so what a failed test leaves behind cannot break the other run.
# Both runs set PGX_TEST_DATABASE (as pgx_md5, md5 authentication, like CI)
# and PGX_TEST_TCP_CONN_STRING, PGX_TEST_MD5_PASSWORD_CONN_STRING,
# PGX_TEST_PLAIN_PASSWORD_CONN_STRING and PGX_TEST_SCRAM_PASSWORD_CONN_STRING;
# the TLS, Unix socket, PgBouncer, CrateDB and OAuth variables are left unset,
# so those tests skip. The tests run with go test -count=1 -json -p 1.
#
# It needs the Debian package postgresql-15 (make deps installs it) and Go.
# As root, PostgreSQL runs as the OS user postgres. A full run takes about
# 4 minutes on 2 cores (1.5 minutes each run, plus building the tests).
# Exit status: 0 when nothing passes directly and fails through the proxy,
# 1 when something does, 2 on a usage or setup error (or when the direct run
# passes no test at all).
set -euo pipefail
prog=pgx-suite die_status=2
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

pgx_version=v5.12.0
proxy_bin="" run_regex="" keep="" timeout=30m
pkgs="./ ./pgconn/... ./pgtype/... ./pgxpool/... ./stdlib/..."
while [ $# -gt 0 ]; do
  case "$1" in
    --proxy-bin|--run|--pkgs|--timeout|--keep)
      [ $# -ge 2 ] || { echo "pgx-suite: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --proxy-bin) proxy_bin=$2; shift ;;
    --run) run_regex=$2; shift ;;
    --pkgs) pkgs=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    --keep) keep=$2; shift ;;
    -h|--help) print_help "$0"; exit 0 ;;
    *) bad_argument "$1" ;;
  esac
  shift
done

repo=$(cd "$(dirname "$0")/.." && pwd)
start_time=$SECONDS

# --- tools -------------------------------------------------------------------
find_postgres
command -v go >/dev/null 2>&1 || die "go not found"
if [ -n "$proxy_bin" ]; then
  [ -x "$proxy_bin" ] || die "--proxy-bin $proxy_bin is not an executable file"
  proxy_bin=$(cd "$(dirname "$proxy_bin")" && pwd)/$(basename "$proxy_bin")
fi

# As root, PostgreSQL refuses to run: it runs as user postgres.
as_postgres

# --- work directory and cleanup ----------------------------------------------
# kill_tree PID: PID and its descendants (go test runs the test binaries as
# its children), children first.
# shellcheck disable=SC2317 # called from the trap
kill_tree() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

# stop_leftovers DIR: the proxy and server a --keep run left in DIR.
stop_leftovers() {
  local pid
  if [ -f "$1/proxy.pid" ]; then
    pid=$(cat "$1/proxy.pid")
    # Only if that pid is still a pgsketch-proxy: pids are reused.
    if [ -n "$pid" ] && grep -qa 'serve' "/proc/$pid/cmdline" 2>/dev/null &&
      grep -qa 'pgsketch' "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$1/proxy.pid"
  fi
  stop_postgres "$1"
}

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
  if [ -n "$(ls -A "$work")" ] && [ ! -f "$work/.pgx-suite" ]; then
    die "--keep $keep is neither empty nor a directory an earlier --keep run made"
  fi
  stop_leftovers "$work"
  rm -rf "${work:?}/pg" "${work:?}/pgx" "$work"/*.log "$work"/*.json "$work"/*.stderr "$work/report.txt" \
    "$work/pgxsuite" "$work/pgsketch-proxy" "$work/setup.sql"
else
  work=$(mktemp -d /tmp/pgsketch-pgx-suite.XXXXXX)
fi
touch "$work/.pgx-suite"
proxy_pid="" test_pid=""
# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  if [ -n "$test_pid" ]; then kill_tree "$test_pid"; wait "$test_pid" 2>/dev/null || true; fi
  if [ -n "$keep" ] && [ "$code" -ne 2 ]; then
    say "kept in $work: the cluster (port ${pg_port:-?}) and the proxy (${proxy_addr:-?}) still run;"
    say "  stop them with: kill \$(cat $work/proxy.pid); ${as_pg[*]:+${as_pg[*]} }$pg_bin/pg_ctl stop -D $work/pg"
    exit "$code"
  fi
  stop_process "$proxy_pid"
  stop_leftovers "$work"
  if [ -z "$keep" ]; then rm -rf "$work"; fi
  exit "$code"
}
on_exit cleanup
share_with_postgres "$work"
sock=$work
[ ${#sock} -le 80 ] || die "the work directory's path is too long for a Unix socket; use a shorter --keep DIR"

# --- pgx source --------------------------------------------------------------
modcache=$(go env GOMODCACHE)
pgx_src=$modcache/github.com/jackc/pgx/v5@$pgx_version
if [ ! -d "$pgx_src" ]; then
  say "go mod download github.com/jackc/pgx/v5@$pgx_version"
  (cd "$work" && GOFLAGS=-mod=mod GOWORK=off go mod download github.com/jackc/pgx/v5@$pgx_version) ||
    die "go mod download github.com/jackc/pgx/v5@$pgx_version failed"
fi
cp -r "$pgx_src" "$work/pgx"
chmod -R u+w "$work/pgx"

# --- builds (one at a time) ----------------------------------------------------
say "building the comparison tool (scripts/pgxsuite)"
(cd "$repo" && go build -o "$work/pgxsuite" ./scripts/pgxsuite) || die "go build ./scripts/pgxsuite failed"
proxy_desc=$proxy_bin
if [ -z "$proxy_bin" ]; then
  say "building pgsketch-proxy from $repo"
  (cd "$repo" && go build -o "$work/pgsketch-proxy" ./cmd/pgsketch-proxy) ||
    die "go build ./cmd/pgsketch-proxy failed (--proxy-bin PATH to test a binary built elsewhere)"
  proxy_bin=$work/pgsketch-proxy
  proxy_desc="built from $repo at $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
  if [ -n "$(cd "$repo" && git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    proxy_desc="$proxy_desc (with uncommitted changes)"
  fi
fi
read -r -a pkg_list <<<"$pkgs"
[ ${#pkg_list[@]} -gt 0 ] || die "--pkgs is empty"
say "compiling the pgx tests: ${pkg_list[*]}"
(cd "$work/pgx" && GOWORK=off go test -count=1 -run '^$' "${pkg_list[@]}" >"$work/compile.log" 2>&1) ||
  { tail -n 30 "$work/compile.log" >&2; die "the pgx tests do not compile"; }

# --- PostgreSQL ----------------------------------------------------------------
# The locale pgx's own scripts/devdb.rb prefers: en_US.UTF-8, else C.UTF-8, else C.
norm() { tr '[:upper:]' '[:lower:]' | tr -d '_.-'; }
have_locales=$(locale -a 2>/dev/null | norm || true)
locale=C
for l in en_US.UTF-8 C.UTF-8; do
  if grep -qx "$(norm <<<"$l")" <<<"$have_locales"; then locale=$l; break; fi
done
pg_port=$(free_port)
say "PostgreSQL ($pg_bin, locale $locale) on 127.0.0.1:$pg_port in $work"
init_postgres "$work" "$locale"
# pgx's pg_hba.conf: trust on the Unix socket; md5, scram-sha-256 and
# password for pgx_md5, pgx_scram and pgx_pw on 127.0.0.1 (its hostssl
# lines match nothing: the server has no TLS).
cp "$work/pgx/testsetup/pg_hba.conf" "$work/pg/pg_hba.conf"
[ ${#as_pg[@]} -eq 0 ] || chown postgres: "$work/pg/pg_hba.conf"
start_postgres "$work" "$pg_port" "$sock"
pg_psql() { PGOPTIONS="-c client_min_messages=warning" "$psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$pg_port" -U postgres "$@"; }

# testsetup/postgresql_setup.sql in a template database, without the
# extensions this server lacks. Each run copies it to a fresh pgx_test.
sharedir=$("$pg_bin/pg_config" --sharedir 2>/dev/null || echo /usr/share/postgresql/15)
cp "$work/pgx/testsetup/postgresql_setup.sql" "$work/setup.sql"
for ext in hstore ltree; do
  if [ ! -f "$sharedir/extension/$ext.control" ]; then
    say "the extension $ext is not installed: its tests will fail in both runs"
    sed -i "/^create extension $ext;/d" "$work/setup.sql"
  fi
done
pg_psql -d postgres -c "CREATE DATABASE pgx_suite_template" >/dev/null || die "CREATE DATABASE failed"
pg_psql -d pgx_suite_template -f "$work/setup.sql" >"$work/setup.log" 2>&1 ||
  { cat "$work/setup.log" >&2; die "testsetup/postgresql_setup.sql failed"; }
# TestTextCodecACLItemRoleWithSpecialCharacters looks for a role named
# ` tricky, ' } " \ test user `; the setup SQL's \\ makes its name have two
# backslashes (psql keeps both in a quoted identifier), so that test skips in
# pgx's CI. This role lets it run.
pg_psql -d postgres >>"$work/setup.log" 2>&1 <<'SQL' || { cat "$work/setup.log" >&2; die "CREATE ROLE failed"; }
create user " tricky, ' } "" \ test user " superuser password 'secret';
SQL
fresh_db() {
  pg_psql -d postgres -c "DROP DATABASE IF EXISTS pgx_test WITH (FORCE)" -c "CREATE DATABASE pgx_test TEMPLATE pgx_suite_template" \
    >/dev/null || die "could not make a fresh database pgx_test"
}

# --- pgsketch-proxy ------------------------------------------------------------
"$proxy_bin" serve --listen 127.0.0.1:0 --upstream "postgres://127.0.0.1:$pg_port/?sslmode=disable" 2>"$work/proxy.log" &
proxy_pid=$!
echo "$proxy_pid" >"$work/proxy.pid"
proxy_addr=""
for _ in $(seq 1 150); do
  proxy_addr=$(grep -m 1 '"msg":"listening"' "$work/proxy.log" 2>/dev/null | grep -o '"addr":"[^"]*"' | cut -d'"' -f4 || true)
  [ -z "$proxy_addr" ] || break
  kill -0 "$proxy_pid" 2>/dev/null || { cat "$work/proxy.log" >&2; proxy_pid=""; die "pgsketch-proxy serve exited"; }
  sleep 0.2
done
[ -n "$proxy_addr" ] || { tail -n 20 "$work/proxy.log" >&2; die "pgsketch-proxy serve did not listen within 30 s"; }
say "pgsketch-proxy ($proxy_desc) serve on $proxy_addr"

# --- the runs ------------------------------------------------------------------
# run_suite NAME HOST PORT: the suite against HOST:PORT, go test -json output
# in $work/NAME.json; sets ${NAME}_secs.
run_suite() {
  local name=$1 host=$2 port=$3 t0=$SECONDS st=0 done_pkgs=0 n
  local common="host=$host port=$port dbname=pgx_test"
  local args=(-count=1 -json -p 1 -timeout "$timeout")
  [ -z "$run_regex" ] || args+=(-run "$run_regex")
  fresh_db
  say "$name run: go test ${args[*]} ${pkg_list[*]} (PGX_TEST_DATABASE on $host:$port)"
  (
    cd "$work/pgx"
    # Nothing from the caller's environment: no PG* defaults, no other PGX_*.
    while read -r v; do
      case "$v" in PG*) unset "$v" ;; esac
    done < <(compgen -e)
    export GOWORK=off
    export PGX_TEST_DATABASE="$common user=pgx_md5 password=secret"
    export PGX_TEST_TCP_CONN_STRING="$common user=pgx_md5 password=secret"
    export PGX_TEST_MD5_PASSWORD_CONN_STRING="$common user=pgx_md5 password=secret"
    export PGX_TEST_PLAIN_PASSWORD_CONN_STRING="$common user=pgx_pw password=secret"
    export PGX_TEST_SCRAM_PASSWORD_CONN_STRING="$common user=pgx_scram password=secret channel_binding=disable"
    exec go test "${args[@]}" "${pkg_list[@]}"
  ) >"$work/$name.json" 2>"$work/$name.stderr" &
  test_pid=$!
  # Progress: each package as it finishes.
  while kill -0 "$test_pid" 2>/dev/null; do
    sleep 5
    n=$(grep -cE '"Action":"(pass|fail|skip)","Package":"[^"]*","Elapsed"' "$work/$name.json" || true)
    if [ "$n" -gt "$done_pkgs" ]; then
      grep -E '"Action":"(pass|fail|skip)","Package":"[^"]*","Elapsed"' "$work/$name.json" | sed -n "$((done_pkgs + 1)),${n}p" |
        sed 's/.*"Action":"\([a-z]*\)","Package":"\([^"]*\)","Elapsed":\([0-9.]*\).*/\1 \2 (\3 s)/' |
        while read -r line; do say "  $name: $line"; done
      done_pkgs=$n
    fi
  done
  wait "$test_pid" || st=$?
  test_pid=""
  printf -v "${name}_secs" %s $((SECONDS - t0))
  say "$name run: $((SECONDS - t0)) s, go test exit status $st, $(grep -c '"Action":"fail","Package":"[^"]*","Test"' "$work/$name.json" || true) failed tests"
}

run_suite direct 127.0.0.1 "$pg_port"
if [ -s "$work/direct.stderr" ]; then say "direct run, stderr:"; tail -n 20 "$work/direct.stderr" >&2; fi
if ! grep -q '"Action":"pass","Package":"[^"]*","Test"' "$work/direct.json"; then
  tail -n 20 "$work/direct.json" >&2
  die "the direct run passed no test: the setup is broken"
fi
run_suite proxy "${proxy_addr%:*}" "${proxy_addr##*:}"
if [ -s "$work/proxy.stderr" ]; then say "proxy run, stderr:"; tail -n 20 "$work/proxy.stderr" >&2; fi
if ! kill -0 "$proxy_pid" 2>/dev/null; then
  st=0; wait "$proxy_pid" || st=$?; proxy_pid=""
  say "pgsketch-proxy exited during the run (status $st); its log ends:"; tail -n 20 "$work/proxy.log" >&2
fi

# --- report --------------------------------------------------------------------
echo
echo "pgx $pgx_version test suite, directly and through pgsketch-proxy"
echo "  packages: ${pkg_list[*]}${run_regex:+, -run $run_regex}"
echo "  $("$pg_bin/postgres" --version), $(go version | awk '{print $3}'), pgsketch-proxy $proxy_desc"
# shellcheck disable=SC2154 # set by run_suite through printf -v
echo "  direct run ${direct_secs} s, proxy run ${proxy_secs} s, $((SECONDS - start_time)) s in all"
echo
st=0
"$work/pgxsuite" -direct "$work/direct.json" -proxy "$work/proxy.json" >"$work/report.txt" || st=$?
cat "$work/report.txt"
[ "$st" -le 1 ] || die "the comparison failed (exit status $st)"
exit "$st"
