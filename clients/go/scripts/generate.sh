#!/usr/bin/env bash
# Generates the Go code of the contract (Protos/liverelay/**/*.proto) into
# liverelaypb/ and adminpb/ with protoc and protoc-gen-go.
#
#   scripts/generate.sh            rewrites the committed files
#   scripts/generate.sh OUT_DIR    writes them under OUT_DIR instead (the
#                                  staleness check compares that with the
#                                  committed files)
#
# The .proto files carry no go_package option (they are shared with the
# Swift, C and Python bindings), so the Go import paths are given here with
# protoc-gen-go's M options.
#
# protoc-gen-go's version is part of the generated code (its header, and the
# runtime version the code asserts), so it is pinned: the version below is the
# one google.golang.org/protobuf in go.mod must match. Debian 12 packages it as
# protoc-gen-go; elsewhere: go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.28.1
set -euo pipefail

expected_plugin="protoc-gen-go v1.28.1"
module="github.com/liverelay/liverelay/clients/go"

# Physical paths: the tests may run this through a GOPATH symlink.
client_dir="$(cd -P "$(dirname "$0")/.." && pwd)"
protos="${LIVERELAY_PROTOS:-$(cd -P "$client_dir/../.." && pwd)/Protos}"
out="${1:-$client_dir}"

command -v protoc >/dev/null || { echo "generate.sh: protoc is not on PATH (Debian: protobuf-compiler)" >&2; exit 1; }
plugin="${PROTOC_GEN_GO:-$(command -v protoc-gen-go || true)}"
[ -n "$plugin" ] || { echo "generate.sh: protoc-gen-go is not on PATH (Debian: protoc-gen-go)" >&2; exit 1; }
found_plugin="$("$plugin" --version 2>&1 || true)"
if [ "$found_plugin" != "$expected_plugin" ]; then
  echo "generate.sh: $plugin is '$found_plugin', the committed code was made with '$expected_plugin'" >&2
  exit 1
fi
[ -d "$protos/liverelay" ] || { echo "generate.sh: no contract at $protos/liverelay" >&2; exit 1; }
mkdir -p "$out"

v1="$module/liverelaypb;liverelaypb"
admin="$module/adminpb;adminpb"
protoc \
  --proto_path="$protos" \
  --plugin=protoc-gen-go="$plugin" \
  --go_out="$out" \
  --go_opt=module="$module" \
  --go_opt=Mliverelay/v1/liverelay.proto="$v1" \
  --go_opt=Mliverelay/v1/activity.proto="$v1" \
  --go_opt=Mliverelay/admin/v1/admin.proto="$admin" \
  liverelay/v1/liverelay.proto \
  liverelay/v1/activity.proto \
  liverelay/admin/v1/admin.proto
