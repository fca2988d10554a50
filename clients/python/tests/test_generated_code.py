"""The committed generated code is what scripts/generate.sh makes from Protos/ now, and the
package exports every message and enum value of it."""

from __future__ import annotations

import filecmp
import subprocess
from pathlib import Path

from google.protobuf.descriptor import FileDescriptor

import liverelay
from liverelay import admin_pb, pb
from liverelay._proto.liverelay.admin.v1 import admin_pb2
from liverelay._proto.liverelay.v1 import activity_pb2, liverelay_pb2

PACKAGE = Path(__file__).resolve().parents[1]


def files_under(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_committed_code_matches_a_fresh_generation(tmp_path: Path) -> None:
    out = tmp_path / "_proto"
    done = subprocess.run(
        ["bash", str(PACKAGE / "scripts" / "generate.sh"), "--out", str(out)],
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    committed = files_under(PACKAGE / "src" / "liverelay" / "_proto")
    fresh = files_under(out)
    assert sorted(committed) == sorted(fresh), "files differ: run clients/python/scripts/generate.sh"
    stale = [name for name in fresh if not filecmp.cmp(committed[name], fresh[name], shallow=False)]
    assert not stale, f"stale generated code {stale}: run clients/python/scripts/generate.sh"


def exported_names(descriptor: FileDescriptor) -> set:
    names = set(descriptor.message_types_by_name)
    for enum in descriptor.enum_types_by_name.values():
        names.add(enum.name)
        names.update(value.name for value in enum.values)
    return names


def test_pb_modules_export_every_message_and_enum() -> None:
    v1 = exported_names(liverelay_pb2.DESCRIPTOR) | exported_names(activity_pb2.DESCRIPTOR)
    assert v1 == set(pb.__all__)
    assert exported_names(admin_pb2.DESCRIPTOR) == set(admin_pb.__all__)
    for name in pb.__all__:
        assert getattr(pb, name) is not None


def test_generated_code_lives_inside_the_package() -> None:
    """protoc's own imports would resolve `liverelay.v1` to this package; generate.sh rewrites them."""
    for path in (PACKAGE / "src" / "liverelay" / "_proto").rglob("*.py*"):
        text = path.read_text()
        assert "from liverelay.v1 import" not in text and "from liverelay.admin.v1 import" not in text, path
    assert pb.StartActivityReply().DESCRIPTOR.file.name == "liverelay/v1/liverelay.proto"
    assert liverelay.pb.Targets.__module__.startswith("liverelay._proto.")
