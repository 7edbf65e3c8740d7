#!/usr/bin/env bash
# Installs what `make run` or `make test` needs and a fresh Debian 12 machine
# with Go lacks, from Debian's packages, each only what it needs:
#
#   scripts/install-deps.sh run    the demo: PostgreSQL 15 and its hll
#                                  extension, psql (to connect to the demo),
#                                  gcc (cgo, for the SQL parser)
#   scripts/install-deps.sh test   the demo's, and Node.js with npm (the
#                                  node-postgres client test) and Chromium
#                                  with its driver (the status page is tested
#                                  in headless Chromium); the default
#   scripts/install-deps.sh --needs run|test
#                                  prints the packages that set needs, one a
#                                  line, installed or not, and installs nothing
#
# As root it runs apt-get; otherwise it names the packages and exits 1.
set -euo pipefail

pg_bin=/usr/lib/postgresql/15/bin
pg_ext=/usr/share/postgresql/15/extension

needs_only=false
if [ "${1:-}" = "--needs" ]; then
  needs_only=true
  shift
fi
set_name=${1:-test}
case "$set_name" in
  run|test) ;;
  *) echo "usage: $0 [--needs] run|test" >&2; exit 2 ;;
esac

# package name, then the check that it is there
demo=(
  "gcc:command -v gcc"
  "postgresql-15:[ -x $pg_bin/initdb ] && [ -x $pg_bin/pg_ctl ] && [ -x $pg_bin/postgres ]"
  "postgresql-15-hll:[ -f $pg_ext/hll.control ]"
  "postgresql-client-15:command -v psql"
)
tests=(
  "nodejs:command -v node"
  "npm:command -v npm"
  "chromium:command -v chromium"
  "chromium-driver:command -v chromedriver"
)
wanted=("${demo[@]}")
if [ "$set_name" = test ]; then
  wanted+=("${tests[@]}")
fi

missing=()
for w in "${wanted[@]}"; do
  pkg=${w%%:*}
  if $needs_only; then
    echo "$pkg"
    continue
  fi
  bash -c "${w#*:}" >/dev/null 2>&1 || missing+=("$pkg")
done
if $needs_only || [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "pgsketch needs the Debian packages: ${missing[*]}" >&2
  echo "Install them as root, then run this again:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "installing ${missing[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
