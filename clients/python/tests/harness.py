"""Real `liverelay serve` processes for the tests, and small helpers.

Each server runs from the built binary (LIVERELAY_BINARY, default
<repo>/.build/debug/liverelay) on 127.0.0.1 with `--port 0` (the port is the
one its `listening on` line names, so no port is picked here and lost to a
race) and a fresh temporary data directory, and is always killed: by its
fixture, and by an atexit hook for anything left over.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, List, Sequence, TypeVar

import liverelay

REPO = Path(__file__).resolve().parents[3]
T = TypeVar("T")

_LIVE: List["Process"] = []


def binary() -> str:
    path = os.environ.get("LIVERELAY_BINARY") or str(REPO / ".build" / "debug" / "liverelay")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no liverelay binary at {path}: build it (swift build) or set LIVERELAY_BINARY")
    return path


class Process:
    """A child process whose merged stdout and stderr are collected line by line."""

    def __init__(self, args: Sequence[str], name: str) -> None:
        self.args = list(args)
        self.name = name
        self.lines: List[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            bufsize=1,
            start_new_session=True,
        )
        _LIVE.append(self)
        self._reader = threading.Thread(target=self._read, name=f"{name} output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float = 60.0, start: int = 0) -> re.Match[str]:
        """The first line from index `start` on that matches the regular expression, waiting
        (bounded) for the process to print it; raises if it exits or time runs out."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        index = start
        with self._cond:
            while True:
                while index < len(self.lines):
                    match = regex.search(self.lines[index])
                    index += 1
                    if match:
                        return match
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) without printing {pattern!r}:\n"
                                       + self.transcript())
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.name} printed no {pattern!r} within {timeout} s:\n" + self.transcript())
                self._cond.wait(remaining)

    def mark(self) -> int:
        with self._cond:
            return len(self.lines)

    def transcript(self, last: int = 80) -> str:
        with self._cond:
            return "\n".join(self.lines[-last:])

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running:
            os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited in time; always reaped."""
        if self.running:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc.wait()
        self._reader.join(5)
        if self in _LIVE:
            _LIVE.remove(self)

    def kill(self) -> None:
        if self.running:
            self.proc.kill()
        self.proc.wait()


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_LIVE):
        process.kill()


class Server(Process):
    """`liverelay serve` in the development setup, in its own data directory."""

    def __init__(self, data_dir: str, port: int = 0, extra: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        super().__init__(
            [binary(), "serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", data_dir,
             "--log-level", "debug", *extra],
            name=f"liverelay serve ({data_dir})",
        )
        match = self.wait_for(r"^listening on 127\.0\.0\.1:(\d+)", timeout=120)
        self.port = int(match.group(1))

    def first_start_api_key(self) -> str:
        return self.wait_for(r"^export LIVERELAY_API_KEY=(\S+)", timeout=5).group(1)

    @property
    def cert(self) -> str:
        return os.path.join(self.data_dir, "cert.pem")

    def tls(self) -> liverelay.TLSConfig:
        return liverelay.TLSConfig(ca_file=self.cert)

    def client(self, api_key: str, **options: Any) -> liverelay.Client:
        return liverelay.Client("127.0.0.1", self.port, api_key=api_key, tls=self.tls(), **options)

    def async_client(self, api_key: str, **options: Any) -> liverelay.AsyncClient:
        return liverelay.AsyncClient("127.0.0.1", self.port, api_key=api_key, tls=self.tls(), **options)


def new_data_dir(prefix: str = "liverelay-py-") -> str:
    return tempfile.mkdtemp(prefix=prefix)  # 0700, as serve wants it


def bootstrap_admin_key(data_dir: str) -> str:
    """`liverelay admin bootstrap` straight into the registry of `data_dir`."""
    done = subprocess.run(
        [binary(), "admin", "bootstrap", "--data-dir", data_dir],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise RuntimeError(f"admin bootstrap failed: {done.stdout}{done.stderr}")
    match = re.search(r"^export LIVERELAY_ADMIN_KEY=(\S+)", done.stdout, re.M)
    if not match:
        raise RuntimeError(f"admin bootstrap printed no key: {done.stdout}")
    return match.group(1)


class MockAPNs(Process):
    """`liverelay mock-apns` with a fixed latency, for calls that must stay in flight."""

    def __init__(self, directory: str, apps: Sequence[str], latency_ms: int) -> None:
        self.cert = os.path.join(directory, "mock-apns.pem")
        args = [binary(), "mock-apns", "--host", "127.0.0.1", "--port", "0", "--cert-out", self.cert,
                "--latency-ms", str(latency_ms)]
        for app in apps:
            args += ["--app", app]
        super().__init__(args, name="liverelay mock-apns")
        self.port = int(self.wait_for(r"listening on \S*?:(\d+)", timeout=60).group(1))
        self.wait_for(r"^certificate \(self-signed", timeout=60)  # written after the listening line


def remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def token() -> str:
    """An APNs device token: 64 lowercase hex digits."""
    return secrets.token_hex(32)


def uid(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(6)}"


def run(coroutine: Awaitable[T], timeout: float = 120.0) -> T:
    """Runs an async test body on a fresh loop, bounded so a hang fails instead of blocking."""

    async def bounded() -> T:
        return await asyncio.wait_for(coroutine, timeout)

    return asyncio.run(bounded())


async def eventually(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    """Waits until `predicate()` holds, for state that changes with no event a test can await
    (a server's registry reload, a reply the client drops); bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout} s: {what or predicate}")
        await asyncio.sleep(0.02)


def eventually_sync(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout} s: {what or predicate}")
        time.sleep(0.02)


def key_accepted(server: Server, api_key: str, probe: Callable[[liverelay.Client], object], timeout: float = 20.0) -> None:
    """Waits until the server accepts a key that the admin API just made: the registry
    reaches a running node through a poll (README, "The tenant registry"). Each try is a
    new client, since a refused key stops a client for good."""
    deadline = time.monotonic() + timeout
    while True:
        with server.client(api_key, retry=liverelay.RetryPolicy(max_attempts=1)) as client:
            try:
                probe(client)
                return
            except (liverelay.UnauthenticatedError, liverelay.NotFoundError):
                if time.monotonic() > deadline:
                    raise
        time.sleep(0.05)


E = TypeVar("E", bound=BaseException)


def raised_eventually(error_type: "type[E]", call: Callable[[], object], timeout: float = 20.0) -> E:
    """Repeats `call` until it raises `error_type` (a change the server applies on its next
    registry poll), bounded by `timeout`; returns the error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            call()
        except error_type as error:
            return error
        if time.monotonic() > deadline:
            raise AssertionError(f"{call} did not raise {error_type.__name__} within {timeout} s")
        time.sleep(0.05)


def queued(activity: str) -> str:
    """The pattern of the server's debug line saying that the call for `activity` was stored
    and its pushes queued (the dispatcher's `pushes queued`, with the activity in its metadata)."""
    return r"(?=.*\bpushes queued\b)(?=.*\bactivity=" + re.escape(activity) + r"(\s|$))"
