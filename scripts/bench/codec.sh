#!/usr/bin/env bash
# Codec microbenchmark: LiveRelayMessages (protobuf-c) vs swift-protobuf 1.39
# on the same request messages, and FrameDecoder / FrameEncoder throughput.
# Builds Benchmarks/ in release (scratch: Benchmarks/.build) and prints markdown tables.
#
#   scripts/bench.sh codec [CodecBenchmark options]     e.g. --batches 9, --verbose, --help
#
# Figures are thread CPU time (use --wall-clock on an idle machine for wall time).
# To profile one measurement: perf record -g Benchmarks/.build/release/CodecBenchmark \
#   --profile 'StartActivityRequest protobuf-c decode' --profile-seconds 5
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build --package-path Benchmarks --scratch-path Benchmarks/.build -c release --product CodecBenchmark >&2
exec Benchmarks/.build/release/CodecBenchmark "$@"
