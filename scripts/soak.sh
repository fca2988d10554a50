#!/usr/bin/env bash
# The APNs fault soak (docs/BENCHMARKS.md, "Fault soak"): builds `liverelay` (release) and runs
# `liverelay soak`, which pushes at least PUSHES pushes through the whole server (RPC, service,
# store, dispatcher, HTTP/2 APNs client) to an in-process mock APNs injecting every fault it knows,
# checks that every call's account adds up, that nothing is left queued, that no push reached the
# mock after its expiry and that the peak RSS stays under its bound, and prints the figures.
# Exits 1 on any violation.
#
#   scripts/soak.sh                      # 1,000,000 pushes, about 5 minutes after the build
#   PUSHES=200000 scripts/soak.sh -- --store sqlite
#
# The short version (20,000 pushes, debug build) runs in the test command, as
# EndToEndTests/FaultSoakTests.
#
# Environment:
#   PUSHES      pushes to target, at least (default 1000000)
#   SKIP_BUILD  1: reuse the last build
#   SCRATCH     SwiftPM scratch path (default .build-release)
#   CONFIG      release (default) or debug
# Arguments after -- go to `liverelay soak` (see `liverelay soak --help`).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ "${1:-}" = "--" ] && shift
PUSHES=${PUSHES:-1000000}
SKIP_BUILD=${SKIP_BUILD:-0}
SCRATCH=${SCRATCH:-$ROOT/.build-release}
CONFIG=${CONFIG:-release}

log() { echo "soak.sh: $*" >&2; }

if [ "$SKIP_BUILD" != 1 ]; then
    log "building liverelay ($CONFIG, $SCRATCH)"
    swift build -c "$CONFIG" --scratch-path "$SCRATCH" --product liverelay >&2
fi
LR="$SCRATCH/$CONFIG/liverelay"
[ -x "$LR" ] || { log "no binary at $LR"; exit 1; }

WORK=$(mktemp -d /tmp/liverelay-soak.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
STARTED=$(date +%s)
log "liverelay soak --pushes $PUSHES $*"
status=0
# A bound on the whole run, far above its usual length, so a hang cannot outlive the caller.
timeout --signal=TERM 3600 "$LR" soak --pushes "$PUSHES" --json "$@" >"$WORK/report.json" || status=$?
ELAPSED=$(($(date +%s) - STARTED))
log "finished in $ELAPSED s (exit $status)"
[ -s "$WORK/report.json" ] || { log "no report"; exit 1; }

python3 - "$WORK/report.json" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$ELAPSED" "$PUSHES" "$*" >"$WORK/section.md" <<'PY'
import json, sys
report, when, elapsed, pushes, extra = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
calls, server = report["calls"], report["server"]
p, mock = calls["pushes"], server["mock"]
def n(v): return f"{v:,}"
command = f"scripts/soak.sh" if pushes == 1000000 and not extra else f"PUSHES={pushes} scripts/soak.sh" + (f" -- {extra}" if extra else "")
out = [f"Run of {when}: `{command}` (release build), {elapsed} s in all, of which {calls['seconds']:.0f} s of load; "
       "2 vCPUs shared with other work.", "",
       f"Profile: {report['description']}.", "",
       "| Pushes | Replies (sum over every call) | Dispatcher's counters |", "|---|--:|--:|"]
for name, key in [("targeted", "enqueued"), ("delivered", "delivered"), ("failed", None), ("pruned", "pruned"),
                  ("superseded", "superseded"), ("expired", "expired"), ("still queued at the end", "unfinished")]:
    reply = p["queued"] if name.startswith("still") else p[name]
    disp = sum(server["failures"].values()) if key is None else server[key]
    out.append(f"| {name} | {n(reply)} | {n(disp)} |")
out.append("")
seconds = max(calls["seconds"], 1e-9)
rows = [
    ("Calls", f"{n(calls['registrations'])} RegisterToken, {n(calls['starts'])} StartActivity, {n(calls['updates'])} UpdateActivity, "
              f"{n(calls['ends'])} EndActivity ({n(calls['lifecycles'])} activity lifecycles); failed: {sum(calls['errors'].values())}; "
              f"replies not final or not adding up: {calls['not_adding_up']}"),
    ("Calls refused by admission (RESOURCE_EXHAUSTED) and sent again after the hint",
     ", ".join(f"{k} {n(v)}" for k, v in sorted(calls["refusals"].items())) or "none"),
    ("Throughput", f"{n(round(p['targeted'] / seconds))} pushes targeted/s, {n(round(p['delivered'] / seconds))} delivered/s"),
    ("Sends to APNs, retries included", f"{n(server['attempts'])} (retries {n(server['retries'])})"),
    ("Circuit-breaker openings", n(server["circuit_openings"])),
    ("App suspensions (mass-pruning guard)", n(server["app_suspensions"])),
    ("APNs answers read, by status", ", ".join(f"{k} {n(v)}" for k, v in sorted(server["apns_answers"].items()))),
    ("Sends without an answer", ", ".join(f"{k} {n(v)}" for k, v in sorted(server["transport_errors"].items())) or "none"),
    ("Mock", f"{n(mock['connections'])} connections, {n(mock['streams'])} streams, {n(mock['go_aways'])} GOAWAYs, "
             f"{n(mock['drops'])} abrupt drops"),
    ("Faults that happened", ", ".join(f"{k} {n(v)}" for k, v in sorted(server["faults"].items()))),
    ("Pushes that reached the mock after their apns-expiration",
     f"{n(mock['received_after_expiration'])}" + (f", the latest {mock['most_milliseconds_past_expiration']} ms after it"
                                                  if mock["received_after_expiration"] else "")
     + f" (allowed: {report['expiry_allowance_milliseconds']} ms)"),
    ("Peak RSS (server, mock and load generator in one process)",
     f"{server['peak_rss_bytes'] / 1048576:.0f} MiB (bound {report['rss_bound_bytes'] / 1048576:.0f} MiB)"),
    ("Verdict", "**pass**" if not report["violations"] else "**FAIL**: " + "; ".join(report["violations"])),
]
out += ["| Figure | Value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
print("\n".join(out))
PY
cat "$WORK/section.md"
if [ "$status" != 0 ]; then
    log "the soak found violations (above)"
    exit "$status"
fi
