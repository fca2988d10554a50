#!/usr/bin/env bash
# The one command that runs every test on a fresh Debian 12 machine:
# installs what is missing, builds, runs the Python and Go client packages'
# suites, the Swift test suite (unit, contract and Python interop tests) and a
# short bounded run of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# A throwaway PostgreSQL server for the PostgreSQL store's tests, stopped on exit
# (unless the caller already points LIVERELAY_POSTGRES_URL at one).
if [ -z "${LIVERELAY_POSTGRES_URL:-}" ]; then
  postgres_env="$(bash scripts/postgres.sh start)"
  eval "$postgres_env"
  trap 'bash scripts/postgres.sh stop "$LIVERELAY_POSTGRES_DIR"' EXIT
fi
export LIVERELAY_POSTGRES_URL

# The module graph follows the path of one call (docs/ARCHITECTURE.md).
python3 scripts/check-modules.py
# The deployment files (Deploy/) are linted and validated, not run: no Docker engine or cluster here.
bash scripts/check-deploy.sh
# The code follows .swift-format (swift-format ships with the toolchain): `swift format -i -r Sources Tests Fuzz/Sources` fixes it.
swift format lint --strict -r --configuration .swift-format Sources Tests Fuzz/Sources

swift build --build-tests
python3 scripts/check-dashboards.py  # Deploy/'s alerts and dashboard name only what a live .build/debug/liverelay exports
# The client packages against real `liverelay serve` processes (.build/debug/liverelay, just built):
# Python (mypy --strict, then its suite with the lowest and the newest protobuf it allows, in venvs of
# its own) and Go (gofmt, go vet, the staleness check of its generated code, its tests; offline).
# Before `swift test`: the Swift suites that run Python (the SIGKILL durability drivers, the TLS
# socket tests' peer) use its venv with the package installed, clients/python/.test-venvs/protobuf-newest
# (LIVERELAY_PYTHON overrides it).
bash clients/python/scripts/test.sh
bash clients/go/scripts/test.sh
# A hung test must fail the run with a clear message, not run into the CI's own limit.
# The end-to-end suites drive child processes with blocking waits, which hold the test
# runner's threads: beside the unit suites they starve time-bounded async tests (the
# registry's change feeds waited 20 s for a poll once). They run after them, apart.
#
# The unit suites take 2 to 4 minutes. Some full runs (3 of about 10 here) stopped instead:
# tests of many suites at once waiting, every thread of the test process idle, no Swift
# concurrency worker thread left (gdb), never at the same test; the cause is not found.
# Such a run is stopped after 20 minutes and run once more, saying so; a test that fails
# fails the run at once, and a second stop fails it too.
unit_suites() {
  timeout --signal=TERM 1200 swift test --skip-build --skip EndToEndTests --skip NGHTTPDInteropTests
}
status=0
unit_suites || status=$?
if [ "$status" -eq 124 ]; then
  echo "test.sh: the unit suites did not finish within 20 minutes (the stall described in scripts/test.sh); running them once more" >&2
  status=0
  unit_suites || status=$?
fi
if [ "$status" -ne 0 ]; then
  [ "$status" -eq 124 ] && echo "test.sh: the unit suites did not finish within 20 minutes twice (a hung test); see the last 'started' lines above" >&2
  exit "$status"
fi
# The APNs client against nghttpd runs apart: one of its tests freezes (SIGSTOP) and kills a
# child nghttpd, and twice a run that had it beside the other suites stopped at that moment
# (the stall above, since seen without it too; alone, under load, it passed every time).
timeout --signal=TERM 600 swift test --skip-build --filter NGHTTPDInteropTests
timeout --signal=TERM 1800 swift test --skip-build --filter EndToEndTests
# The suites that load the whole machine (the SIGKILL tests of durable intents, the short
# fault soak) run after the others, each alone: beside each other the soak's mock, starved,
# reads pushes seconds late and counts them as sent after their expiry.
for suite in IntentDurabilityTests FaultSoakTests; do
  LIVERELAY_HEAVY_E2E=1 timeout --signal=TERM 1800 swift test --skip-build --filter "$suite"
done

if [ -x scripts/fuzz.sh ]; then
  bash scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-20}"
fi

# The instruction-count gate (docs/BENCHMARKS.md, "Instruction-count gate"): callgrind's
# instructions per call, per decode and per push of a release build of liverelay-instructions,
# against Benchmarks/instruction-baseline.json; fails on a rise of more than 5%. Counts do not
# move with the machine's load. The throughput gate (scripts/bench.sh gate, run by .ci/run
# after this script) stays as the second signal.
bash scripts/instruction-gate.sh
