"""The examples of this package's README.md and the repository's README.md run, as written, against a real server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

from conftest import Dev

README = Path(__file__).resolve().parents[1] / "README.md"
REPOSITORY_README = Path(__file__).resolve().parents[3] / "README.md"


def python_blocks(readme: Path = README) -> List[str]:
    return re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)


def run_example(dev: Dev, code: str) -> str:
    env = dict(os.environ, LIVERELAY_HOST="127.0.0.1", LIVERELAY_PORT=str(dev.server.port),
               LIVERELAY_API_KEY=dev.api_key, LIVERELAY_CA_FILE=dev.server.cert)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_readme_has_its_three_examples() -> None:
    assert len(python_blocks()) == 3


def test_sync_example(dev: Dev) -> None:
    out = run_example(dev, python_blocks()[0]).splitlines()
    assert out[0] == "ping: b'hello'"
    assert re.fullmatch(r"started: order-[0-9a-f]{8} delivered: 1", out[1])
    assert out[2:] == ["state: ACTIVITY_STATE_ENDED", "refused: FAILED_PRECONDITION ActivityEnded"]


def test_async_example(dev: Dev) -> None:
    assert run_example(dev, python_blocks()[1]).splitlines() == ["pipelined pings: 100"]


def test_event_feed_example(dev: Dev) -> None:
    assert run_example(dev, python_blocks()[2]).splitlines() == [
        "settled: delivered 1 of 1", "ended: ACTIVITY_STATE_ENDED",
    ]


def test_repository_readme_example(dev: Dev) -> None:
    blocks = python_blocks(REPOSITORY_README)
    assert len(blocks) == 1
    assert run_example(dev, blocks[0]).splitlines() == ["delivered: 1"]
