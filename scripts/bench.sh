#!/usr/bin/env bash
# The one entry point of LiveRelay's measurements (docs/BENCHMARKS.md). With no area, or
# `all`: starts `liverelay serve` (release) on loopback in its configurations, runs the standard
# scenarios with `liverelay bench`, runs the grpc-swift-2 peer (Benchmarks/RPC, through
# scripts/bench/rpc.sh) and prints the tables; it writes no file outside its work directory.
#
#   scripts/bench.sh              # everything, ~8 min after the builds
#   scripts/bench.sh gate         # the CI regression gate only (~40 s after the build)
#   scripts/bench.sh gate --write-baseline    # re-record Benchmarks/bench-baseline.json
#   scripts/bench.sh overload     # the overload isolation scenario only, and its null-service floor (~5 min after the build)
#
# The other areas run a script of scripts/bench/ with the arguments that follow (each says
# its own options and environment in its header):
#
#   scripts/bench.sh rpc                        # the null service vs grpc-swift-2
#   scripts/bench.sh clients                    # the Swift, Go and Python clients against one null service
#   scripts/bench.sh codec [options]            # protobuf-c vs swift-protobuf, frame codec
#   scripts/bench.sh stores BINARY [STORE...]   # durable RegisterToken and the fan-out per store
#   scripts/bench.sh isolation BINARY...        # one app's fan-outs against another app's calls
#   scripts/bench.sh broadcast                  # a channel update vs a 100k-token fan-out
#   scripts/bench.sh quotas                     # server CPU per call, quotas off and on
#   scripts/bench.sh scrape                     # /metrics with 1,000 apps
#   scripts/bench.sh mock-apns [options]        # the mock APNs under h2load and aioapns
#   scripts/bench.sh intent-resume [BINARY]     # a restart resuming 1,000 dispatch intents
#   scripts/bench.sh profile [BINARY] [OUTDIR]  # perf of the dispatcher, split by owner
#   scripts/bench.sh pg-fresh [BINARY]          # RegisterToken on a never-analysed PostgreSQL database
#   scripts/bench.sh events [BINARY [BINARY]]   # the event feed: long-poll latency, and its cost on SQLite
#
# Environment (all, gate, overload):
#   DURATION    measured seconds per scenario (default 10)
#   WARMUP      warm-up seconds per scenario (default 2)
#   SKIP_BUILD  1: reuse the last release build of liverelay (in .build-bench)
#   PEER        auto (default): run the grpc-swift-2 peer if Benchmarks/RPC is built;
#               build: build it first (the first build takes ~25 min); skip: no peer
#   SCRATCH     SwiftPM scratch path for the release build (default .build-bench)
#   CONFIG      release (default); debug only to try the script quickly (numbers meaningless)
#   FANOUT      tokens of the stores' fan-out-load activity and of the dispatch fan-out (100000)
#   FANOUT_RUNS runs of each store's fan-out load; the report is the median run's (default 3)
#
# Everything it starts is stopped on exit (trap), and every server also has a lifetime cap.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-all}
[ $# -gt 0 ] && shift
case $MODE in
all | gate | overload) ;;
rpc | clients | codec | stores | isolation | broadcast | quotas | scrape | mock-apns | intent-resume | profile | pg-fresh | events)
    exec bash "$ROOT/scripts/bench/$MODE.sh" "$@" ;;
*)
    echo "scripts/bench.sh: unknown area '$MODE' (all, gate, overload, rpc, clients, codec, stores, isolation, broadcast, quotas, scrape, mock-apns, intent-resume, profile, pg-fresh, events)" >&2
    exit 2 ;;
esac
cd "$ROOT"
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
SKIP_BUILD=${SKIP_BUILD:-0}
PEER=${PEER:-auto}
SCRATCH=${SCRATCH:-$ROOT/.build-bench}
CONFIG=${CONFIG:-release}
STARTED=$(date +%s)

WORK=$(mktemp -d /tmp/liverelay-bench.XXXXXX)
PIDS=()
PG_DIR=""
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    # Servers drain gracefully on SIGTERM (GOAWAY, queued pushes); give them a moment.
    for _ in $(seq 50); do
        local alive=0
        for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "$PG_DIR" ]; then bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR" >/dev/null 2>&1 || true; fi
    rm -rf "$WORK/data" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "bench: $*" >&2; }

# --- build ----------------------------------------------------------------------
if [ "$SKIP_BUILD" != 1 ]; then
    log "building liverelay (swift build -c $CONFIG --scratch-path $SCRATCH --product liverelay)"
    swift build -c "$CONFIG" --scratch-path "$SCRATCH" --product liverelay >"$WORK/build.log" 2>&1 || {
        tail -40 "$WORK/build.log" >&2
        exit 1
    }
fi
LR="$SCRATCH/$CONFIG/liverelay"
[ -x "$LR" ] || { log "missing $LR (run without SKIP_BUILD=1)"; exit 1; }

# --- servers --------------------------------------------------------------------
# All servers share one development data directory, hence one certificate and API key
# (minted by the first start, which prints it). A server never outlives LIFETIME seconds.
LIFETIME=900
mkdir -p "$WORK/data" "$WORK/logs"

wait_for() { # file pattern seconds
    local i
    for ((i = 0; i < $3 * 10; i++)); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    log "timed out waiting for '$2' in $1:"
    cat "$1" >&2
    return 1
}

