#!/usr/bin/env bash
# How long a `/metrics` scrape takes with many apps: `liverelay serve --config`
# with APPS apps (default 1,000; memory store; one shared APNs key pushing to a
# `liverelay mock-apns` of its own), after `liverelay bench` has sent every app
# tokens, starts and updates (so every per-app series exists: calls by method
# and status, pushes by outcome, queue depth and capacity, quota refusals none).
# Then SCRAPES scrapes, one after another; prints the series count, the body
# size and the scrape time (median, p90, max, client-side wall time on loopback)
# and the server's CPU per scrape.
#
#   LR=.build-release/release/liverelay scripts/bench.sh scrape
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LR=${LR:-$ROOT/.build-release/release/liverelay}
APPS=${APPS:-1000}
SCRAPES=${SCRAPES:-50}
NAME=bench-scrape
# shellcheck source=scripts/bench/common.sh
source "$ROOT/scripts/bench/common.sh"

# An operator key for every app, and the mock and serve configs for APPS apps sharing one key.
export LIVERELAY_API_KEY
LIVERELAY_API_KEY=$(python3 "$ROOT/scripts/bench/operator-key.py" "$WORK/keys.json" bench-scrape)
python3 - "$WORK" "$APPS" <<'PY'
import json, sys
work, apps = sys.argv[1], int(sys.argv[2])
ids = [f"app-{i}" for i in range(1, apps + 1)]
json.dump({"port": 0, "cert_out": f"{work}/mock.pem",
           "apps": [{"bundle_id": i, "team_id": "LRDEVTEAM1", "key_id": "LRDEVKEY01", "key_file": f"{work}/data/apns-dev-key.p8"} for i in ids]},
          open(f"{work}/mock.json", "w"))
PY
timeout 1800 "$LR" mock-apns --config "$WORK/mock.json" --log-level warning >"$WORK/mock.out" 2>&1 &
PIDS+=($!)
wait_for "$WORK/mock.out" "listening on "
MOCK_PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$WORK/mock.out" | head -1)
python3 - "$WORK" "$APPS" "$MOCK_PORT" <<'PY'
import json, sys
work, apps, port = sys.argv[1], int(sys.argv[2]), sys.argv[3]
json.dump({"listen": {"host": "127.0.0.1", "port": 0}, "ops": {"host": "127.0.0.1", "port": 0},
           "tls": {"certificate": f"{work}/data/cert.pem", "private_key": f"{work}/data/key.pem"},
           "api_key_file": f"{work}/keys.json", "store": {"kind": "memory"},
           "admission": {"max_in_flight_per_app": 100000, "max_in_flight": 100000},
           "apps": [{"id": f"app-{i}", "bundle_id": f"app-{i}", "queue_capacity": 1000,
                     "apns": {"team_id": "LRDEVTEAM1", "key_id": "LRDEVKEY01", "key_file": f"{work}/data/apns-dev-key.p8",
                              "endpoint": f"127.0.0.1:{port}", "trust_certificate": f"{work}/mock.pem"}}
                    for i in range(1, apps + 1)]},
          open(f"{work}/serve.json", "w"))
PY
timeout 1800 "$LR" serve --config "$WORK/serve.json" --log-level warning >"$WORK/serve.out" 2>&1 &
SERVE=$!
PIDS+=($SERVE)
wait_for "$WORK/serve.out" "^ops listening on "
PORT=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$WORK/serve.out" | head -1)
OPS=$(sed -n 's/^ops listening on .*:\([0-9]*\).*/\1/p' "$WORK/serve.out" | head -1)
SERVER=$(pgrep -P "$SERVE" | head -1)
log "serve: $APPS apps, port $PORT, ops $OPS; sending every app tokens, starts and updates"
"$LR" bench --port "$PORT" --ca-file "$WORK/data/cert.pem" --apps "$APPS" --app-id app --activities 2 \
    --mix register=1,start=1,update=2 --requests $((APPS * 8)) --warmup 0 --wait-for-delivery >"$WORK/bench.out" 2>&1 ||
    { tail -20 "$WORK/bench.out" >&2; exit 1; }
python3 - "$OPS" "$SCRAPES" "$SERVER" <<'PY'
import os, statistics, sys, time, urllib.request
port, scrapes, pid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def cpu_seconds():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
url = f"http://127.0.0.1:{port}/metrics"
body = urllib.request.urlopen(url).read()
times = []
before = cpu_seconds()
for _ in range(scrapes):
    start = time.perf_counter()
    body = urllib.request.urlopen(url).read()
    times.append((time.perf_counter() - start) * 1000)
cpu = (cpu_seconds() - before) / scrapes * 1000
series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
apps = len({line.split('app="')[1].split('"')[0] for line in body.decode().splitlines() if 'app="' in line})
times.sort()
print(f"{apps} apps in the labels, {series:,} series, {len(body):,} bytes; scrape median {statistics.median(times):.1f} ms, "
      f"p90 {times[int(len(times) * 0.9) - 1]:.1f} ms, max {times[-1]:.1f} ms; server CPU {cpu:.1f} ms per scrape ({scrapes} scrapes)")
PY
