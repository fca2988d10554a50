#!/usr/bin/env bash
# The Python client's checks: `mypy --strict` on the package, then its whole test suite
# twice, each time in a fresh virtual environment where the package is installed from
# this directory (`pip install`, a real wheel build): once with the lowest protobuf the
# package allows and once with the newest 7.x, so that the committed generated code is
# known to work at both ends of the declared range.
#
#   clients/python/scripts/test.sh [pytest arguments]
#
# Needs python3 with venv, PyPI, and the built server: LIVERELAY_BINARY, default
# .build/debug/liverelay at the repository root (`swift build`).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
venvs="${LIVERELAY_TEST_VENVS:-$here/.test-venvs}"

# Keep the lowest in step with pyproject.toml's `protobuf>=` bound.
PROTOBUF_LOWEST="protobuf==6.31.1"
PROTOBUF_NEWEST="protobuf>=7,<8"
TOOLS=(pytest==9.2.0)
TYPING=(mypy==1.20.2 types-protobuf==7.35.1.20260906)

make_venv() {
  local name="$1"; shift
  echo "test.sh: preparing $venvs/$name" >&2
  python3 -m venv --clear "$venvs/$name"
  "$venvs/$name/bin/python" -m pip install -q --disable-pip-version-check "$here" "$@"
}

make_venv protobuf-lowest "$PROTOBUF_LOWEST" "${TOOLS[@]}"
make_venv protobuf-newest "$PROTOBUF_NEWEST" "${TOOLS[@]}" "${TYPING[@]}"

echo "test.sh: mypy --strict (src/liverelay)" >&2
(cd "$here" && "$venvs/protobuf-newest/bin/python" -m mypy --strict)

status=0
for name in protobuf-lowest protobuf-newest; do
  version="$("$venvs/$name/bin/python" -c 'import google.protobuf as p; print(p.__version__)')"
  echo "test.sh: pytest with protobuf $version" >&2
  (cd "$here" && "$venvs/$name/bin/python" -m pytest -p no:cacheprovider "$@") || status=1
done
exit "$status"
