#!/usr/bin/env bash
# Installs what LiveRelay needs on a fresh Debian 12 machine (idempotent).
# Needs root for apt-get; skips what is already present.
set -euo pipefail

# nghttp2-client: h2load, the independent HTTP/2 load generator of the mock APNs tests and benchmark.
# procps: pgrep, with which the benchmark scripts find a server's pid for its CPU and memory.
debian_packages=(libprotobuf-c-dev libssl-dev protobuf-compiler libsqlite3-dev pkg-config openssl postgresql nghttp2-client procps)

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

command -v swift >/dev/null || { echo "setup: swift is not on PATH (Swift 6.x expected at /opt/swift)" >&2; exit 1; }
