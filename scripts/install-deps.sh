#!/usr/bin/env bash
# Installs what `make run` and `make test` need and a fresh Debian 12 machine
# with Go lacks, from Debian's packages: PostgreSQL 15 and its hll extension,
# psql, Node.js with npm (the node-postgres client test), gcc (cgo, for the
# SQL parser), and Chromium with its driver (the status page is tested in
# headless Chromium).
# As root it runs apt-get; otherwise it names the packages and exits 1.
set -euo pipefail

pg_bin=/usr/lib/postgresql/15/bin
pg_ext=/usr/share/postgresql/15/extension

missing=()
# The SQL parser of rewrite/ (pg_query_go) is cgo: it needs a C compiler.
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ -x "$pg_bin/initdb" ] && [ -x "$pg_bin/pg_ctl" ] && [ -x "$pg_bin/postgres" ] || missing+=(postgresql-15)
[ -f "$pg_ext/hll.control" ] || missing+=(postgresql-15-hll)
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client-15)
# node-postgres runs in the end-to-end tests (npm ci of testcontainers_test/testdata/node).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# The status page test runs headless Chromium.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)

if [ ${#missing[@]} -eq 0 ]; then
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
