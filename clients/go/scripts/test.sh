#!/usr/bin/env bash
# Checks and tests the Go client offline: gofmt, go vet, the staleness check
# of the generated code, the codec and scripted-server unit tests, and the
# tests against a real `liverelay serve` (the debug build at the repository
# root, or LIVERELAY_BINARY).
#
# No module proxy is needed: the build runs in GOPATH mode, with
# google.golang.org/protobuf from Debian's golang-google-protobuf-dev
# (/usr/share/gocode/src, or GO_PROTOBUF_SRC). go.mod, which users' builds
# read, must require the same version; that is checked first.
#
# Needs: go (1.19 or newer), protoc, protoc-gen-go v1.28.1; on Debian 12:
#   apt-get install golang-go golang-google-protobuf-dev protoc-gen-go protobuf-compiler
set -euo pipefail

client_dir="$(cd -P "$(dirname "$0")/.." && pwd)"
repo="$(cd -P "$client_dir/../.." && pwd)"
protobuf_src="${GO_PROTOBUF_SRC:-/usr/share/gocode/src/google.golang.org/protobuf}"
export LIVERELAY_BINARY="${LIVERELAY_BINARY:-$repo/.build/debug/liverelay}"

command -v go >/dev/null || { echo "clients/go/scripts/test.sh: go is not on PATH (Debian: golang-go)" >&2; exit 1; }
[ -f "$protobuf_src/go.mod" ] || { echo "clients/go/scripts/test.sh: no google.golang.org/protobuf at $protobuf_src (Debian: golang-google-protobuf-dev)" >&2; exit 1; }
[ -x "$LIVERELAY_BINARY" ] || { echo "clients/go/scripts/test.sh: no server binary at $LIVERELAY_BINARY (swift build, or set LIVERELAY_BINARY)" >&2; exit 1; }

# The protobuf runtime the tests build with is the version go.mod pins.
version_file="$protobuf_src/internal/version/version.go"
local_version="v$(sed -n 's/^\tMajor *= *\([0-9]*\)$/\1/p' "$version_file").$(sed -n 's/^\tMinor *= *\([0-9]*\)$/\1/p' "$version_file").$(sed -n 's/^\tPatch *= *\([0-9]*\)$/\1/p' "$version_file")"
required="$(cd "$client_dir" && GOFLAGS= GO111MODULE=on GOPROXY=off go mod edit -json | sed -n '/"Path": "google.golang.org\/protobuf"/{n;s/.*"Version": "\(.*\)".*/\1/p}')"
if [ "$required" != "$local_version" ]; then
  echo "clients/go/scripts/test.sh: go.mod requires google.golang.org/protobuf $required, $protobuf_src is $local_version" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/github.com/liverelay"
ln -s "$repo" "$work/src/github.com/liverelay/liverelay"
export GO111MODULE=off GOPATH="$work:${protobuf_src%/src/google.golang.org/protobuf}" GOFLAGS= GOPROXY=off GOTOOLCHAIN=local
cd "$work/src/github.com/liverelay/liverelay/clients/go"

unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "clients/go/scripts/test.sh: not gofmt-formatted (run gofmt -w clients/go):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# The race detector needs cgo and a C compiler; without them the tests run plain.
race=()
if [ "$(go env CGO_ENABLED)" = 1 ] && command -v "$(go env CC)" >/dev/null 2>&1; then
  race=(-race)
fi
LIVERELAY_REQUIRE_GENERATE=1 go test "${race[@]}" -count=1 -timeout 20m ./...
