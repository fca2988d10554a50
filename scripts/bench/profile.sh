#!/usr/bin/env bash
# Profiles the dispatcher on one 100,000-token fan-out: a `liverelay serve --store memory`
# pushing to a `liverelay mock-apns` of its own process, both on loopback; a warm-up call,
# then `perf record -g` on the server while 3 more calls each fan out to 100,000 tokens and
# wait for every APNs answer. Prints the server's CPU per call (divide by 100,000 for per
# push) and how its samples split by owner (scripts/bench/profile-owners.py: HTTP/2 (libnghttp2), TLS, our
# code, NIO, kernel), and writes the profile's top symbols to OUTDIR/top.txt. Everything
# it starts stops by itself (timeouts) or when it ends.
#
#   scripts/bench.sh profile [LIVERELAY_BINARY] [OUTDIR]
#   (default: .build-bench/release/liverelay, /tmp/liverelay-profile)
#   MOCK_BINARY=path runs the mock from another build (to compare servers against one mock).
set -u
LR=${1:-.build-bench/release/liverelay}
MOCK=${MOCK_BINARY:-$LR}
OUT=${2:-/tmp/liverelay-profile}
command -v perf >/dev/null || { echo "bench profile: perf missing (apt-get install linux-perf)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT/data"
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
wait_for() { for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "timed out: $1" >&2; exit 1; }

# The development setup (certificate, API key, dev.app's signing key), made by a first start.
timeout 60 "$LR" serve --data-dir "$OUT/data" --port 0 --store memory --log-level warning >"$OUT/setup.out" 2>&1 &
SETUP=$!
wait_for "$OUT/setup.out" "listening on"
export LIVERELAY_API_KEY
LIVERELAY_API_KEY=$(sed -n 's/^export LIVERELAY_API_KEY=//p' "$OUT/setup.out" | head -1)
kill "$SETUP"; wait "$SETUP" 2>/dev/null

timeout 300 "$MOCK" mock-apns --port 0 --recording-capacity 0 --cert-out "$OUT/mock.pem" --log-level warning \
    --app "dev.app,LRDEVTEAM1,LRDEVKEY01,$OUT/data/apns-dev-key.p8" >"$OUT/mock.out" 2>&1 &
PIDS+=("$!")
wait_for "$OUT/mock.out" "listening on"
MOCK_PORT=$(sed -n 's/^mock APNs listening on .*:\([0-9]*\)$/\1/p' "$OUT/mock.out" | head -1)
timeout 300 "$LR" serve --data-dir "$OUT/data" --port 0 --store memory --log-level warning \
    --apns-endpoint "127.0.0.1:$MOCK_PORT" --apns-trust "$OUT/mock.pem" >"$OUT/server.out" 2>&1 &
PIDS+=("$!")
wait_for "$OUT/server.out" "listening on"
PORT=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$OUT/server.out" | head -1)
SERVER_PID=$(pgrep -P "${PIDS[-1]}" | head -1 || true)
SERVER_PID=${SERVER_PID:-${PIDS[-1]}}

fanout() { # calls
    "$LR" bench --port "$PORT" --ca-file "$OUT/data/cert.pem" --connections 1 --depth 1 --mix update --activities 1 \
        --tokens-per-activity 100000 --requests "$1" --warmup 0 --wait-for-delivery --timeout 300 --server-pid "$SERVER_PID"
}
fanout 1 >"$OUT/warmup.out" 2>&1
perf record -F 999 -g -p "$SERVER_PID" -o "$OUT/perf.data" -- sleep 8 >/dev/null 2>&1 &
PERF=$!
fanout 3 >"$OUT/fanout.out" 2>&1
wait "$PERF"
perf report -i "$OUT/perf.data" --no-children --sort symbol --stdio 2>/dev/null | grep -v "^#" | grep "%" | head -60 >"$OUT/top.txt"
perf script -i "$OUT/perf.data" -F comm,tid,ip,sym,dso 2>/dev/null | python3 "$(dirname "$0")/profile-owners.py" >"$OUT/owners.txt"
grep -i "server CPU" "$OUT/fanout.out" | head -1
cat "$OUT/owners.txt"
echo "profile: $OUT/top.txt, $OUT/owners.txt (perf report -i $OUT/perf.data for more)"
