#!/usr/bin/env python3
"""The load and the check of the SIGKILL-mid-fan-out test (Tests/EndToEndTests/IntentDurabilityTests.swift).

Two phases, each a run of this script against a real `liverelay serve` whose pushes go to a
`liverelay mock-apns` that appends every push it receives to a JSON-lines record file. The load
talks to the server through the `liverelay` package (installed in the Python that runs it;
clients/python/scripts/test.sh makes one):

  intent_durability.py load --port P --api-key K --ca cert.pem --state STATE.json --record FILE
                            --kill-pid PID [--tokens 20000] [--updates 2] [--kill-after 3000]
      Registers --tokens update tokens for one activity (pipelined on a few connections, every
      call must be acknowledged), then sends --updates UpdateActivity calls back to back (fire
      and forget: no wait_for_delivery) and records each acknowledged one with its aps
      timestamp. It then reads the record as it grows and, once at least --kill-after tokens
      (but not all) have received the last acknowledged update, sends SIGKILL to --kill-pid (the
      server) and writes STATE.json.

  intent_durability.py verify --state STATE.json --record FILE --timeout T [--restarted-at MS]
      Reads the record until every token has received the last acknowledged update (an aps
      timestamp at least the last acknowledged one), or T seconds passed, and reports the
      counts: tokens covered and missing, pushes before and after the kill, duplicates (a
      token receiving the latest update more than once), the time from the kill to the first
      resumed push (failover) and to the last token covered.

A push counts as received when the mock recorded it with status 200 (the mock records a
request once it is complete, before its answer). Pushes after the kill are told from pushes
before it by their HTTP/2 connection: a connection first seen after the kill belongs to the
node that resumed the work. Both phases print one last line `RESULT {json}`; the exit code is 0
when the phase's own checks passed. The clients never resend a call (RetryPolicy(max_attempts=1)),
and every call and every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import sys
import time
from typing import Any, Awaitable, Callable, List, Optional, Tuple

import liverelay
from liverelay import pb

Call = Callable[[liverelay.AsyncClient], Awaitable[Any]]
Result = Optional[Tuple[bool, Any]]


def token_of(run: str, i: int) -> str:
    return hashlib.sha256(f"{run}/token/{i}".encode()).hexdigest()  # 64 lowercase hex


def activity_of(run: str) -> str:
    return f"intent-{run}"


def now_ms() -> int:
    return int(time.time() * 1000)


def connect(args: argparse.Namespace) -> liverelay.AsyncClient:
    return liverelay.AsyncClient(
        args.host, args.port, api_key=args.api_key, tls=liverelay.TLSConfig(ca_file=args.ca),
        client_name="intent-durability", connections=1, default_timeout=args.timeout,
        connect_timeout=args.timeout, retry=liverelay.RetryPolicy(max_attempts=1),
    )


# ====================================================================== the mock's record

class Record:
    """The record file, read incrementally: per token, the aps timestamps it received and on which connections."""

    def __init__(self, path: str, tokens: set):
        self.path = path
        self.tokens = tokens
        self.offset = 0
        self.rest = b""
        self.lines = 0
        self.unparsed = 0
        self.other_paths = 0
        self.not_ok = {}  # status -> count (0: the connection died before the answer)
        self.pushes = 0  # status 200 to one of our tokens
        # token -> [(timestamp, connection, received_ms)], status 200 only
        self.received = {}

    def poll(self) -> int:
        """Reads what was appended since the last poll; returns the number of new lines."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return 0
        self.offset += len(chunk)
        data = self.rest + chunk
        lines = data.split(b"\n")
        self.rest = lines.pop()  # an incomplete last line waits for the next poll
        for line in lines:
            if line:
                self.add(line)
        return len(lines)

    def add(self, line: bytes):
        self.lines += 1
        try:
            r = json.loads(line)
            path = r.get("path", "")
            if not path.startswith("/3/device/"):
                self.other_paths += 1
                return
            token = path[len("/3/device/"):]
            status = r.get("status", 0)
            if status != 200:
                self.not_ok[status] = self.not_ok.get(status, 0) + 1
                return
            timestamp = json.loads(r["body"])["aps"]["timestamp"]
            entry = (int(timestamp), int(r.get("connection", 0)), int(r.get("received_ms", 0)))
        except (ValueError, KeyError, TypeError):
            self.unparsed += 1
            return
        if token not in self.tokens:
            self.other_paths += 1
            return
        self.pushes += 1
        self.received.setdefault(token, []).append(entry)

    def covered(self, at_least: int) -> int:
        """Tokens that received an aps timestamp >= at_least."""
        return sum(1 for entries in self.received.values() if any(e[0] >= at_least for e in entries))


