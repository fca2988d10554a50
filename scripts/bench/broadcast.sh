#!/usr/bin/env bash
# Broadcast channels: the time from UpdateActivity to the broadcast POST being answered (one
# call to a channel) next to the same update fanned out to TOKENS update tokens, both against
# one `liverelay mock-apns` process on loopback. Starts the mock and `liverelay serve` (memory
# store, dev.app pushing to the mock, its queue large enough for the fan-out), runs `liverelay
# bench broadcast`, stops everything, and prints the table (docs/BENCHMARKS.md, "Broadcast
# channels").
#
#   scripts/bench.sh broadcast                       # release build first, then ~2 min
#   SKIP_BUILD=1 scripts/bench.sh broadcast          # reuse the last release build
#
# Environment:
#   SKIP_BUILD       1: reuse the last release build of liverelay (in SCRATCH)
#   SCRATCH          SwiftPM scratch path of the release build (default .build-release)
#   TOKENS           update tokens of the fan-out activity (default 100000)
#   BROADCAST_CALLS  measured UpdateActivity calls to the channel (default 200)
#   FANOUT_CALLS     measured UpdateActivity calls fanned out to TOKENS tokens (default 10)
#   CONFIG           release (default); debug only to try the script quickly (numbers meaningless)
#   RESULT           a file to keep the JSON report in (the work directory is removed)
#
# Everything it starts is stopped on exit (trap), and has a lifetime cap besides.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
SKIP_BUILD=${SKIP_BUILD:-0}
SCRATCH=${SCRATCH:-$ROOT/.build-release}
TOKENS=${TOKENS:-100000}
BROADCAST_CALLS=${BROADCAST_CALLS:-200}
FANOUT_CALLS=${FANOUT_CALLS:-10}
CONFIG=${CONFIG:-release}
LIFETIME=900
STARTED=$(date +%s)

if [ "$SKIP_BUILD" != 1 ]; then
    echo "bench-broadcast: building liverelay (swift build -c $CONFIG --scratch-path $SCRATCH --product liverelay)" >&2
    build_log=$(mktemp /tmp/liverelay-bench-broadcast-build.XXXXXX)
    swift build -c "$CONFIG" --scratch-path "$SCRATCH" --product liverelay >"$build_log" 2>&1 || {
        tail -40 "$build_log" >&2
        rm -f "$build_log"
        exit 1
    }
    rm -f "$build_log"
fi
LR="$SCRATCH/$CONFIG/liverelay"
[ -x "$LR" ] || { echo "bench-broadcast: missing $LR (run without SKIP_BUILD=1)" >&2; exit 1; }

# The work directory (removed on exit with every process in PIDS) and the development
# files: certificate, dev.app's .p8 key, the API key file and DEV_API_KEY.
NAME=bench-broadcast
# shellcheck source=scripts/bench/common.sh
source "$ROOT/scripts/bench/common.sh"
export LIVERELAY_API_KEY=$DEV_API_KEY
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

# The mock knows dev.app's key, so it accepts the server's provider tokens, and implements
# the channel management API and the broadcast endpoint on the same port.
timeout --signal=TERM "$LIFETIME" "$LR" mock-apns --port 0 --cert-out "$WORK/mock.pem" --log-level warning \
    --app "dev.app,LRDEVTEAM1,LRDEVKEY01,$WORK/data/apns-dev-key.p8" >"$WORK/mock.out" 2>&1 &
PIDS+=($!)
wait_for "$WORK/mock.out" "listening on "
MOCK_PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$WORK/mock.out" | head -1)
log "mock APNs on port $MOCK_PORT"

# A config file rather than the development setup's flags: the app's queue must hold the
# whole fan-out (the development app's holds 100,000, exactly the default TOKENS), and
# admission's per-app limit must let the pipelined registration through, and the hourly push
# quota (250,000 by default with a config file) must not stop the fan-outs. Memory store: the
# figures are the dispatch path's, not a disk's.
QUEUE=$((TOKENS > 100000 ? TOKENS : 100000))
cat >"$WORK/server.json" <<JSON
{ "listen": {"host": "127.0.0.1", "port": 0}, "ops": {"host": "127.0.0.1", "port": 0},
  "tls": {"certificate": "$WORK/data/cert.pem", "private_key": "$WORK/data/key.pem"},
  "api_key_file": "$WORK/data/api-keys.json", "store": {"kind": "memory"},
  "admission": {"max_in_flight_per_app": 100000, "max_in_flight": 100000},
  "quotas": {"pushes_per_hour": "unlimited"},
  "apps": [{"id": "dev.app", "bundle_id": "dev.app", "queue_capacity": $QUEUE,
            "apns": {"team_id": "LRDEVTEAM1", "key_id": "LRDEVKEY01", "key_file": "$WORK/data/apns-dev-key.p8",
                     "endpoint": "127.0.0.1:$MOCK_PORT", "trust_certificate": "$WORK/mock.pem"}}] }
