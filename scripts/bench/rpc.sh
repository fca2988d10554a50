#!/usr/bin/env bash
# RPC ingest benchmark: LiveRelay's null service (`liverelay serve` with "null_service":
# the shipping server, built the one way, answering empty replies) next to
# grpc-swift-2 serving the same unary method (RegisterToken) with the same
# request bytes, over TLS on 127.0.0.1, measured in the same run.
#
#   scripts/bench.sh rpc                       # shapes 1x1 4x32 16x64, 3 s warm-up + 10 s each
#   SHAPES="4x32" DURATION=5 scripts/bench.sh rpc
#
# Environment:
#   SHAPES      "CxD ..." : C connections x D requests in flight per connection (default "1x1 4x32 16x64")
#   WARMUP      seconds of warm-up per run, not measured (default 3)
#   DURATION    measured seconds per run (default 10)
#   PIN         0 (default): no pinning, the kernel places servers and load generators on
#               the 2 CPUs; 1: servers on CPU 0, load generators on CPU 1 (taskset). On a
#               machine shared with other builds, pinning lets a busy CPU stall a server
#               (ms-long tails at C=1, D=1), so it is off by default
#   SERVER_THREADS  event-loop threads per server (default 1)
#   LOAD_THREADS    event-loop threads per load generator (default 1)
#   SKIP_BUILD  1 to reuse the last release build
#   RESULTS     file to which the RESULT json lines are appended (default: a temp file, printed)
#
# Both servers run for the whole script (one is idle while the other is loaded);
# every process it starts is killed on exit, and each also stops by itself.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PKG="$ROOT/Benchmarks/RPC"
SHAPES=${SHAPES:-"1x1 4x32 16x64"}
WARMUP=${WARMUP:-3}
DURATION=${DURATION:-10}
PIN=${PIN:-0}
SERVER_THREADS=${SERVER_THREADS:-1}
LOAD_THREADS=${LOAD_THREADS:-1}
SKIP_BUILD=${SKIP_BUILD:-0}

WORK=$(mktemp -d /tmp/bench-rpc.XXXXXX)
RESULTS=${RESULTS:-$WORK/results.jsonl}
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    sleep 0.5
    for pid in "${PIDS[@]}"; do
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK/cert" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "bench-rpc: $*" >&2; }

