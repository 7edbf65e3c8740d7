# shellcheck shell=bash
# What scripts/bench-relay.sh and scripts/pgx-suite.sh share: messages, the
# help text, the PostgreSQL 15 programs, running them as the OS user
# postgres, free ports and a throwaway server. Source it after setting prog
# (what messages start with) and die_status (the exit status of die).

say() { echo "$prog: $*" >&2; }
die() {
  say "$*"
  exit "$die_status"
}

# print_help SCRIPT: the comment at the top of SCRIPT, without its #s.
print_help() { awk 'NR == 1 {next} !/^#/ {exit} {sub(/^# ?/, ""); print}' "$1"; }

# bad_argument ARG: says ARG is not an argument the script takes; exits 2.
bad_argument() {
  echo "$prog: unknown argument $1 (see --help)" >&2
  exit 2
}

# find_postgres sets pg_bin, the directory of the PostgreSQL server's
# programs (PGSKETCH_PG_BINDIR, Debian's PostgreSQL 15 or pg_config's),
# and psql.
find_postgres() {
  local d
  pg_bin=""
  for d in "${PGSKETCH_PG_BINDIR:-}" /usr/lib/postgresql/15/bin "$(pg_config --bindir 2>/dev/null || true)"; do
    if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then pg_bin=$d; break; fi
  done
  [ -n "$pg_bin" ] || die "no PostgreSQL server binaries: install the Debian package postgresql-15 (make deps does)"
  psql=$(pg_program psql) || die "psql not found"
}

# pg_program NAME prints the path of PostgreSQL's program NAME: in pg_bin,
# else on the PATH.
pg_program() {
  if [ -x "$pg_bin/$1" ]; then echo "$pg_bin/$1"; else command -v "$1"; fi
}

# as_postgres sets as_pg, what runs a command as the OS user postgres when
# this runs as root (PostgreSQL refuses to run as root), else nothing.
as_postgres() {
  as_pg=()
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root, but there is no OS user postgres (Debian package postgresql-15 creates it)"
    as_pg=(runuser -u postgres --)
  fi
}

# on_exit FUNC: FUNC runs when the script exits, also on Ctrl-C (status
# 130) and SIGTERM (143).
on_exit() {
  trap "$1" EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# share_with_postgres DIR: DIR readable by all and, with as_pg, owned by
# postgres.
share_with_postgres() {
  chmod 755 "$1"
  [ ${#as_pg[@]} -eq 0 ] || chown postgres: "$1"
}

# stop_process PID ends the process PID (if not empty), a child of this
# shell, and waits for it.
stop_process() {
  if [ -n "$1" ]; then kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; fi
}

# free_port prints a TCP port nothing listens on at 127.0.0.1.
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  die "no free port found"
}

# init_postgres DIR LOCALE: a new cluster in DIR/pg (its log DIR/initdb.log),
# trusting every local connection.
init_postgres() {
  "${as_pg[@]}" "$pg_bin/initdb" -D "$1/pg" -U postgres --auth=trust -E UTF8 --locale="$2" --no-sync \
    >"$1/initdb.log" 2>&1 || { cat "$1/initdb.log" >&2; die "initdb failed"; }
}

# start_postgres DIR PORT SOCKETDIR [SETTINGS]: starts the cluster in DIR/pg
# on 127.0.0.1:PORT and a Unix socket in SOCKETDIR, without durability,
# with the further -c SETTINGS; its log is DIR/postgres.log.
start_postgres() {
  "${as_pg[@]}" "$pg_bin/pg_ctl" start -w -t 60 -D "$1/pg" -l "$1/postgres.log" -o "-c port=$2 \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories=$3 ${4:-} \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null ||
    { tail -n 30 "$1/postgres.log" >&2; die "PostgreSQL did not start"; }
}

# stop_postgres DIR: stops the cluster in DIR/pg at once, if it runs.
stop_postgres() {
  if [ -f "$1/pg/postmaster.pid" ]; then
    "${as_pg[@]}" "$pg_bin/pg_ctl" stop -D "$1/pg" -m immediate >/dev/null 2>&1 || true
  fi
}

# build_proxy_at REPO REV DIR BIN: builds pgsketch-proxy from the git
# revision REV of the repository REPO (its tree unpacked into DIR) as BIN.
build_proxy_at() {
  mkdir -p "$3"
  git -C "$1" archive "$2" | tar -x -C "$3" || die "git archive $2 failed"
  (cd "$3" && go build -o "$4" ./cmd/pgsketch-proxy) || die "go build of $2 failed"
}
