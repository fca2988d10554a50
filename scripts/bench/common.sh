# Sourced by the scripts of scripts/bench/ that start servers of their own: a work directory
# removed on exit with every process listed in PIDS, and the development files
# (certificate, dev.app's .p8 and API key) from one short development start.
# Needs NAME and LR set.
WORK=$(mktemp -d "/tmp/liverelay-$NAME.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "$NAME: $*" >&2; }
wait_for() { # file pattern
    for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    log "timed out waiting for '$2' in $1"; cat "$1" >&2; return 1
}

mkdir -p "$WORK/data"
timeout 60 "$LR" serve --data-dir "$WORK/data" --port 0 --store memory --no-ops >"$WORK/dev.out" 2>&1 &
dev=$!
wait_for "$WORK/dev.out" "^listening on "
kill "$dev"; wait "$dev" 2>/dev/null || true
DEV_API_KEY=$(sed -n 's/^export LIVERELAY_API_KEY=//p' "$WORK/dev.out")
