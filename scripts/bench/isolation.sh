#!/usr/bin/env bash
# What a large fan-out of one app costs another app's calls: big.app makes
# FANOUT_CALLS UpdateActivity calls to FANOUT-token activities, one after the other, each
# with its own new tokens (`liverelay bench` registers them first), while small.app makes
# UpdateActivity calls to one-token activities in a closed loop (1 connection, depth 1) the
# whole time. Both apps push to one `liverelay mock-apns`; memory store, so no disk in the
# figures. Prints big.app's fan-out latencies (read and queued) and small.app's latency
# percentiles, per binary, alternated over ROUNDS rounds: small.app's maximum is where a
# dispatcher that holds its lock for a whole fan-out shows.
#
#   scripts/bench.sh isolation BINARY [BINARY...]     # two builds alternate round by round
#
# Environment: FANOUT (100000), FANOUT_CALLS (3), ROUNDS (2), SMALL_SECONDS (small.app's
# window: 15 s per fan-out call and 5 more). The hourly push quota is
# lifted: small.app's 5,000-7,000 calls/s pass its default 250,000 within the window, and
# the refusals that follow are answered before the store and would hide what it measures.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BINARIES=("$@")
[ ${#BINARIES[@]} -gt 0 ] || { echo "usage: $0 BINARY [BINARY...]" >&2; exit 2; }
LR=${BINARIES[0]}
FANOUT=${FANOUT:-100000}
FANOUT_CALLS=${FANOUT_CALLS:-3}
ROUNDS=${ROUNDS:-2}
SMALL_SECONDS=${SMALL_SECONDS:-$((FANOUT_CALLS * 15 + 5))}
NAME=bench-fanout-isolation
# shellcheck source=scripts/bench/common.sh
source "$ROOT/scripts/bench/common.sh"

KEY=$(python3 "$ROOT/scripts/bench/operator-key.py" "$WORK/keys.json" "scripts/bench.sh isolation")
export LIVERELAY_API_KEY=$KEY
P8=$WORK/data/apns-dev-key.p8

timeout 3600 "$LR" mock-apns --port 0 --cert-out "$WORK/mock.pem" --log-level warning --recording-capacity 0 \
    --app "big.app,LRDEVTEAM1,LRDEVKEY01,$P8" --app "small.app,LRDEVTEAM1,LRDEVKEY01,$P8" >"$WORK/mock.out" 2>&1 &
PIDS+=($!)
wait_for "$WORK/mock.out" "listening on "
MOCK_PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$WORK/mock.out" | head -1)

app() { # id
    cat <<JSON
{"id": "$1", "bundle_id": "$1", "queue_capacity": 1000000,
 "apns": {"team_id": "LRDEVTEAM1", "key_id": "LRDEVKEY01", "key_file": "$P8",
          "endpoint": "127.0.0.1:$MOCK_PORT", "trust_certificate": "$WORK/mock.pem"}}
JSON
}
cat >"$WORK/config.json" <<JSON
{ "listen": {"host": "127.0.0.1", "port": 0}, "ops": {"host": "127.0.0.1", "port": 0},
  "tls": {"certificate": "$WORK/data/cert.pem", "private_key": "$WORK/data/key.pem"},
  "api_key_file": "$WORK/keys.json", "store": {"kind": "memory"},
  "quotas": {"pushes_per_hour": "unlimited"},
  "admission": {"max_in_flight_per_app": 100000, "max_in_flight": 100000},
  "apps": [$(app big.app), $(app small.app)] }
JSON

run() { # label binary
    local out="$WORK/$1.out"
    timeout 1800 "$2" serve --config "$WORK/config.json" --log-level warning >"$out" 2>&1 &
    local pid=$!
    wait_for "$out" "^listening on "
    local port
    port=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$out" | head -1)
    local common=(--port "$port" --ca-file "$WORK/data/cert.pem" --json --quiet --warmup 0 --timeout 300)
    # small.app's window covers big.app's calls (each about 10 s: its tokens registered, then the fan-out).
    "$2" bench "${common[@]}" --app-id small.app --connections 1 --depth 1 --mix update --activities 20 \
        --tokens-per-activity 1 --duration "$SMALL_SECONDS" >"$WORK/$1-small.json" 2>/dev/null &
    local small=$!
    sleep 2
    local fanouts=()
    for i in $(seq "$FANOUT_CALLS"); do
        "$2" bench "${common[@]}" --app-id big.app --connections 1 --depth 1 --mix update --activities 1 \
            --tokens-per-activity "$FANOUT" --requests 1 >"$WORK/$1-big-$i.json" 2>/dev/null
        fanouts+=("$(python3 -c "import json,sys; print('%.1f' % (json.load(open(sys.argv[1]))['latency_us']['p50'] / 1000))" \
            "$WORK/$1-big-$i.json")")
        sleep 2
    done
    wait "$small" || true
    kill "$pid"; wait "$pid" 2>/dev/null || true
    python3 - "$WORK/$1-small.json" "$1" "${fanouts[*]}" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as error:
    print(f"{sys.argv[2]}: small.app report unreadable ({error})"); sys.exit(0)
l = r["latency_us"]
print(f"{sys.argv[2]}: big.app fan-outs {sys.argv[3]} ms; small.app {r['throughput']:.0f} calls/s, "
      f"p50 {l['p50']/1000:.2f} p99 {l['p99']/1000:.2f} p99.9 {l['p999']/1000:.2f} max {l['max']/1000:.2f} ms, "
      f"errors {r.get('errors', 0)}")
PY
}

for round in $(seq "$ROUNDS"); do
    for i in "${!BINARIES[@]}"; do
        run "round$round-binary$((i + 1))" "${BINARIES[$i]}"
    done
done
