#!/bin/bash
# Measures how long a restarted `liverelay serve` (SQLite) takes to resume and finish
# 1,000 unfinished dispatch intents of 100 tokens each (docs/BENCHMARKS.md, "Durable
# dispatch intents"). A first server, whose APNs endpoint refuses every connection,
# takes UpdateActivity calls over 1,000 activities of 100 update tokens and is SIGKILLed;
# the second start on the same data directory sends to its in-process mock APNs. The
# script polls the intent table until it is empty.
#
#   scripts/bench.sh intent-resume [BINARY]   (default .build-bench/release/liverelay)
set -euo pipefail
B=${1:-.build-bench/release/liverelay}
D=$(mktemp -d /var/tmp/liverelay-resume-XXXXXX)
PORT=${PORT:-7811}
trap 'kill -9 $PID 2>/dev/null || true; rm -rf "$D"' EXIT
"$B" serve --data-dir "$D" --port "$PORT" --log-level warning --apns-endpoint 127.0.0.1:1 > "$D/out1.txt" 2>&1 &
PID=$!
for _ in $(seq 1 150); do grep -q "listening on" "$D/out1.txt" && break; sleep 0.2; done
KEY=$(grep -o 'lrk_[A-Za-z0-9_]*' "$D/out1.txt" | head -1)
"$B" bench run --port "$PORT" --ca-file "$D/cert.pem" --api-key "$KEY" --connections 4 --depth 16 --mix update \
    --activities 1000 --tokens-per-activity 100 --requests 6000 --warmup 0 --quiet 2>&1 | grep -E "^setup" || true
kill -9 $PID; wait $PID 2>/dev/null || true
python3 - "$D/liverelay.sqlite3" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("after the SIGKILL: %d unfinished intents, %d tokens" % (
    c.execute("SELECT count(*) FROM dispatch_intents").fetchone()[0], c.execute("SELECT count(*) FROM tokens").fetchone()[0]))
PY
START=$(date +%s.%N)
"$B" serve --data-dir "$D" --port "$PORT" --log-level info > "$D/out2.txt" 2>&1 &
PID=$!
python3 - "$D/liverelay.sqlite3" "$START" <<'PY'
import sqlite3, sys, time
path, start = sys.argv[1], float(sys.argv[2])
c = sqlite3.connect(path, timeout=10)
while True:
    left = c.execute("SELECT count(*) FROM dispatch_intents").fetchone()[0]
    if left == 0:
        break
    if time.time() - start > 300:
        sys.exit("still %d intents after 300 s" % left)
    time.sleep(0.05)
print("every intent resumed and settled %.2f s after the restart began" % (time.time() - start))
PY
echo "pushes the mock answered 200: $(grep -c '"status":200' "$D/mock-apns.jsonl")"
kill -TERM $PID; wait $PID 2>/dev/null || true
