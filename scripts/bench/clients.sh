#!/usr/bin/env bash
# The client libraries side by side: the Swift client (`liverelay bench`, LiveRelayClient),
# the Go client (clients/go/cmd/liverelay-load) and the Python asyncio client
# (clients/python/bench/load.py) each send RegisterToken closed loop, CONNECTIONS x DEPTH
# calls in flight, to one null-service server (`liverelay serve` with "null_service": TLS,
# an operator key, memory store), one after the other, in the same run. Each reports
# calls/s, p50 and p99 from the send, and the CPU per call of its own process and of the
# server over its measured window (docs/BENCHMARKS.md, "Client libraries").
#
#   scripts/bench.sh clients
#   SKIP_BUILD=1 DURATION=5 PIN=1 scripts/bench.sh clients
#
# Environment:
#   CONNECTIONS, DEPTH  the shape (default 4 x 32)
#   WARMUP      warm-up seconds per client, not measured (default 2)
#   DURATION    measured seconds per client (default 10)
#   PIN         1: the server on CPU 0, the load generators on CPU 1 (taskset); default 0
#   SERVER_THREADS  the server's event-loop threads (default 1)
#   SKIP_BUILD  1: reuse the last release build of liverelay (in SCRATCH); the Go load
#               generator is always built (seconds, offline: GOPATH mode with Debian's
#               golang-google-protobuf-dev, as clients/go/scripts/test.sh does)
#   SCRATCH     SwiftPM scratch path of the release build (default .build-bench)
#   PYTHON      a python with protobuf >= 6.31.1 (default the venv clients/python/scripts/test.sh
#               makes, clients/python/.test-venvs/protobuf-newest; else one made here from PyPI);
#               the client itself is imported from clients/python/src
#   GO_PROTOBUF_SRC  google.golang.org/protobuf's source (default /usr/share/gocode/src/...)
#
# Everything it starts is killed on exit (trap); the server and each load also stop by themselves.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CONNECTIONS=${CONNECTIONS:-4}
DEPTH=${DEPTH:-32}
WARMUP=${WARMUP:-2}
DURATION=${DURATION:-10}
PIN=${PIN:-0}
SERVER_THREADS=${SERVER_THREADS:-1}
SKIP_BUILD=${SKIP_BUILD:-0}
SCRATCH=${SCRATCH:-$ROOT/.build-bench}
GO_PROTOBUF_SRC=${GO_PROTOBUF_SRC:-/usr/share/gocode/src/google.golang.org/protobuf}
export PATH="/opt/swift/usr/bin:$PATH"

