#!/usr/bin/env bash
# A throwaway PostgreSQL server for the PostgreSQL store's tests and benchmarks.
#
#   eval "$(bash scripts/postgres.sh start)"   # exports LIVERELAY_POSTGRES_URL and LIVERELAY_POSTGRES_DIR
#   bash scripts/postgres.sh stop "$LIVERELAY_POSTGRES_DIR"
#
# `start` installs Debian's postgresql if no server binaries are present (needs root), creates a
# fresh cluster in a temporary directory (owned by the postgres user when run as root: the server
# refuses to run as root), starts it on 127.0.0.1 on a free port (no systemd, no Debian cluster
# registry), creates the role and database "liverelay" with a random password, and prints the
# export lines on stdout. Progress goes to stderr, never the password.
# `stop` shuts the server down (fast) and removes its directory. Idempotent.
set -euo pipefail

say() { echo "postgres.sh: $*" >&2; }

find_bindir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  return 1
}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  local bindir
  if ! bindir="$(find_bindir)"; then
    [ "$(id -u)" -eq 0 ] || { say "no PostgreSQL server binaries and not root: apt-get install postgresql"; exit 1; }
    say "installing Debian's postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
    bindir="$(find_bindir)" || { say "postgresql installed but no initdb found"; exit 1; }
  fi
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    say "no postgres user (the postgresql package creates it)"; exit 1
  fi

  local dir port password
  dir="$(mktemp -d /tmp/liverelay-pg-XXXXXX)"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  chmod 700 "$dir"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  password="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"

  # Local socket connections (only the owner can reach the socket in $dir) are trusted, for
  # setup; TCP needs the password, as a real deployment would.
  as_owner "$bindir/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  # Tests run many stores (each with a pool) at once.
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=128MB" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  as_owner "$bindir/psql" -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q >/dev/null <<SQL
CREATE ROLE liverelay LOGIN PASSWORD '$password';
CREATE DATABASE liverelay OWNER liverelay;
SQL
  say "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $dir (user liverelay, database liverelay)"
  echo "export LIVERELAY_POSTGRES_URL='postgres://liverelay:$password@127.0.0.1:$port/liverelay?sslmode=disable'"
  echo "export LIVERELAY_POSTGRES_DIR='$dir'"
}

stop() {
  local dir="${1:-${LIVERELAY_POSTGRES_DIR:-}}" bindir
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  case "$dir" in /tmp/liverelay-pg-*) ;; *) say "refusing to remove $dir"; exit 1 ;; esac
  if bindir="$(find_bindir)" && [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  say "stopped and removed $dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