# ====================================================================== load, then SIGKILL

async def pipelined_async(args: argparse.Namespace, calls: List[Call], connections: int) -> Tuple[List[Result], List[int], List[str]]:
    results: List[Result] = [None] * len(calls)
    answered = [0] * len(calls)  # when each reply arrived, UNIX ms
    failures: List[str] = []

    async def one(client: liverelay.AsyncClient, window: asyncio.Semaphore, i: int) -> None:
        async with window:
            try:
                results[i] = (True, await calls[i](client))
            except liverelay.RpcError as error:
                results[i] = (False, (int(error.status), error.message))
            answered[i] = now_ms()

    async def worker(conn: int, indexes: List[int]) -> None:
        window = asyncio.Semaphore(args.depth)
        try:
            async with connect(args) as client:
                await asyncio.gather(*(one(client, window, i) for i in indexes))
        except Exception as error:
            failures.append(f"connection {conn}: {type(error).__name__}: {error}")

    workers = [asyncio.ensure_future(worker(conn, list(range(conn, len(calls), connections))))
               for conn in range(connections)]
    _, unfinished = await asyncio.wait(workers, timeout=args.timeout * 10 + len(calls) / 100)
    if unfinished:
        failures.append("a connection's calls did not finish in time")
        for w in unfinished:
            w.cancel()
        await asyncio.wait(unfinished, timeout=args.timeout)
    return results, answered, failures


def pipelined(args: argparse.Namespace, calls: List[Call], connections: int) -> Tuple[List[Result], List[int], List[str]]:
    """Runs the calls on `connections` clients of one connection each, each keeping --depth in flight.
    Returns the results by index ((True, reply) or (False, (status, message)), or None when unanswered),
    when each reply arrived (UNIX ms) and the connections' failures."""
    return asyncio.run(pipelined_async(args, calls, connections))


def register_call(args: argparse.Namespace, token: str, activity: str, device: str) -> Call:
    return lambda client: client.register_token(
        app_id=args.app_id, kind=pb.TOKEN_KIND_UPDATE, token=token, environment=pb.ENVIRONMENT_SANDBOX,
        activity_id=activity, device_id=device)


def update_call(args: argparse.Namespace, activity: str, content_state: str) -> Call:
    return lambda client: client.update_activity(app_id=args.app_id, activity_id=activity,
                                                 content_state_json=content_state)


def load(args: argparse.Namespace) -> dict:
    run, activity = args.run, activity_of(args.run)
    tokens = [token_of(run, i) for i in range(args.tokens)]
    summary: dict = {"phase": "load", "run": run, "activity": activity, "tokens": len(tokens), "killed": False}

    # 1. The activity's update tokens (registering them makes the activity exist, as a device reporting its token does).
    started = time.monotonic()
    calls = [register_call(args, t, activity, f"intent-{run}-dev-{i}") for i, t in enumerate(tokens)]
    results, _, failures = pipelined(args, calls, args.connections)
    registered = sum(1 for r in results if r is not None and r[0])
    summary["registered"] = registered
    summary["register_seconds"] = round(time.monotonic() - started, 3)
    summary["register_errors"] = [r[1] for r in results if r is not None and not r[0]][:5] + failures[:5]
    if registered != len(tokens):
        summary["error"] = f"only {registered} of {len(tokens)} tokens registered"
        return summary

    # 2. The updates, back to back on one connection, fire and forget.
    record = Record(args.record, set(tokens))
    record.poll()
    summary["records_before_updates"] = record.lines
    calls = [update_call(args, activity, json.dumps({"step": k, "run": run})) for k in range(args.updates)]
    updates_sent_ms = now_ms()
    results, answered, failures = pipelined(args, calls, 1)
    acked = []
    for k, r in enumerate(results):
        if r is not None and r[0]:
            reply = r[1]
            acked.append({"update": k, "timestamp": reply.timestamp, "targeted": reply.summary.targeted
                          if reply.HasField("summary") else -1, "reply_ms": answered[k] - updates_sent_ms})
    summary["updates_sent_ms"] = updates_sent_ms
    summary["acked"] = acked
    summary["update_errors"] = [r[1] for r in results if r is not None and not r[0]][:5] + failures[:5]
    if not acked:
        summary["error"] = "no update was acknowledged"
        return summary
    latest = max(a["timestamp"] for a in acked)
    summary["latest_timestamp"] = latest

    # 3. SIGKILL once the last update reached some tokens, not all.
    deadline = time.monotonic() + args.fanout_timeout
    covered = 0
    while time.monotonic() < deadline:
        record.poll()
        covered = record.covered(latest)
        if covered >= args.kill_after:
            break
        time.sleep(0.01)
    else:
        summary["error"] = f"the fan-out did not reach --kill-after ({covered} of {len(tokens)} tokens after " \
                           f"{args.fanout_timeout} s)"
        return summary
    os.kill(args.kill_pid, signal.SIGKILL)
    kill_ms = now_ms()
    summary["killed"] = True
    summary["kill_ms"] = kill_ms
    summary["covered_at_kill"] = covered
    summary["pushes_at_kill"] = record.pushes
    summary["fanout_seconds_to_kill"] = round((kill_ms - updates_sent_ms) / 1000, 3)
    return summary