JSON
timeout --signal=TERM "$LIFETIME" "$LR" serve --config "$WORK/server.json" --log-level warning >"$WORK/server.out" 2>&1 &
server_wrapper=$!
PIDS+=("$server_wrapper")
wait_for "$WORK/server.out" "^listening on "
PORT=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$WORK/server.out" | head -1)
# `timeout` is the parent: the server is its only child.
SERVER_PID=$(pgrep -P "$server_wrapper" | head -1 || true)
log "server on port $PORT, pid ${SERVER_PID:-?}, dev.app's queue $QUEUE"

ARGS=(--tokens "$TOKENS" --broadcast-calls "$BROADCAST_CALLS" --fanout-calls "$FANOUT_CALLS")
log "liverelay bench broadcast ${ARGS[*]}"
status=0
timeout --signal=KILL 1200 "$LR" bench broadcast --port "$PORT" --ca-file "$WORK/data/cert.pem" \
    ${SERVER_PID:+--server-pid "$SERVER_PID"} --json "${ARGS[@]}" >"$WORK/result.json" 2>"$WORK/bench.err" || status=$?
grep -v '^\S* \[' "$WORK/bench.err" >&2 || true
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
if [ $status != 0 ]; then
    log "the bench failed (exit $status); server log:"
    tail -20 "$WORK/server.out" >&2
    exit $status
fi

# The table, the machine and the command.
MACHINE="$(nproc) vCPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(. /etc/os-release && echo "$PRETTY_NAME"), $(swift --version 2>/dev/null | head -1 | sed 's/ (.*//')"
ENVIRONMENT=""
[ "$TOKENS" != 100000 ] && ENVIRONMENT+="TOKENS=$TOKENS "
[ "$BROADCAST_CALLS" != 200 ] && ENVIRONMENT+="BROADCAST_CALLS=$BROADCAST_CALLS "
[ "$FANOUT_CALLS" != 10 ] && ENVIRONMENT+="FANOUT_CALLS=$FANOUT_CALLS "
python3 - "$WORK/result.json" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$MACHINE" "$LOAD_BEFORE" "$LOAD_AFTER" \
    "${ENVIRONMENT}scripts/bench.sh broadcast" "liverelay bench broadcast --port P --ca-file cert.pem --server-pid PID ${ARGS[*]}" "$CONFIG" \
    >"$WORK/section.md" <<'PY'
import json, sys
path, when, machine, load_before, load_after, script, command, config = sys.argv[1:9]
r = json.load(open(path))
def ms(us): return f"{us / 1000:,.2f}"
def n(x): return f"{x:,.0f}"
b, f, reg = r["broadcast"], r["fanout"], r["registration"]
tokens = r["fanout_tokens"]
out = [f"Run of {when}, `{script}` (`{command}`), {config} build, memory store, one `liverelay mock-apns` "
       f"process on loopback; {machine}; load average {load_before} before the run, {load_after} after it "
       "(the server, the mock, the load generator and other engineers' work share the cores).", "",
       "| UpdateActivity, waiting for delivery | Calls | p50 ms | p90 ms | p99 ms | max ms | Calls/s | APNs POSTs per call | Pushes/s answered by the mock |",
       "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
for name, leg in [("to one no-storage broadcast channel (channel only)", b), (f"to one activity's {n(tokens)} update tokens", f)]:
    lat = leg["latency_us"]
    per_call = leg["pushes"]["targeted"] / max(1, leg["ok"])
    out.append(f'| {name} | {leg["ok"]} of {leg["calls"]} OK | {ms(lat["p50"])} | {ms(lat["p90"])} | {ms(lat["p99"])} | '
               f'{ms(lat["max"])} | {leg["calls_per_second"]:,.1f} | {n(per_call)} | {n(leg["pushes"]["delivered_per_second"])} |')
ratio = f["latency_us"]["p50"] / b["latency_us"]["p50"] if b["latency_us"]["p50"] else float("inf")
out.append("")
out.append(f'The fan-out\'s p50 is **{ratio:,.0f}x** the broadcast\'s. Registering the {n(tokens)} update tokens first took '
           f'{reg["seconds"]:.1f} s ({n(reg["per_second"])}/s, {reg["connections"]} connections × {reg["depth"]} RegisterToken calls in flight). '
           f'Delivered: {n(b["pushes"]["delivered"])} of {n(b["pushes"]["targeted"])} broadcasts, '
           f'{n(f["pushes"]["delivered"])} of {n(f["pushes"]["targeted"])} fan-out pushes; '
           f'downgraded {b["downgraded"] + f["downgraded"]}; channel deleted at the end: {"yes" if r["channel_deleted"] else "**no**"}'
           + (f'; the server\'s RSS after the fan-out {r["server_rss_bytes"] / 1048576:.0f} MiB, peak {r["server_peak_rss_bytes"] / 1048576:.0f} MiB.'
              if r.get("server_rss_bytes") else "."))
print("\n".join(out))
PY
cat "$WORK/section.md"
if [ -n "${RESULT:-}" ]; then cp "$WORK/result.json" "$RESULT"; fi
log "finished in $(($(date +%s) - STARTED)) s"
