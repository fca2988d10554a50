#!/usr/bin/env bash
# The LiveRelay benchmark run (issue 6): starts `liverelay serve` (release) on loopback in
# its configurations, runs the standard scenarios with `liverelay bench`, runs the
# grpc-swift-2 peer (Benchmarks/RPC through scripts/bench-rpc.sh), and rewrites the tables
# of the "Bench harness" section of docs/BENCHMARKS.md (between the bench:begin/end markers).
#
#   scripts/bench.sh              # everything, ~5 min after the builds
#   scripts/bench.sh gate         # the CI regression gate only (~40 s after the build)
#   scripts/bench.sh gate --write-baseline    # re-record Benchmarks/bench-baseline.json
#
# Environment:
#   DURATION    measured seconds per scenario (default 10)
#   WARMUP      warm-up seconds per scenario (default 2)
#   SKIP_BUILD  1: reuse the last release build of liverelay (in .build-bench)
#   PEER        auto (default): run the grpc-swift-2 peer if Benchmarks/RPC is built;
#               build: build it first (the first build takes ~25 min); skip: no peer
#   NO_DOCS     1: print the tables, leave docs/BENCHMARKS.md alone
#   SCRATCH     SwiftPM scratch path for the release build (default .build-bench)
#   CONFIG      release (default); debug only to try the script quickly (numbers meaningless)
#
# Everything it starts is stopped on exit (trap), and every server also has a lifetime cap.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
MODE=${1:-all}
[ $# -gt 0 ] && shift
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
SKIP_BUILD=${SKIP_BUILD:-0}
PEER=${PEER:-auto}
NO_DOCS=${NO_DOCS:-0}
SCRATCH=${SCRATCH:-$ROOT/.build-bench}
CONFIG=${CONFIG:-release}
STARTED=$(date +%s)

WORK=$(mktemp -d /tmp/liverelay-bench.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
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

start_server() { # name args... ; sets PORT_<name> and PID_<name>
    local name=$1
    shift
    timeout --signal=TERM "$LIFETIME" "$LR" serve --data-dir "$WORK/data" --port 0 --log-level warning "$@" \
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
start_server memory --store memory

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

if [ "$MODE" = gate ]; then
    log "regression gate: null service vs realistic mix (memory store), ratios against Benchmarks/bench-baseline.json"
    status=0
    "$LR" bench gate --port "$PORT_memory" --null-port "$PORT_null" --null-pid "$PID_null" --server-pid "$PID_memory" \
        --ca-file "$CA" --baseline "$ROOT/Benchmarks/bench-baseline.json" "$@" || status=$?
    log "gate finished in $(($(date +%s) - STARTED)) s"
    exit $status
fi

start_server sqlite --store sqlite

# Mock APNs, when this build has it: the dispatch scenarios will push through it.
MOCK_APNS=0
if "$LR" mock-apns --help >/dev/null 2>&1; then
    timeout --signal=TERM "$LIFETIME" "$LR" mock-apns --port 0 --cert-out "$WORK/mock-apns.pem" \
        >"$WORK/logs/mock-apns.out" 2>"$WORK/logs/mock-apns.err" &
    PIDS+=("$!")
    if wait_for "$WORK/logs/mock-apns.out" "listening on" 30; then MOCK_APNS=1; fi
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
bench sqlite-register-4x64 "$PORT_sqlite" "$PID_sqlite" --connections 4 --depth 64 --mix register "${D[@]}"

# --- dispatch scenarios (APNs) ------------------------------------------------------
# >>> DISPATCH SCENARIOS: to be filled in once APNs dispatch lands (issue 5). <<<
# With MOCK_APNS=1 a mock APNs runs (its certificate in $WORK/mock-apns.pem). Start a
# `liverelay serve` whose dispatcher points at it, then e.g.
#   bench dispatch-fanout-100k "$PORT_dispatch" "$PID_dispatch" --mix update --activities 1 \
#       --tokens-per-activity 100000 --requests 20
# and the peers (h2load against the mock APNs, the Python APNs client), writing JSON
# reports into $WORK/results/ so the table step below picks them up.
log "mock APNs running: $MOCK_APNS (dispatch scenarios not written yet)"

# --- the grpc-swift-2 peer ------------------------------------------------------------
PEER_RESULTS="$WORK/peer.jsonl"
: >"$PEER_RESULTS"
RPC_BIN="$ROOT/Benchmarks/RPC/.build/release"
if [ "$PEER" = build ] || { [ "$PEER" = auto ] && [ -x "$RPC_BIN/grpc-load" ] && [ -x "$RPC_BIN/lr-load" ]; }; then
    skip=1
    [ "$PEER" = build ] && skip=0
    log "grpc-swift-2 peer: scripts/bench-rpc.sh (shapes 1x1 4x32 16x64)"
    SHAPES="1x1 4x32 16x64" WARMUP="$WARMUP" DURATION="$DURATION" SKIP_BUILD=$skip RESULTS="$PEER_RESULTS" \
        bash "$ROOT/scripts/bench-rpc.sh" >"$WORK/logs/bench-rpc.out" 2>"$WORK/logs/bench-rpc.err" || {
        log "bench-rpc.sh failed (the table will show no peer):"
        tail -20 "$WORK/logs/bench-rpc.err" >&2
    }
else
    log "grpc-swift-2 peer skipped: Benchmarks/RPC is not built (PEER=build builds it, ~25 min the first time)"
fi

# --- tables -----------------------------------------------------------------------------
TABLES="$WORK/tables.md"
python3 - "$WORK/results" "$PEER_RESULTS" "$MOCK_APNS" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$DURATION" "$WARMUP" >"$TABLES" <<'PY'
import glob, json, os, sys
results_dir, peer_file, mock, when, duration, warmup = sys.argv[1:7]
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
        peer[(r["target"], r["label"])] = r
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
out.append("#### Goals of issue 6")
out.append("")
out.append("| Goal | Result |")
out.append("|---|---|")
shapes = [s for s in ["1x1", "4x32", "16x64"] if reports.get(f"null-{s}") and peer.get(("grpc", s))]
if shapes:
    ok = all(reports[f"null-{s}"]["throughput"] >= 3 * peer[("grpc", s)]["rps"] and
             reports[f"null-{s}"]["latency_us"]["p99"] <= peer[("grpc", s)]["p99_us"] for s in shapes)
    ratios = ", ".join(f'{s}: {reports[f"null-{s}"]["throughput"] / peer[("grpc", s)]["rps"]:.1f}x' for s in shapes)
    out.append(f"| RPC ingest ≥ 3x grpc-swift-2 at no worse p99 | {'**met**' if ok else '**not met**'} ({ratios}) |")
else:
    out.append("| RPC ingest ≥ 3x grpc-swift-2 at no worse p99 | not measured in this run (peer not built) |")
pending = "not measured: APNs dispatch has not landed" + (" (mock APNs was running)" if mock == "1" else "")
out.append(f"| Dispatch ≥ 80% of h2load | {pending} |")
out.append(f"| Dispatch ≥ 10x the Python APNs client | {pending} |")
out.append(f"| 100k-token fan-out ≥ 50k pushes/s, RSS < 300 MB | {pending} |")
print("\n".join(out))
PY
cat "$TABLES"
if [ "$NO_DOCS" != 1 ]; then
    python3 - "$ROOT/docs/BENCHMARKS.md" "$TABLES" <<'PY'
import sys
path, tables = sys.argv[1], open(sys.argv[2]).read()
doc = open(path).read()
begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
if begin not in doc or end not in doc:
    sys.exit("docs/BENCHMARKS.md has no bench:begin/bench:end markers; not rewritten")
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + "\n" + tables.rstrip() + "\n" + end + tail)
print("bench: rewrote the bench tables in docs/BENCHMARKS.md", file=sys.stderr)
PY
fi
log "raw reports in $WORK/results; finished in $(($(date +%s) - STARTED)) s"
