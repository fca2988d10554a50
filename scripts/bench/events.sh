#!/usr/bin/env bash
# The event feed's figures (docs/BENCHMARKS.md, "Event feed"):
# 1. how soon a ListEvents long poll answers after an event is committed: a release
#    `liverelay serve` in its development setup (SQLite, the in-process mock APNs), starts at
#    RATE a second through one push-to-start token, each settling into a CALL_SETTLED event,
#    and a poller following the feed (clients/python/bench/events_latency.py);
#    With PG=1, the same on PostgreSQL (scripts/postgres.sh starts one): the poller on the same
#    node as the starter, then on a second node sharing the database (other nodes' events
#    arrive by their notifications);
# 2. with a second binary built without the feed, what writing the events costs, worst case:
#    UpdateActivity calls of one token each, waiting for delivery, so that every push is a
#    settled call and writes an event in its settlement's transaction (`liverelay bench --mix
#    update --tokens-per-activity 1 --wait-for-delivery`, 4 x 32, SQLite), against each build's
#    development server in turn, ROUNDS times alternating.
#
#   scripts/bench.sh events [BINARY [BINARY_WITHOUT_FEED]]
#
# BINARY defaults to the release build in .build-bench (built unless SKIP_BUILD=1).
# Environment: EVENTS (300), RATE (20), ROUNDS (3), DURATION (10), PG (0), PYTHON (default: the venv of
# clients/python/scripts/test.sh).
# Every process it starts is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCRATCH=${SCRATCH:-$ROOT/.build-bench}
EVENTS=${EVENTS:-300}
RATE=${RATE:-20}
export PATH="/opt/swift/usr/bin:$PATH"
log() { echo "bench-events: $*" >&2; }

LR=${1:-}
BASELINE=${2:-}
if [ -z "$LR" ]; then
    if [ "${SKIP_BUILD:-0}" != 1 ]; then
        log "building liverelay (swift build -c release --scratch-path $SCRATCH --product liverelay)"
        swift build -c release --package-path "$ROOT" --scratch-path "$SCRATCH" --product liverelay >/dev/null
    fi
    LR="$SCRATCH/release/liverelay"
fi
[ -x "$LR" ] || { log "no liverelay binary at $LR"; exit 1; }
PYTHON=${PYTHON:-$ROOT/clients/python/.test-venvs/protobuf-newest/bin/python}
[ -x "$PYTHON" ] || { log "no Python at $PYTHON: run clients/python/scripts/test.sh, or set PYTHON"; exit 1; }

WORK=$(mktemp -d /tmp/liverelay-bench-events.XXXXXX)
SERVER=""
SECOND=""
PG_DIR=""
cleanup() {
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
    [ -n "$SECOND" ] && kill "$SECOND" 2>/dev/null || true
    wait 2>/dev/null || true
    if [ -n "$PG_DIR" ]; then bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR" >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start BINARY DIR [ARGS]: a development server (SQLite unless ARGS say otherwise, in-process mock APNs) on a
# fresh data directory; sets PORT and KEY.
start() {
    local binary=$1 dir=$2
    shift 2
    rm -rf "$dir"
    launch "$binary" "$dir" "$dir.log" "$@"
    SERVER=$LAUNCHED
    KEY=$(grep -o 'LIVERELAY_API_KEY=[^ ]*' "$dir.log" | head -1 | cut -d= -f2)
    [ -n "$KEY" ] || { log "the server printed no API key:"; cat "$dir.log" >&2; exit 1; }
}
# launch BINARY DIR LOG [ARGS]: a server on DIR as it is (a second node shares the first's certificate and key);
# sets PORT and LAUNCHED.
launch() {
    local binary=$1 dir=$2 log=$3
    shift 3
    rm -f "$log"
    timeout --signal=TERM 600 "$binary" serve --port 0 --data-dir "$dir" --log-level warning "$@" >"$log" 2>&1 &
    LAUNCHED=$!
    for _ in $(seq 1 300); do grep -q "^listening on " "$log" && break; sleep 0.1; done
    PORT=$(awk '/^listening on /{n = split($3, a, ":"); print a[n]; exit}' "$log")
    [ -n "$PORT" ] || { log "the server did not start:"; cat "$log" >&2; exit 1; }
}
stop() {
    kill "$SERVER" ${SECOND:+"$SECOND"} 2>/dev/null || true
    wait "$SERVER" ${SECOND:+"$SECOND"} 2>/dev/null || true
    SERVER=""
    SECOND=""
}
latency() { # what [ARGS for events_latency.py]
    local what=$1
    shift
    log "long-poll latency: $EVENTS events at $RATE/s, $what, $(cut -d' ' -f1 /proc/loadavg) load average"
    PYTHONPATH="$ROOT/clients/python/src" "$PYTHON" "$ROOT/clients/python/bench/events_latency.py" \
        --port "$PORT" --ca-file "$WORK/data/cert.pem" --api-key "$KEY" --events "$EVENTS" --rate "$RATE" "$@"
}

start "$LR" "$WORK/data"
latency SQLite
stop

if [ "${PG:-0}" = 1 ]; then
    eval "$(bash "$ROOT/scripts/postgres.sh" start)"
    PG_DIR=$LIVERELAY_POSTGRES_DIR
    export LIVERELAY_POSTGRES_URL
    start "$LR" "$WORK/data" --store postgres
    latency "PostgreSQL, the poller on the starter's node"
    first=$PORT
    launch "$LR" "$WORK/data" "$WORK/second.log" --store postgres
    SECOND=$LAUNCHED
    second=$PORT
    PORT=$first
    latency "PostgreSQL, the poller on a second node" --poll-port "$second"
    stop
fi

if [ -n "$BASELINE" ]; then
    log "settled calls per second, one token each, without the feed ($BASELINE) and with it ($LR), $ROUNDS rounds"
    for round in $(seq 1 "${ROUNDS:-3}"); do
        for build in "$BASELINE" "$LR"; do
            start "$build" "$WORK/ab"
            # The server's own pid (SERVER is its `timeout` wrapper), for its CPU per call.
            "$build" bench run --port "$PORT" --ca-file "$WORK/ab/cert.pem" --api-key "$KEY" --quiet --json \
                --connections 4 --depth 32 --mix update --activities 200 --tokens-per-activity 1 --wait-for-delivery \
                --duration "${DURATION:-10}" --warmup 2 --server-pid "$(pgrep -P "$SERVER" | head -1)" \
                >"$WORK/ab.json" 2>"$WORK/ab.err" || { cat "$WORK/ab.err" >&2; exit 1; }
            stop
            python3 - "$build" "$round" "$WORK/ab.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[3]))
print(f"round {sys.argv[2]} {sys.argv[1]}: {report['throughput']:,.0f} calls/s, each one push settled, "
      f"server CPU {report.get('server_cpu_us_per_call')} us per call")
PY
        done
    done
fi