start_server() { # name args... ; sets PORT_<name> and PID_<name>; SERVER_DATA: another data directory; PIN: taskset CPU list
    local name=$1
    shift
    ${PIN:+taskset -c "$PIN"} timeout --signal=TERM "$LIFETIME" "$LR" serve --data-dir "${SERVER_DATA:-$WORK/data}" --port 0 --log-level warning "$@" \
        >"$WORK/logs/$name.out" 2>"$WORK/logs/$name.err" &
    local pid=$!
    PIDS+=("$pid")
    wait_for "$WORK/logs/$name.out" "^listening on " 60
    local port
    port=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$WORK/logs/$name.out" | head -1)
    # `timeout` is the parent: the server is its only child.
    local server_pid
    server_pid=$(pgrep -P "$pid" | head -1 || true)
    printf -v "PORT_$name" '%s' "$port"
    printf -v "PID_$name" '%s' "${server_pid:-$pid}"
    log "$name: port $port, pid ${server_pid:-$pid} ($*)"
}

start_server null --null-service
export LIVERELAY_API_KEY
LIVERELAY_API_KEY=$(sed -n 's/^export LIVERELAY_API_KEY=//p' "$WORK/logs/null.out" | head -1)
[ -n "$LIVERELAY_API_KEY" ] || { log "no API key in $WORK/logs/null.out"; exit 1; }
CA="$WORK/data/cert.pem"

# --- overload isolation ---------------------------------------------------------------
# One app floods RegisterToken open loop at 3x what the server carries for it while another
# sends 500/s (`liverelay bench overload`: capacity, quiet alone, both at once). Against a
# SQLite server of its own (a fresh data directory, the development certificate, an operator
# key made here, so one key may act for both apps), once with admission at its defaults and
# once with admission off at the same flood rate, for comparison. The SQLite store is where
# calls queue: each is a durable write, and the flood fills the writer's queue.
# On a machine with two CPUs or more the server runs on CPU 0 and both generators on CPU 1
# (taskset), so that the generators' load does not land on the server's core and rounds
# compare: the figures in docs/BENCHMARKS.md are taken that way.
OVERLOAD_RESULTS="$WORK/overload"
SERVER_CPU="" GENERATOR_CPU=""
if [ "$(nproc)" -ge 2 ]; then SERVER_CPU=0 GENERATOR_CPU=1; fi
run_overload() {
    mkdir -p "$OVERLOAD_RESULTS"
    local key
    key=$(python3 "$ROOT/scripts/bench/operator-key.py" "$WORK/overload-keys.json" "scripts/bench.sh overload scenario")
    local name admission capacity=()
    for name in on off; do
        admission='{"enabled": true}'
        [ "$name" = off ] && admission='{"enabled": false}'
        mkdir -p "$WORK/overload-$name"
        cat >"$WORK/overload-$name/config.json" <<JSON
{"listen": {"host": "127.0.0.1", "port": 0},
 "tls": {"certificate": "$WORK/data/cert.pem", "private_key": "$WORK/data/key.pem"},
 "api_key_file": "$WORK/overload-keys.json", "data_dir": "$WORK/overload-$name",
 "store": {"kind": "sqlite"}, "admission": $admission}
JSON
        PIN=$SERVER_CPU SERVER_DATA="$WORK/overload-$name" start_server "overload_$name" --config "$WORK/overload-$name/config.json"
        local port_var="PORT_overload_$name" pid_var="PID_overload_$name"
        log "overload isolation, admission $name: liverelay bench overload ${capacity[*]}"
        ${GENERATOR_CPU:+taskset -c "$GENERATOR_CPU"} timeout --signal=KILL $((7 * (WARMUP + DURATION) + 180)) "$LR" bench overload --port "${!port_var}" --ca-file "$CA" \
            --api-key "$key" --server-pid "${!pid_var}" --duration "$DURATION" --warmup "$WARMUP" --json "${capacity[@]}" \
            >"$OVERLOAD_RESULTS/$name.json" 2>"$WORK/logs/overload-$name.err" || {
            log "overload scenario ($name) failed:"
            tail -20 "$WORK/logs/overload-$name.err" >&2
            return 1
        }
        grep -v '^\S* \[' "$WORK/logs/overload-$name.err" >&2 || true
        kill -TERM "${!pid_var}" 2>/dev/null || true
        # Admission off floods at the rate admission on was measured against, so the rows compare.
        capacity=(--capacity "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["capacity"])' "$OVERLOAD_RESULTS/on.json")")
    done
}