if [ "$PIN" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    ON_SERVER_CPU=(taskset -c 0)
    ON_LOAD_CPU=(taskset -c 1)
    PLACEMENT="servers pinned to CPU 0, load generators to CPU 1"
else
    ON_SERVER_CPU=()
    ON_LOAD_CPU=()
    PLACEMENT="no pinning: servers and load generators share $(nproc) CPUs"
fi

# --- build -------------------------------------------------------------------
if [ "$SKIP_BUILD" != 1 ]; then
    # One product at a time: a plain `swift build` would also build every executable of the
    # dependencies (swift-protobuf's protoc, from C++ sources). Touching the manifest makes
    # SwiftPM re-plan, so source files added to the root package since the last build are seen.
    touch "$PKG/Package.swift"
    log "building liverelay (swift build -c release --product liverelay)"
    swift build -c release --package-path "$ROOT" --product liverelay >"$WORK/build-liverelay.log" 2>&1 || {
        tail -40 "$WORK/build-liverelay.log" >&2
        exit 1
    }
    for exe in lr-load grpc-null-server grpc-load; do
        log "building $exe (swift build -c release --package-path Benchmarks/RPC --product $exe)"
        swift build -c release --package-path "$PKG" --product "$exe" >"$WORK/build-$exe.log" 2>&1 || {
            tail -40 "$WORK/build-$exe.log" >&2
            exit 1
        }
    done
fi
BIN=$(swift build -c release --package-path "$PKG" --show-bin-path)
LIVERELAY="$(swift build -c release --package-path "$ROOT" --show-bin-path)/liverelay"
[ -x "$LIVERELAY" ] || { log "missing $LIVERELAY (build first)"; exit 1; }
for exe in lr-load grpc-null-server grpc-load; do
    [ -x "$BIN/$exe" ] || { log "missing $BIN/$exe (build first)"; exit 1; }
done

# --- one self-signed certificate for both servers ------------------------------
mkdir -p "$WORK/cert"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$WORK/cert/key.pem" -out "$WORK/cert/cert.pem" >/dev/null 2>&1
CERT="$WORK/cert/cert.pem"
KEY="$WORK/cert/key.pem"

# --- servers -------------------------------------------------------------------
# Each server's lifetime is bounded by --max-seconds even if this script is killed.
MAX_SECONDS=$(( 60 + $(echo "$SHAPES" | wc -w) * 2 * (WARMUP + DURATION + 10) ))

wait_for_line() { # file pattern timeout_s
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        if grep -q "$2" "$1" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "timed out waiting for '$2' in $1:"
    cat "$1" >&2
    return 1
}

# The null service's config: TLS with the shared certificate, one operator key, no ops port.
LR_KEY=$(python3 "$ROOT/scripts/bench/operator-key.py" "$WORK/api-keys.json" "rpc benchmark")
cat >"$WORK/null.json" <<JSON
{"listen": {"host": "127.0.0.1", "port": 0}, "ops": {"port": -1},
 "tls": {"certificate": "$CERT", "private_key": "$KEY"}, "api_key_file": "$WORK/api-keys.json",
 "store": {"kind": "memory"}, "null_service": true, "limits": {"drain_time_ms": 2000}}
JSON
"${ON_SERVER_CPU[@]}" "$LIVERELAY" serve --config "$WORK/null.json" --rpc-threads "$SERVER_THREADS" --log-level warning \
    >"$WORK/lr-server.log" 2>&1 &
LR_PID=$!
PIDS+=("$LR_PID")
# Bounded like the other server's --max-seconds, even if this script is killed.
(sleep "$MAX_SECONDS"; kill "$LR_PID" 2>/dev/null) &
PIDS+=("$!")
"${ON_SERVER_CPU[@]}" "$BIN/grpc-null-server" --cert "$CERT" --key "$KEY" --threads "$SERVER_THREADS" \
    --max-seconds "$MAX_SECONDS" >"$WORK/grpc-server.log" 2>&1 &
GRPC_PID=$!
PIDS+=("$GRPC_PID")

wait_for_line "$WORK/lr-server.log" "^listening on " 30
wait_for_line "$WORK/grpc-server.log" "^LISTENING " 30
LR_PORT=$(awk '/^listening on /{n = split($3, a, ":"); print a[n]; exit}' "$WORK/lr-server.log")
GRPC_PORT=$(awk '/^LISTENING /{print $2; exit}' "$WORK/grpc-server.log")
log "LiveRelay null server pid $LR_PID port $LR_PORT; grpc-swift-2 null server pid $GRPC_PID port $GRPC_PORT"
log "$PLACEMENT; warm-up ${WARMUP}s, measured ${DURATION}s per run; shapes: $SHAPES"

# --- loads -----------------------------------------------------------------------
run_load() { # name exe args...
    local name=$1
    shift
    local out="$WORK/$name.out"
    # A load generator never runs longer than warm-up + duration + 30 s.
    timeout --signal=KILL $((WARMUP + DURATION + 30)) "${ON_LOAD_CPU[@]}" "$@" \
        --warmup "$WARMUP" --duration "$DURATION" --threads "$LOAD_THREADS" --ca "$CERT" >"$out" 2>&1 || {
        log "$name failed:"
        cat "$out" >&2
        return 1
    }
    grep -v '^RESULT ' "$out" >&2 || true
    grep '^RESULT ' "$out" | sed 's/^RESULT //' >>"$RESULTS"
}

for shape in $SHAPES; do
    C=${shape%x*}
    D=${shape#*x}
    run_load "lr-$shape" "$BIN/lr-load" --port "$LR_PORT" --api-key "$LR_KEY" -c "$C" -d "$D" --server-pid "$LR_PID" --label "$shape"
    run_load "grpc-$shape" "$BIN/grpc-load" --port "$GRPC_PORT" -c "$C" -d "$D" --server-pid "$GRPC_PID" --label "$shape"
done

# --- table -----------------------------------------------------------------------
python3 - "$RESULTS" "$PLACEMENT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
order = []
for r in rows:
    k = r["label"]
    if k not in by:
        by[k] = {}
        order.append(k)
    by[k]["lr" if r["target"] == "liverelay" else "grpc"] = r
def lat(r): return f'{r["p50_us"]:.0f} / {r["p99_us"]:.0f} / {r["p999_us"]:.0f}'
print()
print("| Shape (C×D) | LiveRelay req/s | LiveRelay p50 / p99 / p99.9 µs | gRPC req/s | gRPC p50 / p99 / p99.9 µs | Throughput ratio | p99 ratio (LR/gRPC) | Server CPU µs/req LR / gRPC |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for k in order:
    lr, g = by[k].get("lr"), by[k].get("grpc")
    if not lr or not g:
        continue
    ratio = lr["rps"] / g["rps"] if g["rps"] else float("inf")
    p99r = lr["p99_us"] / g["p99_us"] if g["p99_us"] else float("inf")
    cpu = lambda r: "n/a" if r["server_cpu_us_per_req"] is None else f'{r["server_cpu_us_per_req"]:.1f}'
    print(f'| {lr["connections"]}×{lr["depth"]} | {lr["rps"]:,.0f} | {lat(lr)} | {g["rps"]:,.0f} | {lat(g)} | {ratio:.2f}x | {p99r:.2f} | {cpu(lr)} / {cpu(g)} |')
errors = sum(r["errors"] for r in rows)
print()
print(f"Errors while measuring: {errors}. {sys.argv[2]}. Request: {rows[0]['request_bytes']} bytes (fnv {rows[0]['request_fnv']}) for both.")
print()
print("CPU during each measured window, % of one CPU (server / load generator / other processes on the machine):")
print()
for r in rows:
    name = "LiveRelay" if r["target"] == "liverelay" else "gRPC"
    print(f'- {r["label"]} {name}: {r["server_cpu_pct"]} / {r["load_cpu_pct"]} / {r.get("other_cpu_pct")}')
PY
log "raw results: $RESULTS"
