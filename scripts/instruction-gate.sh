#!/usr/bin/env bash
# The instruction-count regression gate: counts the instructions of each workload of
# liverelay-instructions (Tests/Support/InstructionCounts) under valgrind's callgrind,
# per unit (per call, per decode, per push), and compares them with the committed
# Benchmarks/instruction-baseline.json. Fails (exit 1) when any workload rises more
# than TOLERANCE percent. Instruction counts do not depend on the machine's load, so
# unlike the throughput gate (scripts/bench.sh gate) a small rise is a real one.
#
#   scripts/instruction-gate.sh                   # build (release), count, compare (~10 s after the build)
#   scripts/instruction-gate.sh --write-baseline  # re-record Benchmarks/instruction-baseline.json
#
# Environment:
#   SCRATCH     SwiftPM scratch path of the release build (default .build-release)
#   SKIP_BUILD  1: reuse the last build in SCRATCH
#   TOLERANCE   allowed rise in percent (default: the baseline's, 5)
#   JOBS        workloads counted at once (default 2; counts do not depend on it)
#   BASELINE    the baseline file (default Benchmarks/instruction-baseline.json)
#
# Needs valgrind (scripts/setup.sh installs it). Only the measured loop is counted:
# the workload brackets it with CALLGRIND_START/STOP_INSTRUMENTATION and runs with
# --instr-atstart=no (or, built without valgrind's headers, --toggle-collect on it).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
MODE=compare
case "${1:-}" in
  "") ;;
  --write-baseline) MODE=write ;;
  -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
  *) echo "instruction-gate: unknown argument '$1' (--write-baseline, or nothing)" >&2; exit 2 ;;
esac
SCRATCH=${SCRATCH:-$ROOT/.build-release}
SKIP_BUILD=${SKIP_BUILD:-0}
JOBS=${JOBS:-2}
BASELINE=${BASELINE:-$ROOT/Benchmarks/instruction-baseline.json}
STARTED=$(date +%s)
log() { echo "instruction-gate: $*" >&2; }

command -v valgrind >/dev/null || { log "valgrind is missing (scripts/setup.sh installs it)"; exit 1; }

WORK=$(mktemp -d /tmp/liverelay-instructions.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

if [ "$SKIP_BUILD" != 1 ]; then
  log "building liverelay-instructions (swift build -c release --scratch-path $SCRATCH)"
  swift build -c release --scratch-path "$SCRATCH" --product liverelay-instructions >"$WORK/build.log" 2>&1 || {
    tail -40 "$WORK/build.log" >&2
    exit 1
  }
fi
BUILT="$SCRATCH/release/liverelay-instructions"
STARTED=$(date +%s)  # the count, without the build
[ -x "$BUILT" ] || { log "missing $BUILT (run without SKIP_BUILD=1)"; exit 1; }
# Valgrind 3.19 (Debian 12) cannot read the toolchain's DWARF 5 and gives up: count a copy
# without debug information (the symbol table stays, which is all callgrind needs).
BIN="$WORK/liverelay-instructions"
if command -v llvm-objcopy >/dev/null; then
  llvm-objcopy --strip-debug "$BUILT" "$BIN"
else
  strip --strip-debug -o "$BIN" "$BUILT"
fi

# Bracketed by client requests, or (built without valgrind's headers) by the loop's function.
if "$BIN" decode-ping --iterations 1 | grep -q '^client-requests yes'; then
  COLLECT=(--instr-atstart=no)
else
  log "built without <valgrind/callgrind.h>: counting with --toggle-collect on the measured loop"
  COLLECT=("--toggle-collect=*measuredLoop*")
fi

mapfile -t WORKLOADS < <("$BIN" --list | cut -d' ' -f1)
count() { # workload
  # Deterministic hashing: Swift seeds Hasher per process, which moves dictionary costs between runs.
  SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind "${COLLECT[@]}" \
    --callgrind-out-file="$WORK/$1.callgrind" "$BIN" "$1" >"$WORK/$1.out" 2>"$WORK/$1.valgrind" || {
    log "$1 failed:"
    cat "$WORK/$1.out" >&2
    tail -20 "$WORK/$1.valgrind" >&2
    return 1
  }
}
running=0
failed=0
for w in "${WORKLOADS[@]}"; do
  count "$w" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
[ "$failed" = 0 ] || exit 1

python3 - "$MODE" "$WORK" "$BASELINE" "${TOLERANCE:-}" "$(($(date +%s) - STARTED))" "${WORKLOADS[@]}" <<'PY'
import datetime, json, pathlib, platform, re, sys

mode, work, baseline_path, tolerance_arg, seconds = sys.argv[1:6]
names = sys.argv[6:]
work = pathlib.Path(work)
baseline_path = pathlib.Path(baseline_path)

now = {}
for name in names:
    out = dict(line.split(" ", 1) for line in (work / f"{name}.out").read_text().splitlines() if " " in line)
    text = (work / f"{name}.callgrind").read_text()
    m = re.search(r"^totals:\s+(\d+)", text, re.M)
    if not m:
        sys.exit(f"instruction-gate: no total in {name}'s callgrind output")
    units = int(out["units"])
    now[name] = {"unit": out["unit"], "iterations": int(out["iterations"]), "units": units,
                 "instructions_per_unit": round(int(m.group(1)) / units, 1)}

if mode == "write":
    record = {
        "tolerance_percent": float(tolerance_arg or 5),
        "note": "scripts/instruction-gate.sh --write-baseline, release build, valgrind --tool=callgrind, "
                f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')} on {platform.machine()}. "
                "Instructions (Ir) of the measured loop divided by its units; a rise of more than "
                "tolerance_percent fails the gate.",
        "workloads": now,
    }
    baseline_path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"instruction-gate: wrote {baseline_path}")
    for name, w in now.items():
        print(f"  {name:28} {w['instructions_per_unit']:>12,.1f} per {w['unit']}")
    sys.exit(0)

if not baseline_path.exists():
    sys.exit(f"instruction-gate: no baseline at {baseline_path} (run with --write-baseline)")
baseline = json.loads(baseline_path.read_text())
tolerance = float(tolerance_arg or baseline.get("tolerance_percent", 5))
rows, failures = [], []
for name in names:
    w = now[name]
    b = baseline["workloads"].get(name)
    if b is None:
        rows.append((name, w["unit"], "-", f"{w['instructions_per_unit']:,.1f}", "new (not in the baseline)"))
        continue
    change = (w["instructions_per_unit"] / b["instructions_per_unit"] - 1) * 100
    verdict = ""
    if change > tolerance:
        verdict = f"  FAIL (over +{tolerance:g}%)"
        failures.append(name)
    rows.append((name, w["unit"], f"{b['instructions_per_unit']:,.1f}", f"{w['instructions_per_unit']:,.1f}",
                 f"{change:+.2f}%{verdict}"))
for name in baseline["workloads"]:
    if name not in now:
        failures.append(name)
        rows.append((name, baseline["workloads"][name]["unit"], "-", "missing", "FAIL (workload gone)"))
print("| Workload | Per | Baseline (instructions) | Now | Change |")
print("|---|---|---:|---:|---:|")
for r in rows:
    print("| " + " | ".join(r) + " |")
print(f"instruction-gate: {len(names)} workloads in {seconds} s, tolerance +{tolerance:g}%")
if failures:
    print(f"instruction-gate: FAILED: {', '.join(failures)} rose more than {tolerance:g}% "
          f"(if intended, re-record with scripts/instruction-gate.sh --write-baseline and say why in the commit)",
          file=sys.stderr)
    sys.exit(1)
print("instruction-gate: passed")
PY