# The overload table (docs/BENCHMARKS.md, "Overload isolation").
overload_tables() {
    local tables="$WORK/overload-tables.md"
    python3 - "$OVERLOAD_RESULTS" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$DURATION" "$WARMUP" >"$tables" <<'PY'
import json, os, sys
results, when, duration, warmup = sys.argv[1:5]
def ms(us): return f"{us / 1000:.2f}"
def mib(b): return "n/a" if b is None else f"{b / 1048576:.0f}"
rows = []
labels = {"on": "defaults", "off": "off", "null": "null service (the floor)"}
for name in ["on", "off", "null"]:
    path = os.path.join(results, f"{name}.json")
    if not os.path.exists(path):
        continue
    r = json.load(open(path))
    m = r["rounds"][r["median_round"]]
    qa, qf, nf = m["quiet_alone"], m["quiet_flood"], m["noisy_flood"]
    # The null service refuses nothing: its row shows when it answered the flood's calls.
    refusal = nf.get("service_time_us") if name == "null" else nf.get("refusal_latency_us")
    ratios = ", ".join(f'{x["quiet_p99_ratio"]:.2f}' for x in r["rounds"])
    cpu = m.get("server_cpu_percent_during_flood")
    rows.append(f'| {labels[name]} | {r["capacity"]:,.0f}{"" if r["capacity_measured"] else " (given)"} | '
                f'{nf["asked_rate"]:,.0f} / {nf["achieved_rate"]:,.0f} / {nf["ok_per_second"]:,.0f} | {r["noisy_refusal_rate"] * 100:.1f}% | '
                + (f'{"answers " if name == "null" else ""}{ms(refusal["p50"])} / {ms(refusal["p99"])}' if refusal else "—") + " | "
                f'{ms(qa["latency_us"]["p50"])} / {ms(qa["latency_us"]["p99"])} | '
                f'{ms(qf["latency_us"]["p50"])} / {ms(qf["latency_us"]["p99"])} ({qf["ok"]:,} of {qf["sent"]:,} OK) | '
                f'**{r["quiet_p99_ratio"]:.2f}x** ({ratios}) | {m["quiet_service_p99_ratio"]:.2f}x | {"met" if r["goal_met"] else "**not met**"} | '
                f'{mib(r.get("server_rss_before_flood_bytes"))} / {mib(r.get("server_rss_max_during_flood_bytes"))} / '
                f'{mib(r.get("server_rss_after_flood_bytes"))} | ' + ("n/a" if cpu is None else f"{cpu:.0f}%") + " |")
out = [f"Run of {when}, `scripts/bench.sh overload` (DURATION={duration} s measured after WARMUP={warmup} s per phase, "
       "3 rounds), release build, SQLite store; the server on CPU 0 and both load generators on CPU 1 when there are two. "
       "Figures are the median round's (the round whose ratio is the median).", "",
       "| Admission | Capacity, calls/s (noisy app alone) | Noisy asked / sent / OK, calls/s | Noisy refused | Refusals answered (from the send) p50 / p99 ms | "
       "Quiet alone p50 / p99 ms | Quiet under the flood p50 / p99 ms | Quiet p99 flood / alone (each round) | The same from the send | Goal ≤ 1.5x | "
       "Server RSS MiB: before / max during / after the floods | Server CPU in the flood (% of a core) |",
       "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|"] + rows
null_path = os.path.join(results, "null.json")
on_path = os.path.join(results, "on.json")
if os.path.exists(null_path) and os.path.exists(on_path):
    null = json.load(open(null_path))
    on = json.load(open(on_path))
    refusal_cpu = on["rounds"][on["median_round"]].get("server_cpu_us_per_noisy_call")
    null_cpu = null["rounds"][null["median_round"]].get("server_cpu_us_per_noisy_call")
    if refusal_cpu and null_cpu:
        out += ["", f"Server CPU per noisy call in the flood (refusals, and the admitted calls among them), admission at its defaults: "
                f"{refusal_cpu:.1f} µs; the null service's per call in the same flood, on the same CPU: {null_cpu:.1f} µs "
                f"(**{refusal_cpu / null_cpu:.2f}x**, goal ≤ 2x)."]
print("\n".join(out))
PY
    cat "$tables"
}

# The floor: the same scenario (same capacity, rounds and flood) against the null service on
# the server's CPU, which answers every call at once and stores nothing. No server that
# answers each call does better than it: its quiet p99 ratio and its answers' latency bound
# what admission can reach on that CPU, and its CPU per call is what a refusal is held to.
overload_null_floor() {
    local capacity
    capacity=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["capacity"])' "$OVERLOAD_RESULTS/on.json")
    PIN=$SERVER_CPU start_server null_pinned --null-service
    local key
    key=$(sed -n 's/^export LIVERELAY_API_KEY=//p' "$WORK/logs/null_pinned.out" | head -1)
    [ -n "$key" ] && LIVERELAY_API_KEY=$key
    log "overload: the same scenario against the null service (the floor), capacity $capacity"
    ${GENERATOR_CPU:+taskset -c "$GENERATOR_CPU"} timeout --signal=KILL $((7 * (WARMUP + DURATION) + 180)) "$LR" bench overload --port "$PORT_null_pinned" \
        --ca-file "$CA" --api-key "$LIVERELAY_API_KEY" --server-pid "$PID_null_pinned" --duration "$DURATION" --warmup "$WARMUP" \
        --capacity "$capacity" --json >"$OVERLOAD_RESULTS/null.json" 2>"$WORK/logs/overload-null.err" || {
        log "the null service run failed:"
        tail -20 "$WORK/logs/overload-null.err" >&2
        return 1
    }
    grep -v '^\S* \[' "$WORK/logs/overload-null.err" >&2 || true
    kill -TERM "$PID_null_pinned" 2>/dev/null || true
}

if [ "$MODE" = overload ]; then
    # The null server only made the development certificate; the scenario wants the cores.
    kill -TERM "$PID_null" 2>/dev/null || true
    run_overload
    overload_null_floor
    overload_tables
    log "overload scenario finished in $(($(date +%s) - STARTED)) s; raw reports in $OVERLOAD_RESULTS"
    exit 0
fi

# The throughput scenarios below put up to 256 calls of one app in flight (and their setups
# 256 registrations at once): admission's per-app limits would refuse most of them, and these
# scenarios measure what the store and the RPC path carry at a given concurrency, not
# admission. Their servers raise the limits well above it; the overload scenario above keeps
# the defaults.
UNLIMITED=(--admission-max-in-flight-per-app 100000 --admission-max-in-flight 100000)
DEV_KEY="$WORK/data/apns-dev-key.p8"
if [ "$MODE" = gate ]; then
    # The gate's baseline was recorded with the memory server's in-process mock APNs: kept so.
    start_server memory --store memory "${UNLIMITED[@]}"
