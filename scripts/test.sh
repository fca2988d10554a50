#!/usr/bin/env bash
# The one command that runs every test on a fresh Debian 12 machine:
# installs what is missing, builds, runs the Swift test suite (unit, contract
# and Python interop tests) and a short bounded run of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

swift build --build-tests
swift test --skip-build

if [ -x scripts/fuzz.sh ]; then
  bash scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-20}"
fi
