#!/usr/bin/env bash
# Load on `liverelay mock-apns` (release build) from two independent clients:
# h2load (nghttp2-client) POSTing valid Live Activity pushes with a valid JWT,
# and aioapns (Python). Prints one line per client (docs/BENCHMARKS.md, "The mock APNs"), with the
# mock's own CPU per request (utime+stime from /proc/<pid>/stat over the h2load run,
# divided by its requests), h2load's CPU per request, and the load average around the run
# (the machine is shared: CPU per request is the figure to compare, rates move with load).
#
#   scripts/bench.sh mock-apns [-n REQUESTS] [-c CONNECTIONS] [-m STREAMS_PER_CONNECTION] [--python N]
#                              [--recording-capacity N]
#
# --recording-capacity 0 runs the mock recording nothing (it still counts), as a mock that
# only bounds a benchmark should; without it the mock keeps its default (10000 records).
# BINARY=path/to/liverelay measures that build instead of building one.
#
# Needs what scripts/setup.sh installs (h2load, python3 with aioapns; PyJWT comes with it).
# SCRATCH_PATH (default .build-mock) is the SwiftPM scratch path of the release build.
set -euo pipefail
cd "$(dirname "$0")/../.."

requests=200000
connections=4
streams=100
python_pushes=20000
recording=()
while (($#)); do
  case "$1" in
    -n) requests="$2"; shift 2 ;;
    -c) connections="$2"; shift 2 ;;
    -m) streams="$2"; shift 2 ;;
    --python) python_pushes="$2"; shift 2 ;;
    --recording-capacity) recording=(--recording-capacity "$2"); shift 2 ;;
    *) echo "usage: $0 [-n REQUESTS] [-c CONNECTIONS] [-m STREAMS] [--python N] [--recording-capacity N]" >&2; exit 2 ;;
  esac
done

command -v h2load >/dev/null || { echo "bench: h2load missing (apt-get install nghttp2-client, or scripts/setup.sh)" >&2; exit 1; }
if [ -n "${BINARY:-}" ]; then
  binary="$BINARY"
else
  scratch="${SCRATCH_PATH:-.build-mock}"
  swift build -c release --scratch-path "$scratch" --product liverelay >/dev/null
  binary="$scratch/release/liverelay"
fi

work="$(mktemp -d)"
mock_pid=""
cleanup() {
  if [ -n "$mock_pid" ]; then kill -TERM "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

team=TEAM123456
kid=BENCHKEY01
bundle=com.example.bench
token=$(printf 'ab%.0s' $(seq 32))
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$work/key.p8"
printf '{"aps":{"timestamp":1795392000,"event":"update","content-state":{"eta":5,"driver":"Ann"}}}' >"$work/body.json"

"$binary" mock-apns --port 0 --app "$bundle,$team,$kid,$work/key.p8" --cert-out "$work/ca.pem" \
  --log-level warning "${recording[@]}" >"$work/mock.out" 2>"$work/mock.err" &
mock_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^mock APNs listening on .*:\([0-9]*\)$/\1/p' "$work/mock.out")
  [ -n "$port" ] && [ -s "$work/ca.pem" ] && break
  kill -0 "$mock_pid" 2>/dev/null || { cat "$work/mock.err" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "bench: the mock printed no port" >&2; exit 1; }

jwt=$(python3 -c 'import jwt, sys, time
print(jwt.encode({"iss": sys.argv[1], "iat": int(time.time())}, open(sys.argv[3]).read(), algorithm="ES256", headers={"kid": sys.argv[2]}))' \
  "$team" "$kid" "$work/key.p8")

# utime+stime of a process, in clock ticks (fields 14 and 15 of /proc/<pid>/stat; the
# command name, field 2, is in parentheses and has no ')' for liverelay).
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
ticks_per_second=$(getconf CLK_TCK)

echo "mock APNs (release) on 127.0.0.1:$port; $(nproc) cores; $(h2load --version | head -1); recording ${recording[*]:-default}"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
mock_before=$(cpu_ticks "$mock_pid")
TIMEFORMAT='%U %S'
{ time h2load -n "$requests" -c "$connections" -m "$streams" -d "$work/body.json" \
  -H "authorization: bearer $jwt" -H "apns-topic: $bundle.push-type.liveactivity" \
  -H "apns-push-type: liveactivity" -H "apns-priority: 10" \
  "https://127.0.0.1:$port/3/device/$token" >"$work/h2load.out"; } 2>"$work/h2load.time"
mock_after=$(cpu_ticks "$mock_pid")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
finished=$(grep '^finished in' "$work/h2load.out")
codes=$(grep '^status codes:' "$work/h2load.out")
echo "h2load -n $requests -c $connections -m $streams: $finished; $codes"
mock_us=$(awk -v t="$((mock_after - mock_before))" -v hz="$ticks_per_second" -v n="$requests" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
h2load_us=$(awk -v n="$requests" '{ printf "%.1f", ($1 + $2) * 1e6 / n }' "$work/h2load.time")
echo "CPU per request: mock ${mock_us} µs, h2load ${h2load_us} µs; load average before ${load_before}, after ${load_after}"
grep -q "status codes: $requests 2xx" "$work/h2load.out" || { cat "$work/h2load.out" >&2; echo "bench: not every POST was answered 200" >&2; exit 1; }

if [ "$python_pushes" -gt 0 ]; then
  python3 Tests/APNsPeers/aioapns_peer.py --port "$port" --ca "$work/ca.pem" --key-file "$work/key.p8" \
    --key-id "$kid" --team-id "$team" --bundle-id "$bundle" --token "$token" \
    --bench "$python_pushes" --connections 1 | head -1
fi