LOADAVG=$(cut -d' ' -f1 /proc/loadavg)
WORK=$(mktemp -d /tmp/liverelay-bench-clients.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK/cert" "$WORK/gopath" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "bench-clients: $*" >&2; }

if [ "$PIN" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    ON_SERVER_CPU=(taskset -c 0)
    ON_LOAD_CPU=(taskset -c 1)
    PLACEMENT="server pinned to CPU 0, load generators to CPU 1"
else
    ON_SERVER_CPU=()
    ON_LOAD_CPU=()
    PLACEMENT="no pinning: server and load generator share $(nproc) CPUs"
fi

# --- builds ----------------------------------------------------------------------
if [ "$SKIP_BUILD" != 1 ]; then
    log "building liverelay (swift build -c release --scratch-path $SCRATCH --product liverelay)"
    swift build -c release --package-path "$ROOT" --scratch-path "$SCRATCH" --product liverelay >"$WORK/build-liverelay.log" 2>&1 || {
        tail -40 "$WORK/build-liverelay.log" >&2
        exit 1
    }
fi
LR="$SCRATCH/release/liverelay"
[ -x "$LR" ] || { log "missing $LR (run without SKIP_BUILD=1)"; exit 1; }

command -v go >/dev/null || { log "go is not on PATH (Debian: golang-go)"; exit 1; }
[ -f "$GO_PROTOBUF_SRC/go.mod" ] || { log "no google.golang.org/protobuf at $GO_PROTOBUF_SRC (Debian: golang-google-protobuf-dev)"; exit 1; }
log "building clients/go/cmd/liverelay-load (GOPATH mode, offline)"
mkdir -p "$WORK/gopath/src/github.com/liverelay"
ln -s "$ROOT" "$WORK/gopath/src/github.com/liverelay/liverelay"
(
    cd "$WORK/gopath/src/github.com/liverelay/liverelay/clients/go"
    GO111MODULE=off GOPATH="$WORK/gopath:${GO_PROTOBUF_SRC%/src/google.golang.org/protobuf}" GOFLAGS= GOPROXY=off GOTOOLCHAIN=local \
        go build -o "$WORK/liverelay-load" ./cmd/liverelay-load
) >"$WORK/build-go.log" 2>&1 || {
    cat "$WORK/build-go.log" >&2
    exit 1
}

PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ] && [ -x "$ROOT/clients/python/.test-venvs/protobuf-newest/bin/python" ]; then
    PYTHON="$ROOT/clients/python/.test-venvs/protobuf-newest/bin/python"
fi
if [ -z "$PYTHON" ]; then
    log "making a venv with protobuf in $WORK/venv (PyPI)"
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check "protobuf>=7,<8" >&2
    PYTHON="$WORK/venv/bin/python"
fi
PROTOBUF_VERSION=$("$PYTHON" -c 'import google.protobuf as p; from google.protobuf.internal import api_implementation as a; print(p.__version__, a.Type())')

# --- the null server -------------------------------------------------------------
mkdir -p "$WORK/cert"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$WORK/cert/key.pem" -out "$WORK/cert/cert.pem" >/dev/null 2>&1
CERT="$WORK/cert/cert.pem"
KEY=$(python3 "$ROOT/scripts/bench/operator-key.py" "$WORK/api-keys.json" "client libraries benchmark")
cat >"$WORK/null.json" <<JSON
{"listen": {"host": "127.0.0.1", "port": 0}, "ops": {"port": -1},
 "tls": {"certificate": "$CERT", "private_key": "$WORK/cert/key.pem"}, "api_key_file": "$WORK/api-keys.json",
 "store": {"kind": "memory"}, "null_service": true, "limits": {"drain_time_ms": 2000}}
JSON

# A load never runs longer than LOAD_LIMIT seconds, the server never longer than all three.
LOAD_LIMIT=$((WARMUP + DURATION + 60))
"${ON_SERVER_CPU[@]}" timeout --signal=TERM $((3 * LOAD_LIMIT + 60)) "$LR" serve --config "$WORK/null.json" \
    --rpc-threads "$SERVER_THREADS" --log-level warning >"$WORK/server.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 300); do
    grep -q "^listening on " "$WORK/server.log" 2>/dev/null && break
    sleep 0.1
done
grep -q "^listening on " "$WORK/server.log" || { log "the server did not start:"; cat "$WORK/server.log" >&2; exit 1; }
PORT=$(awk '/^listening on /{n = split($3, a, ":"); print a[n]; exit}' "$WORK/server.log")
# `timeout` is the parent: the server is its only child.
SERVER_PID=$(pgrep -P "${PIDS[0]}" | head -1 || true)
[ -n "$SERVER_PID" ] || { log "cannot find the server's pid"; exit 1; }
log "null server pid $SERVER_PID port $PORT; $PLACEMENT; ${CONNECTIONS}x$DEPTH, warm-up ${WARMUP}s, measured ${DURATION}s per client"

# --- the loads -------------------------------------------------------------------
run_load() { # name command...
    local name=$1
    shift
    log "$name: $*"
    timeout --signal=KILL "$LOAD_LIMIT" "${ON_LOAD_CPU[@]}" "$@" >"$WORK/$name.json" 2>"$WORK/$name.err" || {
        log "$name failed:"
        tail -20 "$WORK/$name.err" >&2
        return 1
    }
}
SHAPE=(--connections "$CONNECTIONS" --depth "$DEPTH" --warmup "$WARMUP" --duration "$DURATION")
run_load swift "$LR" bench --port "$PORT" --ca-file "$CERT" --api-key "$KEY" --server-pid "$SERVER_PID" \
    --mix register "${SHAPE[@]}" --json --quiet
run_load go "$WORK/liverelay-load" -addr "127.0.0.1:$PORT" -ca-file "$CERT" -api-key "$KEY" -server-pid "$SERVER_PID" \
    -connections "$CONNECTIONS" -depth "$DEPTH" -warmup "$WARMUP" -duration "$DURATION" -json
run_load python env PYTHONPATH="$ROOT/clients/python/src" "$PYTHON" "$ROOT/clients/python/bench/load.py" --port "$PORT" \
    --ca-file "$CERT" --api-key "$KEY" --server-pid "$SERVER_PID" "${SHAPE[@]}" --json
grep -h -v '^\s*$' "$WORK/go.err" "$WORK/python.err" >&2 || true

# --- the table -------------------------------------------------------------------
python3 - "$WORK" "$PLACEMENT" "$PROTOBUF_VERSION" "$(go version | awk '{print $3}')" "$LOADAVG" <<'PY'
import json, os, sys
work, placement, protobuf, go, loadavg = sys.argv[1:6]
swift = json.load(open(os.path.join(work, "swift.json")))
rows = [("Swift (LiveRelayClient, `liverelay bench`, 1 event-loop thread)", {
    "calls_per_second": swift["throughput"], "p50_us": swift["latency_us"]["p50"], "p99_us": swift["latency_us"]["p99"],
    "client_cpu_us_per_call": swift.get("client_cpu_us_per_call"), "server_cpu_us_per_call": swift.get("server_cpu_us_per_call"),
    "errors": swift["errors"], "seconds": swift["window_seconds"]})]
rows.append((f"Go (clients/go, {go})", json.load(open(os.path.join(work, "go.json")))))
rows.append((f"Python asyncio (clients/python, protobuf {protobuf})", json.load(open(os.path.join(work, "python.json")))))
base = rows[0][1]["calls_per_second"]
def us(v): return "n/a" if v is None else f"{v:.1f}"
print()
print(f"| Client, {swift['connections']} × {swift['depth']} RegisterToken | Calls/s | p50 / p99 ms | Client CPU µs/call | Server CPU µs/call | Calls/s vs Swift | Errors |")
print("|---|--:|--:|--:|--:|--:|--:|")
for name, r in rows:
    ratio = r["calls_per_second"] / base if base else 0
    print(f'| {name} | {r["calls_per_second"]:,.0f} | {r["p50_us"] / 1000:.2f} / {r["p99_us"] / 1000:.2f} | '
          f'{us(r["client_cpu_us_per_call"])} | {us(r["server_cpu_us_per_call"])} | {ratio:.2f}x | {r["errors"]} |')
go_r = rows[1][1]["calls_per_second"]
slower = base / go_r if go_r else float("inf")
print()
print(f'Go within 1.5x of Swift\'s calls/s: {"met" if slower <= 1.5 else "**not met**"} (Swift / Go = {slower:.2f}). '
      f'{placement}; {os.cpu_count()} CPUs; load average at the start: {loadavg}.')
PY
log "raw results (JSON per client) in $WORK"
