#!/usr/bin/env bash
# Citus for PostgreSQL 15: builds and installs Citus 13.2.2 (the last Citus
# line that supports PostgreSQL 15) from the vendored source tarball, for the
# Citus end-to-end suite (make test-citus). Idempotent: it does nothing when
# Citus 13.2.2 is already installed for PostgreSQL 15, and it keeps the built
# tree in a cache, so that a later install (after the package files were
# removed) takes a minute instead of ten.
#
#   scripts/citus.sh [--force] [--check]
#
#   --force   build and install even when Citus 13.2.2 is installed (the
#             cached build is still used when its headers match)
#   --check   install nothing: exit 0 when Citus 13.2.2 is installed for
#             PostgreSQL 15, 1 when not
#
# Environment:
#   PGSKETCH_CITUS_TARBALL  the source tarball; default
#                           ../shared/vendor/citus/citus-13.2.2.tar.gz relative
#                           to the repository root. Its sha256 must be the one
#                           below (a git archive of the tag v13.2.2).
#   PGSKETCH_CACHE_DIR      where builds are kept; default
#                           ${XDG_CACHE_HOME:-~/.cache}/pgsketch. The build
#                           lives in citus-13.2.2-<first 12 of the sha256>/.
#
# Steps: verify the tarball's sha256; install the Debian packages the build
# needs and only those (postgresql-server-dev-15 at the installed
# postgresql-15's version, so the module is built against the headers of the
# server that loads it; the headers of libcurl, lz4, zstd and Kerberos, which
# PostgreSQL's libpq-be.h includes); unpack; patch (below);
# ./configure PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config; make -j2;
# make install (as root). Without root it names what to run and exits 1.
# It needs postgresql-15 installed first (make deps-run does that).
#
# 5 to 8 minutes on 2 cores, then nothing to do (0.1 s); a reinstall from
# the cache takes 8 s. See docs/testing.md.
set -euo pipefail
prog=citus.sh die_status=1
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

citus_version=13.2.2
citus_sha256=dd2453caec20a830e5e63f1def5c5a98cb6f57ae510407cdcd800916fcdab430
pg_config=/usr/lib/postgresql/15/bin/pg_config

force=false check=false
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=true ;;
    --check) check=true ;;
    -h|--help) print_help "$0"; exit 0 ;;
    *) bad_argument "$1" ;;
  esac
  shift
done

repo=$(cd "$(dirname "$0")/.." && pwd)
tarball=${PGSKETCH_CITUS_TARBALL:-$repo/../shared/vendor/citus/citus-$citus_version.tar.gz}

# installed: Citus $citus_version's module and control file are in PostgreSQL
# 15's directories. citus_version() prints "Citus 13.2.2 on ...", a string
# the module holds.
installed() {
  [ -x "$pg_config" ] || return 1
  local lib ext
  lib=$("$pg_config" --pkglibdir)/citus.so
  ext=$("$pg_config" --sharedir)/extension/citus.control
  [ -f "$lib" ] && [ -f "$ext" ] && grep -aq "Citus $citus_version on " "$lib"
}

if $check; then
  if installed; then echo "Citus $citus_version is installed for PostgreSQL 15"; exit 0; fi
  echo "Citus $citus_version is not installed for PostgreSQL 15 (scripts/citus.sh installs it)"
  exit 1
fi
if installed && ! $force; then
  say "Citus $citus_version is installed for PostgreSQL 15 ($("$pg_config" --pkglibdir)/citus.so); nothing to do"
  exit 0
fi

start=$SECONDS
[ -f "$tarball" ] || die "no Citus source at $tarball: set PGSKETCH_CITUS_TARBALL to citus-$citus_version.tar.gz (a git archive of github.com/citusdata/citus tag v$citus_version, sha256 $citus_sha256)"
sum=$(sha256sum "$tarball" | cut -d' ' -f1)
[ "$sum" = "$citus_sha256" ] || die "$tarball has sha256 $sum, want $citus_sha256"

