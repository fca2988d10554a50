#!/usr/bin/env bash
# Installs what LiveRelay needs on a fresh Debian 12 machine (idempotent).
# Needs root for apt-get; skips what is already present.
set -euo pipefail

debian_packages=(libprotobuf-c-dev libssl-dev protobuf-compiler libsqlite3-dev pkg-config openssl)

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

command -v swift >/dev/null || { echo "setup: swift is not on PATH (Swift 6.x expected at /opt/swift)" >&2; exit 1; }