else
    # The memory scenarios' pushes go to a `liverelay mock-apns` of their own (recording
    # nothing), not to the server's in-process mock: the server's CPU per call (read from
    # /proc/<pid>) is then the server's own, the figure the ingest table compares with the
    # null service's. dev.app's key is made here when no server has made it yet (the
    # null service makes none): a P-256 key in PKCS#8, as the server would make it.
    [ -f "$DEV_KEY" ] || { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DEV_KEY" 2>/dev/null && chmod 600 "$DEV_KEY"; }
    timeout --signal=TERM "$LIFETIME" "$LR" mock-apns --port 0 --cert-out "$WORK/memory-mock-apns.pem" --log-level warning \
        --recording-capacity 0 --app "dev.app,LRDEVTEAM1,LRDEVKEY01,$DEV_KEY" \
        >"$WORK/logs/memory-mock-apns.out" 2>"$WORK/logs/memory-mock-apns.err" &
    PIDS+=("$!")
    wait_for "$WORK/logs/memory-mock-apns.out" "listening on" 30
    MEMORY_MOCK_PORT=$(sed -n 's/^mock APNs listening on .*:\([0-9]*\)$/\1/p' "$WORK/logs/memory-mock-apns.out" | head -1)
    MEMORY_MOCK_PID=$(pgrep -P "${PIDS[-1]}" | head -1 || true)
    log "memory server's mock APNs: port $MEMORY_MOCK_PORT, pid ${MEMORY_MOCK_PID:-?}"
    start_server memory --store memory "${UNLIMITED[@]}" --apns-endpoint "127.0.0.1:$MEMORY_MOCK_PORT" \
        --apns-trust "$WORK/memory-mock-apns.pem"
fi

stop_servers() { # pid... : SIGKILL (a graceful drain would deliver what they still queue), then wait until gone
    local pid
    for pid in "$@"; do kill -KILL "$pid" 2>/dev/null || true; done
    for _ in $(seq 100); do
        local alive=0
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && return 0
        sleep 0.1
    done
}

bench() { # name port pid args... : one `liverelay bench` run, its JSON report in $WORK/results/<name>.json
    local name=$1 port=$2 pid=$3
    shift 3
    mkdir -p "$WORK/results"
    log "scenario $name: liverelay bench $*"
    timeout --signal=KILL $((WARMUP + DURATION + 120)) "$LR" bench --port "$port" --ca-file "$CA" --server-pid "$pid" \
        --name "$name" --warmup "$WARMUP" --json "$@" >"$WORK/results/$name.json" 2>"$WORK/logs/bench-$name.err" || {
        log "scenario $name failed:"
        tail -20 "$WORK/logs/bench-$name.err" >&2
        return 1
    }
    grep -v '^\S* \[' "$WORK/logs/bench-$name.err" >&2 || true
}

# Loading the 100k update tokens of one activity: an UpdateActivity that does not wait for
# delivery answers once its pushes are queued, so its latency is the store's read of the
# activity's tokens plus building and queueing the 100k pushes. One call per `liverelay bench`
# run (a second one while the first's 100k pushes still fill the app's queue would be
# RESOURCE_EXHAUSTED), and FANOUT_RUNS (3) runs, each registering its own activity's tokens:
# one call of this length on 2 shared cores can move by 2x between runs of the same build, so
# the report is the median run's, with every run's latency beside it (`runs_ms`).
fanout_load() { # store port pid : <store>-fanout-load.json = the median of FANOUT_RUNS runs
    local store=$1 port=$2 pid=$3 i
    mkdir -p "$WORK/fanout-runs"
    for i in $(seq "${FANOUT_RUNS:-3}"); do
        bench "$store-fanout-load-run$i" "$port" "$pid" --connections 1 --depth 1 --mix update --activities 1 \
            --tokens-per-activity "${FANOUT:-100000}" --requests 1 --warmup 0 --timeout 300 || return 1
        mv "$WORK/results/$store-fanout-load-run$i.json" "$WORK/fanout-runs/"
    done
    python3 - "$WORK/fanout-runs" "$store" "$WORK/results/$store-fanout-load.json" <<'PY'
import glob, json, sys
runs_dir, store, out = sys.argv[1:4]
runs = [json.load(open(p)) for p in sorted(glob.glob(f"{runs_dir}/{store}-fanout-load-run*.json"))]
runs_ms = [r["latency_us"]["max"] / 1000 for r in runs]
median = sorted(runs, key=lambda r: r["latency_us"]["max"])[len(runs) // 2]
median["runs_ms"] = runs_ms
json.dump(median, open(out, "w"))
print(f"bench: {store}-fanout-load: runs {', '.join(f'{x:.1f}' for x in runs_ms)} ms; median {median['latency_us']['max'] / 1000:.1f} ms", file=sys.stderr)
PY
}

if [ "$MODE" = gate ]; then
    log "regression gate: null service vs realistic mix (memory store), ratios against Benchmarks/bench-baseline.json"
    status=0
    # A baseline per build configuration: CI gates its debug build (no second build), people the release one.
    BASELINE="$ROOT/Benchmarks/bench-baseline.json"
    [ "$CONFIG" = release ] || BASELINE="$ROOT/Benchmarks/bench-baseline-$CONFIG.json"
    "$LR" bench gate --port "$PORT_memory" --null-port "$PORT_null" --null-pid "$PID_null" --server-pid "$PID_memory" \
        --ca-file "$CA" --baseline "$BASELINE" "$@" || status=$?
    log "gate finished in $(($(date +%s) - STARTED)) s"
    exit $status
fi

start_server sqlite --store sqlite "${UNLIMITED[@]}"

# A throwaway PostgreSQL (scripts/postgres.sh, stopped on exit) for the PostgreSQL store's
# scenarios, unless PG=0.
PG=${PG:-1}
if [ "$PG" = 1 ]; then
    eval "$(bash "$ROOT/scripts/postgres.sh" start)"
    PG_DIR=$LIVERELAY_POSTGRES_DIR
    export LIVERELAY_POSTGRES_URL
    start_server postgres --store postgres "${UNLIMITED[@]}"
fi

# --- RPC ingest scenarios ---------------------------------------------------------
D=(--duration "$DURATION")
MIX_REALISTIC="register=2,start=1,update=5,end=1,ping=1"
bench null-1x1     "$PORT_null" "$PID_null" --connections 1 --depth 1 --mix register "${D[@]}"
bench null-4x32    "$PORT_null" "$PID_null" --connections 4 --depth 32 --mix register "${D[@]}"
bench null-16x64   "$PORT_null" "$PID_null" --connections 16 --depth 64 --mix register "${D[@]}"
bench null-open    "$PORT_null" "$PID_null" --rate 50000 --connections 4 --mix register "${D[@]}"
bench memory-register-4x32 "$PORT_memory" "$PID_memory" --connections 4 --depth 32 --mix register "${D[@]}"
bench memory-mixed-4x32    "$PORT_memory" "$PID_memory" --connections 4 --depth 32 --mix "$MIX_REALISTIC" \
    --activities 100 --tokens-per-activity 2 "${D[@]}"
bench memory-mixed-open    "$PORT_memory" "$PID_memory" --rate 20000 --connections 4 --mix "$MIX_REALISTIC" \
    --activities 100 --tokens-per-activity 2 "${D[@]}"
bench memory-update-fanout "$PORT_memory" "$PID_memory" --connections 4 --depth 32 --mix update \
    --activities 20 --tokens-per-activity 100 --payload-bytes 1000 "${D[@]}"
# Each store's scenarios run with the servers before them stopped: a development server goes
# on delivering a fan-out's 100k queued pushes to its in-process mock (and the memory server
# its update fan-outs) after the call that queued them has answered, on the two cores the
# next scenario measures.
stop_servers "$PID_null" "$PID_memory" ${MEMORY_MOCK_PID:+"$MEMORY_MOCK_PID"}
bench sqlite-register-4x64 "$PORT_sqlite" "$PID_sqlite" --connections 4 --depth 64 --mix register "${D[@]}"
fanout_load sqlite "$PORT_sqlite" "$PID_sqlite"
if [ "$PG" = 1 ]; then
    stop_servers "$PID_sqlite"
    bench postgres-register-4x64 "$PORT_postgres" "$PID_postgres" --connections 4 --depth 64 --mix register "${D[@]}"
    fanout_load postgres "$PORT_postgres" "$PID_postgres"
fi

# --- dispatch scenarios (APNs) ------------------------------------------------------
# One mock APNs process, knowing dev.app's key (made by the first server start in the
# shared data directory); a memory-store server whose dispatcher pushes to it; then,
# against the same mock: one UpdateActivity fanned out to FANOUT tokens (waiting for
# delivery: the summary is APNs's answer for every token), h2load's POSTs, and the
# Python APNs client (aioapns, its own HTTP/2 stack).
# The RPC servers go first: their development setups may still be delivering the pushes
# of the fan-out loads above to their in-process mocks, on the cores measured here.
stop_servers "$PID_null" "$PID_memory" "$PID_sqlite" ${PID_postgres:+"$PID_postgres"} ${MEMORY_MOCK_PID:+"$MEMORY_MOCK_PID"}
{ run_overload && overload_null_floor; } || log "overload scenario failed; no overload table"
FANOUT=${FANOUT:-100000}
FANOUT_CALLS=${FANOUT_CALLS:-3}
H2LOAD_REQUESTS=${H2LOAD_REQUESTS:-300000}
PYTHON_PUSHES=${PYTHON_PUSHES:-20000}
DISPATCH_PEERS="$WORK/dispatch-peers.jsonl"
: >"$DISPATCH_PEERS"
# Recording off: the mock keeps no record of each push (nothing here reads them), which
# takes some 3 µs per push off the mock's CPU on the cores the dispatcher is measured on.
timeout --signal=TERM "$LIFETIME" "$LR" mock-apns --port 0 --cert-out "$WORK/mock-apns.pem" --log-level warning \
    --recording-capacity 0 --app "dev.app,LRDEVTEAM1,LRDEVKEY01,$DEV_KEY" >"$WORK/logs/mock-apns.out" 2>"$WORK/logs/mock-apns.err" &
PIDS+=("$!")
wait_for "$WORK/logs/mock-apns.out" "listening on" 30
MOCK_PORT=$(sed -n 's/^mock APNs listening on .*:\([0-9]*\)$/\1/p' "$WORK/logs/mock-apns.out" | head -1)
MOCK_PID=$(pgrep -P "${PIDS[-1]}" | head -1 || true)
log "mock APNs: port $MOCK_PORT, pid ${MOCK_PID:-?}"
start_server dispatch --store memory "${UNLIMITED[@]}" --apns-endpoint "127.0.0.1:$MOCK_PORT" --apns-trust "$WORK/mock-apns.pem"
# The mock's CPU (user + system, µs) from /proc: read around each client, so that its cost
# per push is reported next to the client's (the mock bounds these figures on 2 cores).
TICK_US=$((1000000 / $(getconf CLK_TCK)))
mock_cpu_us() { awk -v t="$TICK_US" '{ print ($14 + $15) * t }' "/proc/${MOCK_PID:-0}/stat" 2>/dev/null || echo 0; }
MOCK_CPU_0=$(mock_cpu_us)

bench dispatch-fanout "$PORT_dispatch" "$PID_dispatch" --connections 1 --depth 1 --mix update --activities 1 \
    --tokens-per-activity "$FANOUT" --requests "$FANOUT_CALLS" --warmup 0 --wait-for-delivery --timeout 300

MOCK_CPU_1=$(mock_cpu_us)
echo "{\"peer\": \"liverelay\", \"mock_cpu_us\": $((MOCK_CPU_1 - MOCK_CPU_0)), \"pushes\": $((FANOUT * FANOUT_CALLS))}" >>"$DISPATCH_PEERS"
command -v h2load >/dev/null || { log "h2load missing (scripts/setup.sh installs nghttp2-client)"; exit 1; }
JWT=$(python3 -c 'import jwt, sys, time
print(jwt.encode({"iss": "LRDEVTEAM1", "iat": int(time.time())}, open(sys.argv[1]).read(), algorithm="ES256", headers={"kid": "LRDEVKEY01"}))' "$DEV_KEY")
printf '{"aps":{"timestamp":%s,"event":"update","content-state":{"eta":5,"driver":"Ann"}}}' "$(date +%s)" >"$WORK/h2load-body.json"
DEVICE=$(printf 'ab%.0s' $(seq 32))
log "h2load: $H2LOAD_REQUESTS POSTs, 4 connections x 100 streams, to the same mock"
# h2load's own CPU: the rusage of the children python3 waited for (timeout, and h2load under it).
MOCK_CPU_1=$(mock_cpu_us)
python3 -c 'import resource, subprocess, sys
subprocess.call(sys.argv[2:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write(str(int((usage.ru_utime + usage.ru_stime) * 1e6)))' "$WORK/h2load-cpu-us" \
    timeout --signal=KILL 300 h2load -n "$H2LOAD_REQUESTS" -c 4 -m 100 -d "$WORK/h2load-body.json" \
    -H "authorization: bearer $JWT" -H "apns-topic: dev.app.push-type.liveactivity" \
    -H "apns-push-type: liveactivity" -H "apns-priority: 10" \
    "https://127.0.0.1:$MOCK_PORT/3/device/$DEVICE" >"$WORK/logs/h2load.out" 2>&1 || true
MOCK_CPU_2=$(mock_cpu_us)
python3 - "$WORK/logs/h2load.out" "$H2LOAD_REQUESTS" "$(cat "$WORK/h2load-cpu-us" 2>/dev/null || echo 0)" \
    "$((MOCK_CPU_2 - MOCK_CPU_1))" >>"$DISPATCH_PEERS" <<'PY'
import json, re, sys
text, asked, cpu_us, mock_cpu_us = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rate = re.search(r"finished in [0-9.]+m?s, ([0-9.]+) req/s", text)
ok = re.search(r"status codes: ([0-9]+) 2xx", text)
print(json.dumps({"peer": "h2load", "rps": float(rate.group(1)) if rate else 0.0,
                  "ok": int(ok.group(1)) if ok else 0, "asked": asked,
                  "cpu_us": cpu_us, "mock_cpu_us": mock_cpu_us}))
PY
log "aioapns: $PYTHON_PUSHES pushes, 1 connection, to the same mock"
timeout --signal=KILL 300 python3 "$ROOT/Tests/APNsPeers/aioapns_peer.py" --port "$MOCK_PORT" --ca "$WORK/mock-apns.pem" \
    --key-file "$DEV_KEY" --key-id LRDEVKEY01 --team-id LRDEVTEAM1 --bundle-id dev.app --token "$DEVICE" \
    --bench "$PYTHON_PUSHES" --connections 1 >"$WORK/logs/aioapns.out" 2>&1 || true
python3 - "$WORK/logs/aioapns.out" "$PYTHON_PUSHES" >>"$DISPATCH_PEERS" <<'PY'
import json, re, sys
text, asked = open(sys.argv[1]).read(), int(sys.argv[2])
rate = re.search(r"= ([0-9.]+) pushes/s", text)
ok = re.search(r"'200': ([0-9]+)", text)
print(json.dumps({"peer": "aioapns", "rps": float(rate.group(1)) if rate else 0.0,
                  "ok": int(ok.group(1)) if ok else 0, "asked": asked}))
PY
cat "$DISPATCH_PEERS" >&2

# --- the grpc-swift-2 peer ------------------------------------------------------------
PEER_RESULTS="$WORK/peer.jsonl"
: >"$PEER_RESULTS"
RPC_BIN="$ROOT/Benchmarks/RPC/.build/release"
if [ "$PEER" = build ] || { [ "$PEER" = auto ] && [ -x "$RPC_BIN/grpc-load" ] && [ -x "$RPC_BIN/lr-load" ]; }; then
    skip=1
    [ "$PEER" = build ] && skip=0
    log "grpc-swift-2 peer: scripts/bench/rpc.sh (shapes 1x1 4x32 16x64)"
    SHAPES="1x1 4x32 16x64" WARMUP="$WARMUP" DURATION="$DURATION" SKIP_BUILD=$skip RESULTS="$PEER_RESULTS" \
        bash "$ROOT/scripts/bench/rpc.sh" >"$WORK/logs/bench-rpc.out" 2>"$WORK/logs/bench-rpc.err" || {
        log "scripts/bench/rpc.sh failed (the table will show no peer):"
        tail -20 "$WORK/logs/bench-rpc.err" >&2
    }
else
    log "grpc-swift-2 peer skipped: Benchmarks/RPC is not built (PEER=build builds it, ~25 min the first time)"
fi

# --- tables -----------------------------------------------------------------------------
TABLES="$WORK/tables.md"
python3 - "$WORK/results" "$PEER_RESULTS" "$DISPATCH_PEERS" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$DURATION" "$WARMUP" >"$TABLES" <<'PY'
import glob, json, os, sys
results_dir, peer_file, dispatch_file, when, duration, warmup = sys.argv[1:7]
reports = {}
for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
    try:
        reports[os.path.basename(path)[:-5]] = json.load(open(path))
    except ValueError:
        pass
peer = {}
for line in open(peer_file):
    if line.strip():
        r = json.loads(line)
        peer[("grpc" if r["target"].startswith("grpc") else r["target"], r["label"])] = r
def n(v): return f"{v:,.0f}"
def ms(us): return f"{us / 1000:.2f}"
def cpu(r): return "n/a" if r.get("server_cpu_us_per_call") is None else f'{r["server_cpu_us_per_call"]:.1f}'
out = []
out.append(f"Run of {when}, `scripts/bench.sh` (DURATION={duration} s measured after WARMUP={warmup} s per scenario), "
           "release build, 2 vCPUs shared with other builds: compare ratios and server CPU per call, not absolute rates.")
out.append("")
out.append("#### RPC ingest: `liverelay bench` against `liverelay serve --null-service` vs grpc-swift-2 (goal: at least 3x the throughput at no worse p99)")
out.append("")
out.append("| Shape (C×D) | LiveRelay calls/s | LiveRelay p50 / p99 / p99.9 ms | LiveRelay server CPU µs/call | gRPC calls/s | gRPC p50 / p99 / p99.9 ms | Throughput ratio | p99 LR / gRPC | Goal | lr-load calls/s (cross-check) |")
out.append("|---|--:|--:|--:|--:|--:|--:|--:|---|--:|")
for shape in ["1x1", "4x32", "16x64"]:
    r = reports.get(f"null-{shape}")
    g = peer.get(("grpc", shape))
    l = peer.get(("liverelay", shape))
    if not r:
        continue
    lat = r["latency_us"]
    row = [shape.replace("x", "×"), n(r["throughput"]), f'{ms(lat["p50"])} / {ms(lat["p99"])} / {ms(lat["p999"])}', cpu(r)]
    if g:
        ratio = r["throughput"] / g["rps"] if g["rps"] else float("inf")
        p99 = lat["p99"] / g["p99_us"] if g["p99_us"] else float("inf")
        met = ratio >= 3 and p99 <= 1
        row += [n(g["rps"]), f'{g["p50_us"]/1000:.2f} / {g["p99_us"]/1000:.2f} / {g["p999_us"]/1000:.2f}',
                f"**{ratio:.1f}x**", f"{p99:.2f}", "met" if met else "**not met**"]
    else:
        row += ["not run", "", "", "", "no peer"]
    row.append(n(l["rps"]) if l else "")
    out.append("| " + " | ".join(row) + " |")
out.append("")
out.append("#### Every scenario of the run")
out.append("")
out.append("| Scenario | Load | OK/s | Errors | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | Server CPU µs/call | Late / unsent |")
out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for name, r in reports.items():
    lat = r["latency_us"]
    load = r["description"].split(";")[0] + "; " + r["description"].split("mix ")[-1]
    late = f'{r["late"]} / {r["unsent"]}' if r["mode"] == "open" else "—"
    out.append(f'| {name} | {load} | {n(r["throughput"])} | {r["errors"]} | {ms(lat["p50"])} | {ms(lat["p90"])} | '
               f'{ms(lat["p99"])} | {ms(lat["p999"])} | {ms(lat["max"])} | {cpu(r)} | {late} |')
out.append("")
stores = [(k, reports.get(f"{k}-register-4x64"), reports.get(f"{k}-fanout-load")) for k in ["memory", "sqlite", "postgres"]]
if any(r or f for _, r, f in stores):
    out.append("#### Stores through the RPC: durable RegisterToken/s, and loading one activity's tokens")
    out.append("")
    out.append("| Store | RegisterToken calls/s (4×64 in flight; memory 4×32) | p50 / p99 ms | Server CPU µs/call | Tokens of one activity registered (setup) | One UpdateActivity of those tokens until its pushes are queued, ms |")
    out.append("|---|--:|--:|--:|--:|--:|")
    for kind, r, f in stores:
        if kind == "memory":
            r = reports.get("memory-register-4x32")
        if not (r or f):
            continue
        row = [kind]
        row += [n(r["throughput"]), f'{ms(r["latency_us"]["p50"])} / {ms(r["latency_us"]["p99"])}', cpu(r)] if r else ["", "", ""]
        if f:
            row += [f'{n(f["setup_calls"] - 1)} in {f["setup_seconds"]:.1f} s ({n((f["setup_calls"] - 1) / max(f["setup_seconds"], 1e-9))}/s)',
                    f'{ms(f["latency_us"]["max"])}' + (f' (median of {", ".join(f"{x:.2f}" for x in f["runs_ms"])})' if f.get("runs_ms") else "")
                    + (f' ({f["errors"]} errors)' if f["errors"] else "")]
        else:
            row += ["", ""]
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    out.append("SQLite and PostgreSQL answer RegisterToken only after the write is durable (fsync). "
               "Tokens are scattered over the key space like real APNs tokens.")
    out.append("")
null = reports.get("null-4x32")
ingest = [(name, reports.get(name)) for name in ["memory-register-4x32", "memory-mixed-4x32", "memory-mixed-open"]]
if null and null.get("server_cpu_us_per_call") and any(r for _, r in ingest):
    ceiling = 2 * null["server_cpu_us_per_call"]
    out.append("#### Ingest: server CPU per call against the null service's")
    out.append("")
    out.append(f'Null service (null-4x32): {null["server_cpu_us_per_call"]:.1f} µs of server CPU per call; the ceiling is twice that, '
               f"{ceiling:.1f} µs. The memory server pushes to a `liverelay mock-apns` process of its own, so its CPU is its own "
               "(decoding, rules, store, dispatcher and APNs client), not the mock's.")
    out.append("")
    out.append("| Scenario | Load | Server CPU µs/call | × null | Goal ≤ 2x |")
    out.append("|---|---|--:|--:|---|")
    for name, r in ingest:
        if not r or r.get("server_cpu_us_per_call") is None:
            continue
        load = r["description"].split(";")[0] + "; " + r["description"].split("mix ")[-1]
        ratio = r["server_cpu_us_per_call"] / null["server_cpu_us_per_call"]
        out.append(f'| {name} | {load} | {r["server_cpu_us_per_call"]:.1f} | {ratio:.2f}x | {"met" if ratio <= 2 else "**not met**"} |')
    out.append("")
out.append("#### Targets")
out.append("")
out.append("| Target | Result |")
out.append("|---|---|")
shapes = [s for s in ["1x1", "4x32", "16x64"] if reports.get(f"null-{s}") and peer.get(("grpc", s))]
if shapes:
    ok = all(reports[f"null-{s}"]["throughput"] >= 3 * peer[("grpc", s)]["rps"] and
             reports[f"null-{s}"]["latency_us"]["p99"] <= peer[("grpc", s)]["p99_us"] for s in shapes)
    ratios = ", ".join(f'{s}: {reports[f"null-{s}"]["throughput"] / peer[("grpc", s)]["rps"]:.1f}x' for s in shapes)
    out.append(f"| RPC ingest ≥ 3x grpc-swift-2 at no worse p99 | {'**met**' if ok else '**not met**'} ({ratios}) |")
else:
    out.append("| RPC ingest ≥ 3x grpc-swift-2 at no worse p99 | not measured in this run (peer not built) |")
dispatch_peers = {}
for line in open(dispatch_file):
    if line.strip():
        r = json.loads(line)
        dispatch_peers[r["peer"]] = r
fan = reports.get("dispatch-fanout")
push = fan.get("pushes") if fan else None
h2 = dispatch_peers.get("h2load")
py = dispatch_peers.get("aioapns")
ours = dispatch_peers.get("liverelay")
def per(total, count): return f"{total / count:.1f}" if total and count else "n/a"
section = []
if push:
    rate = push["delivered_per_second"]
    peak = (fan.get("server_peak_rss_bytes") or 0) / 1048576
    h2_ratio = rate / h2["rps"] if h2 and h2["rps"] else None
    py_ratio = rate / py["rps"] if py and py["rps"] else None
    tokens = push["targeted"] // max(1, push["calls"])
    out.append(f'| Dispatch ≥ 80% of h2load | {"**met**" if h2_ratio >= 0.8 else "**not met**"} ({h2_ratio:.2f}) |'
               if h2_ratio else "| Dispatch ≥ 80% of h2load | h2load did not run |")
    out.append(f'| Dispatch ≥ 10x the Python APNs client | {"**met**" if py_ratio >= 10 else "**not met**"} ({py_ratio:.1f}x) |'
               if py_ratio else "| Dispatch ≥ 10x the Python APNs client | aioapns did not run |")
    server_us = fan.get("server_cpu_us_per_call")
    server_per_push = server_us / tokens if server_us and tokens else None
    h2_per_request = h2["cpu_us"] / h2["ok"] if h2 and h2.get("cpu_us") and h2.get("ok") else None
    cpu_ratio = server_per_push / h2_per_request if server_per_push and h2_per_request else None
    out.append(f'| Dispatch ≤ 3x h2load\'s client CPU per request, in server CPU per delivered push | '
               + (f'{"**met**" if cpu_ratio <= 3 else "**not met**"} ({cpu_ratio:.1f}x: {server_per_push:.1f} µs; h2load '
                  f'{h2_per_request:.1f} µs per request) |'
                  if cpu_ratio else "not measured in this run |"))
    met = rate >= 50000 and peak < 300
    out.append(f'| {n(tokens)}-token fan-out ≥ 50k pushes/s, RSS < 300 MB | {"**met**" if met else "**not met**"} '
               f'({n(rate)} pushes/s, peak RSS {peak:.0f} MiB) |')
    section.append("")
    section.append("#### Dispatch: the dispatcher vs h2load vs the Python APNs client, against one `liverelay mock-apns` process")
    section.append("")
    section.append("| Client | Pushes/s to the mock | Answered 200 | Client CPU per push (µs) | Mock CPU per push (µs) | Dispatcher / client | Goal |")
    section.append("|---|--:|--:|--:|--:|--:|---|")
    section.append(f'| LiveRelay: {push["calls"]} UpdateActivity calls, each fanned out to {n(tokens)} tokens, waiting for delivery | '
                   f'{n(rate)} | {n(push["delivered"])} of {n(push["targeted"])} | '
                   f'{"n/a" if server_per_push is None else f"{server_per_push:.1f}"} (the whole server) | '
                   f'{per(ours.get("mock_cpu_us") if ours else 0, push["delivered"])} | — | — |')
    if h2:
        section.append(f'| h2load, 4 connections × 100 streams | {n(h2["rps"])} | {n(h2["ok"])} of {n(h2["asked"])} | '
                       f'{per(h2.get("cpu_us"), h2["ok"])} | {per(h2.get("mock_cpu_us"), h2["ok"])} | '
                       + (f'**{h2_ratio:.2f}** | ≥ 0.80: {"met" if h2_ratio >= 0.8 else "**not met**"} |' if h2_ratio else "— | — |"))
    if py:
        section.append(f'| aioapns 4.0 (Python), 1 connection | {n(py["rps"])} | {n(py["ok"])} of {n(py["asked"])} | — | — | '
                       + (f'**{py_ratio:.1f}x** | ≥ 10x: {"met" if py_ratio >= 10 else "**not met**"} |' if py_ratio else "— | — |"))
    section.append("")
    section.append(f'Fan-out: the setup registered {n(fan["setup_calls"])} tokens through RegisterToken in {fan["setup_seconds"]:.1f} s; '
                   f'each {n(tokens)}-token UpdateActivity took p50 {ms(fan["latency_us"]["p50"])} ms, max {ms(fan["latency_us"]["max"])} ms '
                   f'(store read, payloads, queueing and every APNs answer); failed {push["failed"]}, pruned {push["pruned"]}, '
                   f'superseded {push["superseded"]}, expired {push["expired"]}; the server\'s peak RSS {peak:.0f} MiB.')
else:
    out.append("| Dispatch ≥ 80% of h2load | not measured in this run |")
    out.append("| Dispatch ≥ 10x the Python APNs client | not measured in this run |")
    out.append("| 100k-token fan-out ≥ 50k pushes/s, RSS < 300 MB | not measured in this run |")
out += section
print("\n".join(out))
PY
cat "$TABLES"
[ -f "$OVERLOAD_RESULTS/on.json" ] && overload_tables
log "raw reports in $WORK/results; finished in $(($(date +%s) - STARTED)) s"
