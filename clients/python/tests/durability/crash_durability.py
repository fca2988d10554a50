#!/usr/bin/env python3
"""The load and the check of the SIGKILL durability test (Tests/EndToEndTests/CrashDurabilityTests.swift).

Two phases, each a run of this script against a real `liverelay serve`, through the `liverelay`
package (installed in the Python that runs it; clients/python/scripts/test.sh makes one):

  crash_durability.py load --port P --api-key K --ca cert.pem --state STATE.json --kill-pid PID
                           [--connections 4] [--depth 64] [--kill-after 3000] [--run ID]
      C clients of one connection each keep D RegisterToken calls in flight each: update tokens
      for 8 activities, every call a new device id, so every acknowledged call is a CREATED row.
      Every call whose OK reply arrives is recorded as acknowledged. When the acknowledgements
      reach --kill-after, this script sends SIGKILL to --kill-pid (the server) while the other
      calls are still in flight, keeps taking whatever replies were already on the wire (they
      are acknowledgements too) until every call has its outcome, and writes STATE.json: the
      acknowledged calls, the ones sent but never answered, any error replies.

  crash_durability.py verify --port P --api-key K --ca cert.pem --state STATE.json
      Against the restarted server (same data directory): re-registers every acknowledged token
      with the same fields and expects UNCHANGED (CREATED would mean the server lost it); every
      unanswered one must come back CREATED or UNCHANGED (present or absent, nothing else); and,
      as a control that the check can fail, tokens never sent before must come back CREATED.

The clients never resend a call (RetryPolicy(max_attempts=1)): a resent RegisterToken would
turn a lost token's CREATED into UNCHANGED and hide the loss. Both phases print one last line
`RESULT {json}` for the Swift test to assert on; the exit code is 0 when the phase's own
checks passed. Every call and every wait is bounded by --timeout. Tokens and device ids are
derived from (run, connection, sequence), so verify rebuilds the exact requests from the
numbers in STATE.json.
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
from typing import Any, Dict, List, Optional, Set, Tuple, Union

import liverelay
from liverelay import pb
from liverelay.errors import Processing

ACTIVITIES = 8


def fields(app: str, run: str, conn: int, seq: int) -> Dict[str, Any]:
    return dict(
        app_id=app,
        kind=pb.TOKEN_KIND_UPDATE,
        token=hashlib.sha256(f"{run}/{conn}/{seq}".encode()).hexdigest(),  # 64 lowercase hex
        environment=pb.ENVIRONMENT_SANDBOX,
        activity_id=f"crash-{run}-act-{seq % ACTIVITIES}",
        device_id=f"crash-{run}-dev-{conn}-{seq}",
    )


def connect(args: argparse.Namespace) -> liverelay.AsyncClient:
    return liverelay.AsyncClient(
        args.host, args.port, api_key=args.api_key, tls=liverelay.TLSConfig(ca_file=args.ca),
        client_name="crash-durability", connections=1, default_timeout=args.timeout,
        connect_timeout=args.timeout, retry=liverelay.RetryPolicy(max_attempts=1), shutdown_grace=2.0,
    )


# ====================================================================== load, then SIGKILL

class Load:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.acked: List[List[int]] = []  # [conn, seq, result]
        self.unacked: List[List[int]] = []  # [conn, seq]: sent (or being sent), no reply
        self.errors: List[List[Any]] = []  # [conn, seq, status, message]: error replies before the kill
        self.late_errors = 0  # error replies after the kill (expected: none, but not a durability failure)
        self.killed = False
        self.acks_at_kill = 0
        self.in_flight_at_kill = 0
        self.pending_by_conn: Dict[int, Dict["asyncio.Task[Any]", int]] = {}
        self.kill_time: Optional[float] = None
        self.start_time: Optional[float] = None

    def maybe_kill(self) -> None:
        """After an acknowledgement: the SIGKILL, once there are --kill-after of them."""
        if self.killed or len(self.acked) < self.args.kill_after:
            return
        self.in_flight_at_kill = sum(len(p) for p in self.pending_by_conn.values())
        self.acks_at_kill = len(self.acked)
        os.kill(self.args.kill_pid, signal.SIGKILL)
        self.kill_time = time.monotonic()
        self.killed = True

    async def worker(self, conn: int, client: liverelay.AsyncClient) -> None:
        pending: Dict["asyncio.Task[Any]", int] = {}  # call -> seq
        self.pending_by_conn[conn] = pending
        seq = 0
        deadline = time.monotonic() + self.args.duration
        try:
            while True:
                if time.monotonic() > deadline and not self.killed:
                    break  # never reached --kill-after: reported as not killed
                while not self.killed and len(pending) < self.args.depth:
                    # Pending from the moment it is made: a call that fails half-way is "unacked".
                    call = asyncio.ensure_future(client.register_token(**fields(self.args.app_id, self.args.run, conn, seq)))
                    pending[call] = seq
                    seq += 1
                if not pending:
                    break  # killed and nothing left to wait for
                done, _ = await asyncio.wait(pending, timeout=self.args.timeout, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    if not self.killed:
                        self.errors.append([conn, -1, -1, f"no reply within {self.args.timeout} s before the kill"])
                    break  # the rest stay unacked
                for call in done:
                    s = pending.pop(call)
                    error = call.exception()
                    if error is None:
                        self.acked.append([conn, s, call.result().result])
                        self.maybe_kill()
                    elif self.killed:
                        if isinstance(error, liverelay.RpcError) and error.processing is Processing.ANSWERED:
                            self.late_errors += 1
                        self.unacked.append([conn, s])
                    elif isinstance(error, liverelay.RpcError):
                        self.errors.append([conn, s, int(error.status), error.message])
                    else:
                        self.errors.append([conn, s, -1, f"{type(error).__name__}: {error}"])
        finally:
            self.unacked.extend([conn, s] for s in pending.values())
            for call in pending:
                call.cancel()
            pending.clear()

    async def run(self) -> Dict[str, Any]:
        clients = [connect(self.args) for _ in range(self.args.connections)]
        hung = 0
        try:
            # Every connection open before the load starts.
            await asyncio.gather(*(c.ping(b"ready") for c in clients))
            self.start_time = time.monotonic()
            workers = [asyncio.ensure_future(self.worker(i, c)) for i, c in enumerate(clients)]
            _, unfinished = await asyncio.wait(workers, timeout=self.args.duration + 3 * self.args.timeout)
            hung = len(unfinished)
            for w in unfinished:
                w.cancel()
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        results = [a[2] for a in self.acked]
        return {
            "phase": "load",
            "run": self.args.run,
            "connections": len(clients),
            "depth": self.args.depth,
            "killed": self.killed,
            "acks_at_kill": self.acks_at_kill,
            "in_flight_at_kill": self.in_flight_at_kill,
            "acked": len(self.acked),
            "acked_after_kill": len(self.acked) - self.acks_at_kill if self.killed else 0,
            "acked_not_created": sum(1 for r in results if r != pb.REGISTER_TOKEN_RESULT_CREATED),
            "unacked": len(self.unacked),
            "errors": len(self.errors),
            "error_samples": self.errors[:5],
            "late_errors": self.late_errors,
            "hung_threads": hung,
            "seconds_to_kill": round(self.kill_time - self.start_time, 3)
            if self.kill_time is not None and self.start_time is not None else None,
        }


# ====================================================================== verify after restart

Reply = Union[int, Tuple[Any, ...]]


async def verify(args: argparse.Namespace) -> Dict[str, Any]:
    with open(args.state) as f:
        state = json.load(f)
    run = state["run"]
    max_seq = max([a[1] for a in state["acked"]] + [u[1] for u in state["unacked"]] + [0])
    controls = [[0, max_seq + 1_000_000 + i] for i in range(args.controls)]

    # (what, conn, seq): every call of this phase, pipelined 64 at a time.
    work = [("acked", c, s) for c, s, _ in state["acked"]]
    work += [("unacked", c, s) for c, s in state["unacked"]]
    work += [("control", c, s) for c, s in controls]
    replies: Dict[int, Reply] = {}  # index in work -> result value, or ("error", status, message)
    window = asyncio.Semaphore(64)

    async def register(client: liverelay.AsyncClient, index: int, conn: int, seq: int) -> None:
        async with window:
            try:
                replies[index] = (await client.register_token(**fields(args.app_id, run, conn, seq))).result
            except liverelay.RpcError as error:
                replies[index] = ("error", int(error.status), error.message)

    async with connect(args) as client:
        await asyncio.gather(*(register(client, i, c, s) for i, (_, c, s) in enumerate(work)))
        # The controls again: now that they were created, the same call must say UNCHANGED.
        controls_again = []
        for c, s in controls:
            reply = await client.register_token(**fields(args.app_id, run, c, s))
            controls_again.append(reply.result)

    unchanged, created = pb.REGISTER_TOKEN_RESULT_UNCHANGED, pb.REGISTER_TOKEN_RESULT_CREATED
    lost: List[List[Any]] = []
    acked_other: List[List[Any]] = []
    unacked_other: List[List[Any]] = []
    unacked_present = unacked_absent = 0
    control_results: List[Reply] = []
    for i, (what, c, s) in enumerate(work):
        r = replies.get(i, ("no reply",))
        if what == "acked":
            if r == unchanged:
                continue
            (lost if r == created else acked_other).append([c, s, r if isinstance(r, int) else list(r)])
        elif what == "unacked":
            if r == unchanged:
                unacked_present += 1
            elif r == created:
                unacked_absent += 1
            else:
                unacked_other.append([c, s, r if isinstance(r, int) else list(r)])
        else:
            control_results.append(r)
    return {
        "phase": "verify",
        "acked_checked": len(state["acked"]),
        "acked_unchanged": len(state["acked"]) - len(lost) - len(acked_other),
        "lost": len(lost),
        "lost_samples": lost[:10],
        "acked_other": len(acked_other),
        "acked_other_samples": acked_other[:10],
        "unacked_checked": len(state["unacked"]),
        "unacked_present": unacked_present,
        "unacked_absent": unacked_absent,
        "unacked_other": len(unacked_other),
        "unacked_other_samples": unacked_other[:10],
        "controls": len(controls),
        "controls_created": sum(1 for r in control_results if r == created),
        "controls_unchanged_on_repeat": sum(1 for r in controls_again if r == unchanged),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("phase", choices=["load", "verify"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--app-id", default="dev.app")
    parser.add_argument("--state", required=True, help="JSON file: written by load, read by verify")
    parser.add_argument("--run", default=os.urandom(4).hex(), help="makes tokens and ids unique per run")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--depth", type=int, default=64)
    parser.add_argument("--kill-after", type=int, default=3000, help="SIGKILL the server at this many acknowledgements")
    parser.add_argument("--kill-pid", type=int, help="the server's pid (load)")
    parser.add_argument("--duration", type=float, default=120.0, help="give up (without killing) after this long")
    parser.add_argument("--timeout", type=float, default=10.0, help="bound on every call and wait")
    parser.add_argument("--controls", type=int, default=16, help="never-sent tokens that verify must see CREATED")
    args = parser.parse_args()

    if args.phase == "load":
        if not args.kill_pid or args.kill_pid <= 1:
            parser.error("load needs --kill-pid (the server's pid)")
        load = Load(args)
        summary = asyncio.run(load.run())
        with open(args.state, "w") as f:
            json.dump({"run": args.run, "acked": load.acked, "unacked": load.unacked, "summary": summary}, f)
        ok = summary["killed"] and summary["errors"] == 0 and summary["acked_not_created"] == 0
    else:
        summary = asyncio.run(verify(args))
        ok = (summary["lost"] == 0 and summary["acked_other"] == 0 and summary["unacked_other"] == 0
              and summary["controls_created"] == summary["controls"]
              and summary["controls_unchanged_on_repeat"] == summary["controls"])
    print("RESULT " + json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
