#!/usr/bin/env bash
# Make sure a PostgreSQL server and its JDBC driver are installed, for the Spark sink tests.
#
#   bash scripts/ensure_postgres.sh
#
# Needs (Debian packages):
#   postgresql               initdb, pg_ctl, postgres, pg_isready under /usr/lib/postgresql/*/bin
#   libpostgresql-jdbc-java  /usr/share/java/postgresql.jar
#
# Idempotent and fast (< 1 s, no apt call) when both are present. When something is missing it
# installs it with apt-get (running `apt-get update` at most once per machine boot) if it runs as
# root; otherwise it prints the exact command to run and exits 1. On success it prints one line.
# The tests start their own throwaway server (tests/pg_server.py); this script starts nothing.
set -euo pipefail

jar=/usr/share/java/postgresql.jar
stamp=/tmp/.lowwater-apt-updated   # shared with ./dev: apt-get update only once

pg_bin() {
  # Newest /usr/lib/postgresql/<version>/bin that has everything the tests use.
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] && [ -x "$d/pg_isready" ]
    then
      echo "$d"; return 0
    fi
  done
  return 1
}

missing() {
  local m=()
  pg_bin >/dev/null || m+=(postgresql)
  [ -f "$jar" ] || m+=(libpostgresql-jdbc-java)
  echo "${m[*]:-}"
}

need="$(missing)"
if [ -n "$need" ]; then
  # shellcheck disable=SC2086
  cmd="apt-get update && apt-get install -y --no-install-recommends $need"
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_postgres: missing $need; install as root with: $cmd" >&2
    exit 1
  fi
  log="$(mktemp /tmp/lowwater-apt.XXXXXX.log)"
  export DEBIAN_FRONTEND=noninteractive
  apt_update() { apt-get -o DPkg::Lock::Timeout=300 update -qq >>"$log" 2>&1 && touch "$stamp"; }
  apt_install() {
    # shellcheck disable=SC2086
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends $need >>"$log" 2>&1
  }
  updated=0
  if [ ! -f "$stamp" ]; then apt_update && updated=1; fi
  if ! apt_install; then
    # A stale package list is the usual cause: refresh once and retry.
    if [ "$updated" = 1 ] || ! apt_update || ! apt_install; then
      echo "ensure_postgres: '$cmd' failed; last lines of $log:" >&2
      tail -n 20 "$log" >&2
      exit 1
    fi
  fi
  rm -f "$log"
  need="$(missing)"
  if [ -n "$need" ]; then
    echo "ensure_postgres: still missing after install: $need" >&2
    exit 1
  fi
fi

bin="$(pg_bin)"
echo "postgres: ok (PostgreSQL $("$bin/postgres" --version | awk '{print $3}') in $bin, JDBC $jar)"
