#!/usr/bin/env bash
# The store scenarios of scripts/bench.sh alone: durable RegisterToken on SQLite and
# PostgreSQL (4 x 64 in flight), and one UpdateActivity of a FANOUT-token activity until its
# pushes are queued (`*-fanout-load`), with the same `liverelay bench` arguments as
# scripts/bench.sh; plus the same fan-out on the memory store with that server's resident
# memory. Takes the liverelay binary to run, so that two builds can be compared in one sitting:
#
#   swift build -c release --scratch-path .build-release --product liverelay
#   scripts/bench.sh stores .build-release/release/liverelay [sqlite postgres memory]
#
# Environment: DURATION (10), WARMUP (2), FANOUT (100000); FANOUT_CALLS (1): fan-out loads made
# one after the other against the same server, each with its own new activity, as bench.sh's
# FANOUT_RUNS (later calls find the dispatcher's lanes of the earlier ones); CONNECTIONS
# (4) and DEPTH (64) for the RegisterToken scenarios (bench.sh's are 4 x 64); SERVER_ARGS, extra
# `serve` arguments for every server (e.g. "--apns-endpoint 127.0.0.1:9", a closed port: nothing
# is delivered). Prints one line per scenario (OK/s, p50 / p99 / max ms, server CPU µs per call)
# and the load average before each.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LR=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
STORES=("$@")
[ ${#STORES[@]} -gt 0 ] || STORES=(sqlite postgres memory)
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
FANOUT=${FANOUT:-100000}
CONNECTIONS=${CONNECTIONS:-4}
DEPTH=${DEPTH:-64}
WORK=$(mktemp -d /tmp/liverelay-bench-stores.XXXXXX)
PIDS=()
PG_DIR=""
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 1
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "$PG_DIR" ]; then bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR" >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "bench stores: $*" >&2; }
UNLIMITED=(--admission-max-in-flight-per-app 100000 --admission-max-in-flight 100000)

start_server() { # name args... ; sets PORT and PID
    local name=$1
    shift
    mkdir -p "$WORK/data"
    # shellcheck disable=SC2086 # SERVER_ARGS is a list of arguments
    timeout --signal=TERM 900 "$LR" serve --data-dir "$WORK/data" --port 0 --log-level warning "$@" ${SERVER_ARGS:-} \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    local parent=$!
    PIDS+=("$parent")
    for _ in $(seq 600); do grep -q "^listening on " "$WORK/$name.out" 2>/dev/null && break; sleep 0.1; done
    PORT=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$WORK/$name.out" | head -1)
    PID=$(pgrep -P "$parent" | head -1 || echo "$parent")
    if [ -z "${LIVERELAY_API_KEY:-}" ]; then
        LIVERELAY_API_KEY=$(sed -n 's/^export LIVERELAY_API_KEY=//p' "$WORK/$name.out" | head -1)
        export LIVERELAY_API_KEY
    fi
}

bench() { # name args...
    local name=$1
    shift
    log "$name (load average $(cut -d' ' -f1-3 /proc/loadavg)): liverelay bench $*"
    "$LR" bench --port "$PORT" --ca-file "$WORK/data/cert.pem" --server-pid "$PID" --name "$name" --warmup "$WARMUP" \
        --json "$@" >"$WORK/$name.json" 2>"$WORK/$name.bench.err" || { tail -20 "$WORK/$name.bench.err" >&2; return 1; }
    python3 - "$WORK/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); lat = r["latency_us"]
cpu = r.get("server_cpu_us_per_call")
setup = f', setup {r["setup_calls"] - 1:,} calls in {r["setup_seconds"]:.1f} s' if r.get("setup_calls") else ""
print(f'{sys.argv[2]}: {r["throughput"]:,.0f} OK/s, errors {r["errors"]}, p50 / p99 / max '
      f'{lat["p50"] / 1000:.2f} / {lat["p99"] / 1000:.2f} / {lat["max"] / 1000:.2f} ms, '
      f'server CPU {"n/a" if cpu is None else f"{cpu:.1f}"} µs/call{setup}')
PY
}

FANOUT_ARGS=(--connections 1 --depth 1 --mix update --activities 1 --tokens-per-activity "$FANOUT" --requests 1 --warmup 0 --timeout 300)
fanout_loads() { # store: FANOUT_CALLS fan-out loads against the server just started
    local i
    for i in $(seq "${FANOUT_CALLS:-1}"); do
        bench "$1-fanout-load$([ "${FANOUT_CALLS:-1}" = 1 ] || echo "-$i")" "${FANOUT_ARGS[@]}"
    done
}
for store in "${STORES[@]}"; do
    case $store in
    sqlite)
        start_server sqlite --store sqlite "${UNLIMITED[@]}"
        bench "sqlite-register-${CONNECTIONS}x$DEPTH" --connections "$CONNECTIONS" --depth "$DEPTH" --mix register --duration "$DURATION"
        fanout_loads sqlite
        ;;
    postgres)
        eval "$(bash "$ROOT/scripts/postgres.sh" start)"
        PG_DIR=$LIVERELAY_POSTGRES_DIR
        export LIVERELAY_POSTGRES_URL
        start_server postgres --store postgres "${UNLIMITED[@]}"
        bench "postgres-register-${CONNECTIONS}x$DEPTH" --connections "$CONNECTIONS" --depth "$DEPTH" --mix register --duration "$DURATION"
        fanout_loads postgres
        ;;
    memory)
        start_server memory --store memory "${UNLIMITED[@]}"
        rss() { awk '/^VmRSS|^VmHWM/ {printf "%s %d MiB  ", $1, $2 / 1024}' "/proc/$PID/status"; }
        echo "memory server before: $(rss)"
        fanout_loads memory
        echo "memory server after the setup and the fan-out: $(rss)"
        ;;
    *) log "unknown store $store"; exit 2 ;;
    esac
    # At once: its dispatcher would still be pushing the fan-out to its in-process mock APNs
    # on the cores the next store is measured on.
    kill -KILL "$PID" 2>/dev/null || true
done
