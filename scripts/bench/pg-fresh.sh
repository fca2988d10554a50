#!/usr/bin/env bash
# RegisterToken on a PostgreSQL database that has never been analysed: a new deployment, a
# new app's first hour, a restored database. Starts a throwaway PostgreSQL server
# (scripts/postgres.sh) and `liverelay serve --store postgres` on it, turns autovacuum off for
# the tokens table (so that no ANALYZE comes during the run and every interval is planned
# without statistics), then registers new tokens in rounds of 10,000 (4 connections x 64 in
# flight) from 0 to ROWS, printing each round's rate and the table's sequential and index
# scans. Then ANALYZE, and three more rounds: their median is the steady rate each round is
# held against (goal: none under 80% of it).
#
#   swift build -c release --scratch-path .build-bench --product liverelay
#   scripts/bench.sh pg-fresh .build-bench/release/liverelay
#
# Environment: ROWS (300000), ROUND (10000), CONNECTIONS (4), DEPTH (64).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NAME=pg-fresh
LR=${1:-$ROOT/.build-bench/release/liverelay}
[ -x "$LR" ] || { echo "$NAME: no liverelay binary at $LR (build one, or pass its path)" >&2; exit 2; }
ROWS=${ROWS:-300000}
ROUND=${ROUND:-10000}
CONNECTIONS=${CONNECTIONS:-4}
DEPTH=${DEPTH:-64}
# shellcheck source=scripts/bench/common.sh
source "$ROOT/scripts/bench/common.sh"

eval "$(bash "$ROOT/scripts/postgres.sh" start)"
PG_DIR=$LIVERELAY_POSTGRES_DIR
export LIVERELAY_POSTGRES_URL
trap 'cleanup; bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR" >/dev/null 2>&1 || true' EXIT
psql_run() { psql -X -q -t -A "${LIVERELAY_POSTGRES_URL%%\?*}" -c "$1"; }

timeout --signal=TERM 1800 "$LR" serve --data-dir "$WORK/data" --port 0 --no-ops --log-level warning --store postgres \
    >"$WORK/serve.out" 2>"$WORK/serve.err" &
PIDS+=("$!")
wait_for "$WORK/serve.out" "^listening on "
PORT=$(sed -n 's/^listening on .*:\([0-9]*\).*/\1/p' "$WORK/serve.out" | head -1)
# The development setup's key (common.sh's start made it; this start seeds it into the new registry).
LIVERELAY_API_KEY=$DEV_API_KEY
export LIVERELAY_API_KEY
SCHEMA=$(psql_run "SELECT schemaname FROM pg_stat_user_tables WHERE relname = 'tokens' LIMIT 1")
psql_run "ALTER TABLE \"$SCHEMA\".tokens SET (autovacuum_enabled = false)"
log "serve on port $PORT, schema $SCHEMA; tokens never analysed: $(psql_run "SELECT count(*) = 0 FROM pg_stats WHERE schemaname = '$SCHEMA' AND tablename = 'tokens'")"

scans() { psql_run "SELECT seq_scan || ' ' || coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE schemaname = '$SCHEMA' AND relname = 'tokens'"; }
round() { # label
    local before after rate
    before=$(scans)
    "$LR" bench --port "$PORT" --ca-file "$WORK/data/cert.pem" --name "$1" --warmup 0 --json --quiet \
        --connections "$CONNECTIONS" --depth "$DEPTH" --mix register --requests "$ROUND" >"$WORK/$1.json" 2>"$WORK/$1.err" \
        || { tail -5 "$WORK/$1.err" >&2; return 1; }
    after=$(scans)
    rate=$(python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["throughput"]))' "$WORK/$1.json")
    echo "$1 $rate $before $after" >>"$WORK/rounds.txt"
}
: >"$WORK/rounds.txt"
for i in $(seq 1 $((ROWS / ROUND))); do round "rows-$(((i - 1) * ROUND))"; done
psql_run "ANALYZE \"$SCHEMA\".tokens"
for i in 1 2 3; do round "analysed-$i"; done

python3 - "$WORK/rounds.txt" "$ROUND" "$CONNECTIONS" "$DEPTH" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
size, connections, depth = int(sys.argv[2]), sys.argv[3], sys.argv[4]
steady = statistics.median(int(r[1]) for r in rows if r[0].startswith("analysed"))
print(f"RegisterToken, {connections} x {depth} in flight, rounds of {size:,} new tokens, tokens never analysed; "
      f"steady rate (after ANALYZE, median of 3 rounds): {steady:,.0f}/s")
print()
print("| Tokens before the round | Calls/s | × steady | Sequential scans of tokens | Index scans |")
print("|--:|--:|--:|--:|--:|")
worst = None
for label, rate, seq0, idx0, seq1, idx1 in rows:
    ratio = int(rate) / steady
    if not label.startswith("analysed"):
        worst = ratio if worst is None else min(worst, ratio)
    name = label.replace("rows-", "") if label.startswith("rows-") else label
    print(f"| {int(name):,} | {int(rate):,} | {ratio:.2f} | {int(seq1) - int(seq0):,} | {int(idx1) - int(idx0):,} |"
          if name.isdigit() else f"| {name} | {int(rate):,} | {ratio:.2f} | {int(seq1) - int(seq0):,} | {int(idx1) - int(idx0):,} |")
print()
print(f"slowest round before ANALYZE: {worst:.2f} of the steady rate (goal ≥ 0.80: {'met' if worst >= 0.8 else 'NOT met'})")
PY
