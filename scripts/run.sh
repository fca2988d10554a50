#!/usr/bin/env bash
# Brings the LiveRelay server up on a fresh Debian 12 machine: installs what
# building and serving need if missing (scripts/setup.sh --serve: Debian
# packages only, nothing the tests need, nothing from PyPI), builds `liverelay`
# in release mode, and runs `liverelay serve` with the arguments given (none:
# the development setup in ./.liverelay-dev, listening on 127.0.0.1:7443).
#
# Build output goes to stderr so that stdout carries only what the server
# prints (the one-time API key, the "listening on" line). `exec` hands the
# process over, so SIGTERM/SIGINT reach the server and shut it down gracefully.
# LIVERELAY_BUILD_PATH picks another scratch path (default .build).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --serve >&2
scratch=(--scratch-path "${LIVERELAY_BUILD_PATH:-.build}")
swift build -c release --product liverelay "${scratch[@]}" >&2
bin="$(swift build -c release "${scratch[@]}" --show-bin-path)"
exec "$bin/liverelay" serve "$@"