# Debian packages. postgresql-15 must be there already: its version picks the
# headers' version.
pg_version=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
[ -n "$pg_version" ] || die "the Debian package postgresql-15 is not installed (make deps-run installs it)"
has_pkg() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }
missing=()
dev_version=$(dpkg-query -W -f='${db:Status-Status} ${Version}' postgresql-server-dev-15 2>/dev/null || true)
[ "$dev_version" = "installed $pg_version" ] || missing+=("postgresql-server-dev-15=$pg_version")
for p in libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev make gcc; do
  has_pkg "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "building Citus needs the Debian packages: ${missing[*]}"
    die "install them as root (sudo apt-get update && sudo apt-get install -y ${missing[*]}), or run this as root"
  fi
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

cache_root=${PGSKETCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pgsketch}
cache=$cache_root/citus-$citus_version-${citus_sha256:0:12}
mkdir -p "$cache_root"
# One build at a time per cache.
exec 9>"$cache.lock"
flock 9

# The cached build is good when it finished against the same headers.
headers="$("$pg_config" --version), postgresql-server-dev-15 $pg_version"
src=$cache/citus-$citus_version
if [ -f "$cache/built" ] && [ "$(cat "$cache/built")" = "$headers" ] && [ -d "$src" ]; then
  say "using the build in $cache (made against $headers)"
else
  say "building Citus $citus_version against $headers in $cache (5 to 8 minutes on 2 cores; log: $cache/build.log)"
  rm -rf "$cache"
  mkdir -p "$cache"
  tar -xzf "$tarball" -C "$cache"
  [ -d "$src" ] || die "$tarball does not unpack to citus-$citus_version/"

  # The one patch. PostgreSQL 15.20 (Debian 12's current 15) declares
  # have_createdb_privilege() in commands/dbcommands.h; Citus 13.2.2's
  # pg_version_compat.h defines a static inline function of that name for
  # PostgreSQL < 16, and the build fails: "static declaration of
  # 'have_createdb_privilege' follows non-static declaration". When the
  # server's header declares it, a #define in front of Citus's definition
  # renames that definition and every later call of it to
  # citus_have_createdb_privilege: Citus keeps its own copy (same body) and
  # neither redefines nor calls the server's, so the module needs no such
  # symbol from the server and loads into older 15.x too. (Checked against
  # 15.20's headers: the 26 files including commands/dbcommands.h fail to
  # compile without it and compile with it.)
  compat=$src/src/include/pg_version_compat.h
  if grep -q 'have_createdb_privilege' "$("$pg_config" --includedir-server)/commands/dbcommands.h"; then
    sed -i '/^static inline bool$/{N;s/^static inline bool\nhave_createdb_privilege(void)$/#define have_createdb_privilege citus_have_createdb_privilege\n&/}' "$compat"
    grep -q '^#define have_createdb_privilege citus_have_createdb_privilege$' "$compat" ||
      die "could not patch $compat (its have_createdb_privilege definition moved?)"
    say "patched pg_version_compat.h: the server's commands/dbcommands.h declares have_createdb_privilege"
  fi

  (
    cd "$src"
    ./configure PG_CONFIG="$pg_config"
    make -j2
  ) >"$cache/build.log" 2>&1 || { tail -n 40 "$cache/build.log" >&2; die "the Citus build failed (log: $cache/build.log)"; }
  echo "$headers" >"$cache/built"
  say "built in $((SECONDS - start)) s"
fi

if [ "$(id -u)" -ne 0 ]; then
  die "installing into PostgreSQL's directories needs root: sudo make -C $src install (or run this as root)"
fi
make -C "$src" install >"$cache/install.log" 2>&1 || { tail -n 40 "$cache/install.log" >&2; die "make install failed (log: $cache/install.log)"; }
installed || die "make install ran, but Citus $citus_version is not in $("$pg_config" --pkglibdir)"
say "Citus $citus_version installed for PostgreSQL 15 in $((SECONDS - start)) s"