# ====================================================================== verify

def verify(args) -> dict:
    with open(args.state) as f:
        state = json.load(f)
    load_summary = state["summary"]
    run, n = load_summary["run"], load_summary["tokens"]
    latest, kill_ms = load_summary["latest_timestamp"], load_summary["kill_ms"]
    tokens = [token_of(run, i) for i in range(n)]
    record = Record(args.record, set(tokens))
    started = time.monotonic()
    deadline = started + args.timeout
    covered = 0
    while True:
        record.poll()
        covered = record.covered(latest)
        if covered == n or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    waited = time.monotonic() - started

    # Connections seen up to the kill (and a moment after: requests the mock completed as the socket died)
    # belong to the killed process; later ones to the process that resumed its work.
    old_connections = set()
    for entries in record.received.values():
        for _, connection, received in entries:
            if received <= kill_ms + 50:
                old_connections.add(connection)
    before = after = duplicates = latest_total = 0
    first_resumed = finish = None
    missing = []
    for token in tokens:
        entries = record.received.get(token, [])
        got_latest = [e for e in entries if e[0] >= latest]
        latest_total += len(got_latest)
        duplicates += max(0, len(got_latest) - 1)
        for _, connection, received in entries:
            if connection in old_connections:
                before += 1
            else:
                after += 1
                first_resumed = received if first_resumed is None else min(first_resumed, received)
        if got_latest:
            first = min(e[2] for e in got_latest)
            finish = first if finish is None else max(finish, first)
        else:
            missing.append(token)
    result = {
        "phase": "verify",
        "tokens": n,
        "latest_timestamp": latest,
        "covered": covered,
        "missing": len(missing),
        "missing_samples": missing[:5],
        "pushes": record.pushes,
        "pushes_before_kill": before,
        "pushes_after_kill": after,
        "latest_pushes": latest_total,
        "duplicates": duplicates,
        "not_ok": {str(k): v for k, v in sorted(record.not_ok.items())},
        "unparsed_lines": record.unparsed,
        "other_records": record.other_paths,
        "old_connections": sorted(old_connections),
        "waited_seconds": round(waited, 3),
        "failover_seconds": round((first_resumed - kill_ms) / 1000, 3) if first_resumed is not None else None,
        "finish_after_kill_seconds": round((finish - kill_ms) / 1000, 3) if finish is not None and covered == n else None,
    }
    if args.restarted_at:
        result["finish_after_restart_seconds"] = (
            round((finish - args.restarted_at) / 1000, 3) if finish is not None and covered == n else None)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("phase", choices=["load", "verify"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--api-key")
    parser.add_argument("--ca")
    parser.add_argument("--app-id", default="dev.app")
    parser.add_argument("--state", required=True, help="JSON file: written by load, read by verify")
    parser.add_argument("--record", required=True, help="the mock's JSON-lines record file")
    parser.add_argument("--run", default=os.urandom(4).hex(), help="makes tokens and ids unique per run")
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--depth", type=int, default=64)
    parser.add_argument("--kill-after", type=int, default=3000,
                        help="SIGKILL the server once this many tokens received the last update")
    parser.add_argument("--kill-pid", type=int, help="the server's pid (load)")
    parser.add_argument("--fanout-timeout", type=float, default=60.0, help="give up (without killing) after this long")
    parser.add_argument("--timeout", type=float, default=10.0, help="bound on every call; verify: the whole wait")
    parser.add_argument("--restarted-at", type=int, default=0, help="verify: when the server was restarted, UNIX ms")
    args = parser.parse_args()

    if args.phase == "load":
        if not args.kill_pid or args.kill_pid <= 1 or not args.port or not args.api_key or not args.ca:
            parser.error("load needs --port, --api-key, --ca and --kill-pid")
        if not 0 < args.kill_after < args.tokens:
            parser.error("--kill-after must be between 0 and --tokens")
        summary = load(args)
        with open(args.state, "w") as f:
            json.dump({"summary": summary}, f)
        ok = summary["killed"] and "error" not in summary
    else:
        summary = verify(args)
        ok = summary["missing"] == 0
    print("RESULT " + json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
