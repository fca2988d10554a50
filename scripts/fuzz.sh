#!/usr/bin/env bash
# Builds LiveRelay's libFuzzer targets (Fuzz/) once and runs each for a bounded time.
#
#   scripts/fuzz.sh --seconds N [target...]   run each target (default: all) for N seconds
#   scripts/fuzz.sh --make-seeds              regenerate Fuzz/Seeds/ (Swift-built messages
#                                             and frame streams, plus the interop vectors
#                                             encoded by Google's Python protobuf)
#
# Each run starts from a fresh copy of Fuzz/Seeds/<target>/ in Fuzz/.build/fuzz/corpus/<target>
# (scratch, not committed). Exits non-zero if any target crashed, timed out (-timeout=5),
# ran out of memory (-rss_limit_mb=2048) or leaked, and prints the input that did it;
# replay one with `Fuzz/.build/release/<target> <input>`. Prints executions per target.
# FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS="-dict=... -max_len=8192").
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(FuzzFrameDecoder FuzzRegisterTokenRequest FuzzStartActivityRequest
  FuzzUpdateActivityRequest FuzzEndActivityRequest FuzzPingRequest FuzzAdminRequest FuzzChannelRequest
  FuzzHTTP2Session)
seconds=20
make_seeds=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    --seconds=*) seconds="${1#--seconds=}"; shift ;;
    --make-seeds) make_seeds=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target $t (known: ${all_targets[*]})" >&2; exit 2; }
done
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --seconds must be a whole number" >&2; exit 2; }

scratch=Fuzz/.build
work="$scratch/fuzz"
flags=(-Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library)

# One build for all targets. Optimized (-O keeps ASan and the coverage
# instrumentation, and runs several times faster); debug only as a fallback.
config=release
echo "fuzz.sh: building the fuzz targets ($config, -sanitize=fuzzer,address)"
if ! swift build --package-path Fuzz --scratch-path "$scratch" -c release "${flags[@]}" 2>&1 | grep -v "Cannot export local symbol '__asan_extra_spill_area'"; then
  config=debug
  echo "fuzz.sh: the release build failed; building debug"
  swift build --package-path Fuzz --scratch-path "$scratch" -c debug "${flags[@]}"
fi
# (grep's status hides swift build's: check the binaries exist.)
bin="$scratch/$config"
for t in "${targets[@]}"; do
  [ -x "$bin/$t" ] || { echo "fuzz.sh: $bin/$t was not built" >&2; exit 1; }
done

if ((make_seeds)); then
  generated="$work/seeds-swift"
  rm -rf "$generated"
  for t in "${all_targets[@]}"; do
    LIVERELAY_FUZZ_WRITE_SEEDS="$generated" "$bin/$t"
  done
  python_out="$work/python"
  rm -rf "$python_out" && mkdir -p "$python_out"
  protoc --python_out="$python_out" -I Protos liverelay/v1/liverelay.proto liverelay/v1/activity.proto \
    liverelay/admin/v1/admin.proto
  python3 Tests/Interop/interop.py encode "$python_out" Tests/LiveRelayMessagesTests/Vectors > "$work/interop.json"
  python3 - "$generated" "$work/interop.json" Fuzz/Seeds <<'PY'
import json, os, shutil, sys
generated, interop, seeds = sys.argv[1:]
limit = 16 * 1024  # small files only; the large interop cases stay in the Swift tests
targets = {"liverelay.v1." + n: "Fuzz" + n for n in
           ("RegisterTokenRequest", "StartActivityRequest", "UpdateActivityRequest",
            "EndActivityRequest", "PingRequest")}
# FuzzAdminRequest: byte 0 picks the request type, in the order of AdminMethod.allCases.
admin_requests = ("CreateApp", "UpdateApp", "GetApp", "ListApps", "DisableApp", "PutAPNsCredentials",
                  "CreateAPIKey", "ListAPIKeys", "RevokeAPIKey", "GetAppStats")
selectors = {f"liverelay.admin.v1.{n}Request": bytes([i]) for i, n in enumerate(admin_requests)}
targets.update({t: "FuzzAdminRequest" for t in selectors})
# FuzzChannelRequest: byte 0 picks the request type (CreateChannel, ListChannels, DeleteChannel).
channel_selectors = {f"liverelay.v1.{n}Request": bytes([i]) for i, n in
                     enumerate(("CreateChannel", "ListChannels", "DeleteChannel"))}
targets.update({t: "FuzzChannelRequest" for t in channel_selectors})
selectors.update(channel_selectors)
for target in sorted(os.listdir(generated)):
    out = os.path.join(seeds, target)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(os.path.join(generated, target), out)
vectors = json.load(open(interop))
skipped = []
for kind in ("valid", "invalid"):
    for case in vectors[kind]:
        target = targets.get(case["type"])
        if target is None:
            continue
        data = selectors.get(case["type"], b"") + bytes.fromhex(case["hex"])
        if len(data) > limit:
            skipped.append(case["name"])
            continue
        prefix = "interop-" if kind == "valid" else "interop-invalid-"
        with open(os.path.join(seeds, target, prefix + case["name"]), "wb") as f:
            f.write(data)
for target in sorted(os.listdir(seeds)):
    files = os.listdir(os.path.join(seeds, target))
    size = sum(os.path.getsize(os.path.join(seeds, target, f)) for f in files)
    print(f"fuzz.sh: Fuzz/Seeds/{target}: {len(files)} seeds, {size} bytes")
if skipped:
    print(f"fuzz.sh: skipped (over {limit} bytes): {', '.join(skipped)}")
PY
  exit 0
fi

failed=()
summary=()
mkdir -p "$work"
for t in "${targets[@]}"; do
  corpus="$work/corpus/$t"
  artifacts="$work/artifacts/$t"
  log="$work/logs/$t.log"
  rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  if [ -d "Fuzz/Seeds/$t" ]; then cp -R "Fuzz/Seeds/$t/." "$corpus/"; fi
  echo "fuzz.sh: $t for ${seconds}s ($(ls "$corpus" | wc -l) seeds)"
  status=0
  "$bin/$t" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" ${FUZZ_ARGS:-} "$corpus" > "$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
  [ -n "$runs" ] || runs="?"
  crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
  if ((status != 0)) || [ -n "$crash" ]; then
    failed+=("$t")
    summary+=("$(printf '%-28s %12s runs  FAILED (exit %s)' "$t" "$runs" "$status")")
    echo "fuzz.sh: $t FAILED (exit $status); log: $log"
    echo "----- last lines of the log -----"
    tail -n 60 "$log"
    echo "---------------------------------"
    if [ -n "$crash" ]; then
      echo "fuzz.sh: crash input: $crash"
      echo "fuzz.sh: replay with: $bin/$t $crash"
    fi
  else
    summary+=("$(printf '%-28s %12s runs  ok' "$t" "$runs")")
  fi
done

echo
echo "fuzz.sh: executions in ${seconds}s per target ($config build):"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crashes"
