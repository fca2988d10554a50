#!/usr/bin/env bash
# Store through the RPC (issue 4, item 5): durable RegisterToken calls/s through `liverelay serve`
# (TLS, SQLite store in a fresh data directory; then the in-memory store for comparison).
#
#   Benchmarks/StoreRPC/run.sh [--no-build] [--duration 10] [--warmup 3] [--shapes "4x64 16x64"] [--stores "sqlite memory postgres"]
#
# --stores postgres: `serve --store postgres` against $LIVERELAY_POSTGRES_URL (given to serve through the
# environment, not argv), a fresh schema per run, dropped afterwards; without the variable, a throwaway
# server from scripts/postgres.sh, stopped at the end.
#
# Builds `liverelay` and `lr-store-load` in release (scratch path .build-store-rpc, or
# $SCRATCH), then for every store and shape: a fresh data directory, `serve --store S` on a free
# port, the key it prints, lr-store-load -c C -d D against it (with its pid for CPU accounting),
# SIGTERM. The server is always stopped, even if this script is interrupted.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SCRATCH="${SCRATCH:-$ROOT/.build-store-rpc}"
DURATION=10 WARMUP=3 BUILD=1 SHAPES="4x64 16x64" STORES="sqlite memory"
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --duration) DURATION="$2"; shift ;;
    --warmup) WARMUP="$2"; shift ;;
    --shapes) SHAPES="$2"; shift ;;
    --stores) STORES="$2"; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$BUILD" = 1 ]; then
  (cd "$HERE" && swift build -c release --scratch-path "$SCRATCH" --product liverelay \
    && swift build -c release --scratch-path "$SCRATCH" --product lr-store-load)
fi
BIN="$SCRATCH/release"

SERVER_PID=""
WORK=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
  [ -n "$WORK" ] && rm -rf "$WORK"
  WORK=""
  if [ -n "$PG_SCHEMA" ]; then
    psql -q "${LIVERELAY_POSTGRES_URL%%\?*}" -c "DROP SCHEMA IF EXISTS $PG_SCHEMA CASCADE" >/dev/null 2>&1 || true
    PG_SCHEMA=""
  fi
}
PG_SCHEMA="" PG_OWN=""
finish() {
  cleanup
  [ -n "$PG_OWN" ] && bash "$ROOT/scripts/postgres.sh" stop "$PG_OWN"
  PG_OWN=""
}
trap finish EXIT INT TERM
if [[ " $STORES " == *" postgres "* ]] && [ -z "${LIVERELAY_POSTGRES_URL:-}" ]; then
  pg_env="$(bash "$ROOT/scripts/postgres.sh" start)"
  eval "$pg_env"
  PG_OWN="$LIVERELAY_POSTGRES_DIR"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
for store in $STORES; do
  for shape in $SHAPES; do
    c="${shape%x*}" d="${shape#*x}"
    WORK="$(mktemp -d /tmp/liverelay-store-rpc-XXXXXX)"
    port="$(free_port)"
    if [ "$store" = postgres ]; then
      PG_SCHEMA="rpcbench_$$_${c}x${d}"
      case "$LIVERELAY_POSTGRES_URL" in *\?*) sep='&' ;; *) sep='?' ;; esac
      LIVERELAY_POSTGRES_URL="$LIVERELAY_POSTGRES_URL${sep}schema=$PG_SCHEMA" \
        "$BIN/liverelay" serve --host 127.0.0.1 --port "$port" --data-dir "$WORK/data" --store postgres \
        --log-level warning >"$WORK/serve.out" 2>&1 &
    else
      "$BIN/liverelay" serve --host 127.0.0.1 --port "$port" --data-dir "$WORK/data" --store "$store" \
        --log-level warning >"$WORK/serve.out" 2>&1 &
    fi
    SERVER_PID=$!
    for _ in $(seq 600); do grep -qs "listening on" "$WORK/serve.out" && break; kill -0 "$SERVER_PID" || break; sleep 0.1; done
    grep -q "listening on" "$WORK/serve.out" || { cat "$WORK/serve.out"; echo "serve did not start" >&2; exit 1; }
    key="$(sed -n 's/^export LIVERELAY_API_KEY=//p' "$WORK/serve.out")"
    echo "== store $store, $c connections x $d in flight"
    "$BIN/lr-store-load" --port "$port" --api-key "$key" --ca "$WORK/data/cert.pem" -c "$c" -d "$d" \
      --warmup "$WARMUP" --duration "$DURATION" --server-pid "$SERVER_PID" || echo "(lr-store-load exited $?)"
    [ "$store" = sqlite ] && ls -la "$WORK/data" | grep sqlite || true
    cleanup
  done
done
