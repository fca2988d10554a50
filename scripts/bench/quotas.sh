#!/usr/bin/env bash
# What the per-app quotas cost a call: server CPU per call of `liverelay serve
# --config` (memory store, dev.app pushing to a `liverelay mock-apns` of its own)
# for RegisterToken and UpdateActivity (one token per activity), closed loop 4x32,
# in two or three configurations, alternated over ROUNDS rounds:
#   before   optional: BEFORE=<binary> to compare with (same config, no "quotas")
#   off      LR, every limit "unlimited"
#   on       LR, every limit set (never reached): bucket, hour, both counts
# Prints one line per run and the medians.
#
#   LR=.build-release/release/liverelay scripts/bench.sh quotas      # BEFORE=<binary> adds a column
#
# Environment: LR (default .build-release/release/liverelay), BEFORE (optional),
# DURATION (10), WARMUP (2), ROUNDS (3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LR=${LR:-$ROOT/.build-release/release/liverelay}
BEFORE=${BEFORE:-}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-3}
NAME=bench-quotas
# shellcheck source=scripts/bench/common.sh
source "$ROOT/scripts/bench/common.sh"
export LIVERELAY_API_KEY=$DEV_API_KEY

timeout 1800 "$LR" mock-apns --port 0 --cert-out "$WORK/mock.pem" --log-level warning \
    --app "dev.app,LRDEVTEAM1,LRDEVKEY01,$WORK/data/apns-dev-key.p8" >"$WORK/mock.out" 2>&1 &
PIDS+=($!)
wait_for "$WORK/mock.out" "listening on "
MOCK_PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$WORK/mock.out" | head -1)

config() { # file quotas-json-or-empty
    local quotas=""
    [ -n "$2" ] && quotas="\"quotas\": $2,"
    cat >"$1" <<JSON
{ "listen": {"host": "127.0.0.1", "port": 0}, "ops": {"host": "127.0.0.1", "port": 0},
  "tls": {"certificate": "$WORK/data/cert.pem", "private_key": "$WORK/data/key.pem"},
  "api_key_file": "$WORK/data/api-keys.json", "store": {"kind": "memory"},
  "admission": {"max_in_flight_per_app": 100000, "max_in_flight": 100000}, $quotas
  "apps": [{"id": "dev.app", "bundle_id": "dev.app",
            "apns": {"team_id": "LRDEVTEAM1", "key_id": "LRDEVKEY01", "key_file": "$WORK/data/apns-dev-key.p8",
                     "endpoint": "127.0.0.1:$MOCK_PORT", "trust_certificate": "$WORK/mock.pem"}}] }
JSON
}
config "$WORK/before.json" ""
config "$WORK/off.json" '{"pushes_per_hour": "unlimited"}'
config "$WORK/on.json" '{"calls_per_second": 10000000, "burst": 10000000, "pushes_per_hour": 1000000000, "max_tokens": 1000000000, "max_live_activities": 1000000000}'

run() { # label binary config mix
    local out="$WORK/$1.out"
    timeout 600 "$2" serve --config "$3" --log-level warning >"$out" 2>&1 &
    local pid=$!
    wait_for "$out" "^listening on "
    local port server
    port=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$out" | head -1)
    # `timeout` is the parent: the server is its only child.
    server=$(pgrep -P "$pid" | head -1)
    local args=(--connections 4 --depth 32 --duration "$DURATION" --warmup "$WARMUP")
    case $4 in
        register) args+=(--mix register) ;;
        update) args+=(--mix update --activities 200 --tokens-per-activity 1) ;;
    esac
    local cpu
    cpu=$("$LR" bench --port "$port" --ca-file "$WORK/data/cert.pem" --server-pid "$server" --json "${args[@]}" 2>/dev/null |
        python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.2f %.0f" % (r["server_cpu_us_per_call"], r["throughput"]))')
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$1 $4 $cpu" | tee -a "$WORK/results"
}

labels=(off on)
[ -n "$BEFORE" ] && labels=(before off on)
for round in $(seq "$ROUNDS"); do
    for mix in register update; do
        for label in "${labels[@]}"; do
            binary=$LR
            [ "$label" = before ] && binary=$BEFORE
            run "$label" "$binary" "$WORK/$label.json" "$mix"
        done
    done
    log "round $round done"
done
python3 - "$WORK/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, mix, cpu, rate = line.split()
    rows.setdefault((mix, label), []).append((float(cpu), float(rate)))
print("| Scenario | Configuration | Server CPU per call (median) | Calls/s (median) | Runs |")
print("|---|---|---:|---:|---:|")
for (mix, label), runs in sorted(rows.items()):
    print(f"| {mix} | {label} | {statistics.median(r[0] for r in runs):.2f} µs | {statistics.median(r[1] for r in runs):,.0f} | {len(runs)} |")
PY
