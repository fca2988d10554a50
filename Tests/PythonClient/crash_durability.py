#!/usr/bin/env python3
"""The load and the check of the SIGKILL durability test (Tests/EndToEndTests/CrashDurabilityTests.swift).

Two phases, each a run of this script against a real `liverelay serve`:

  crash_durability.py load --port P --api-key K --ca cert.pem --state STATE.json --kill-pid PID
                           [--connections 4] [--depth 64] [--kill-after 3000] [--run ID]
      C connections (one thread each) keep D RegisterToken calls in flight each: update tokens
      for 8 activities, every call a new device id, so every acknowledged call is a CREATED row.
      Every call whose OK reply arrives is recorded as acknowledged. When the acknowledgements
      reach --kill-after, this script sends SIGKILL to --kill-pid (the server) while the other
      calls are still in flight, keeps reading whatever replies were already on the wire (they
      are acknowledgements too) until every connection is closed, and writes STATE.json:
      the acknowledged calls, the ones sent but never answered, any error replies.

  crash_durability.py verify --port P --api-key K --ca cert.pem --state STATE.json
      Against the restarted server (same data directory): re-registers every acknowledged token
      with the same fields and expects UNCHANGED (CREATED would mean the server lost it); every
      unanswered one must come back CREATED or UNCHANGED (present or absent, nothing else); and,
      as a control that the check can fail, tokens never sent before must come back CREATED.

Both phases print one last line `RESULT {json}` for the Swift test to assert on; the exit code
is 0 when the phase's own checks passed. Every socket operation is bounded by a timeout.
Tokens and device ids are derived from (run, connection, sequence), so verify rebuilds the
exact requests from the numbers in STATE.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import liverelay_client as lr  # noqa: E402
from liverelay_client import Client, ConnectionClosed, FrameType, ProtocolViolation, RpcError  # noqa: E402

ACTIVITIES = 8


def fields(pb, app: str, run: str, conn: int, seq: int) -> dict:
    return dict(
        app_id=app,
        kind=pb.TOKEN_KIND_UPDATE,
        token=hashlib.sha256(f"{run}/{conn}/{seq}".encode()).hexdigest(),  # 64 lowercase hex
        environment=pb.ENVIRONMENT_SANDBOX,
        activity_id=f"crash-{run}-act-{seq % ACTIVITIES}",
        device_id=f"crash-{run}-dev-{conn}-{seq}",
    )


def request_bytes(pb, app, run, conn, seq) -> bytes:
    return pb.RegisterTokenRequest(**fields(pb, app, run, conn, seq)).SerializeToString()


def connect(args, pb) -> Client:
    ctx = lr.tls_context(args.ca)
    return Client(args.host, args.port, args.api_key, ssl_context=ctx, timeout=args.timeout,
                  client_name="crash-durability", pb=pb)


def result_name(pb, value: int) -> str:
    return pb.RegisterTokenResult.Name(value) if value in pb.RegisterTokenResult.values() else str(value)


# ====================================================================== load, then SIGKILL

class Load:
    def __init__(self, args, pb):
        self.args = args
        self.pb = pb
        self.lock = threading.Lock()
        self.acked = []  # [conn, seq, result]
        self.unacked = []  # [conn, seq]: sent (or being sent), no reply
        self.errors = []  # [conn, seq, status, message]: error replies before the kill
        self.late_errors = 0  # error replies after the kill (expected: none, but not a durability failure)
        self.ack_count = 0
        self.killed = threading.Event()
        self.acks_at_kill = 0
        self.in_flight_at_kill = 0
        self.pending_by_conn = {}
        self.connect_failures = []
        self.kill_time = None
        self.start_time = None

    def maybe_kill(self, conn: int):
        """Called with the lock held after an acknowledgement."""
        if self.killed.is_set() or self.ack_count < self.args.kill_after:
            return
        self.in_flight_at_kill = sum(len(p) for p in self.pending_by_conn.values())
        self.acks_at_kill = self.ack_count
        os.kill(self.args.kill_pid, signal.SIGKILL)
        self.kill_time = time.monotonic()
        self.killed.set()

    def worker(self, conn: int, client: Client, ready: threading.Barrier):
        pending = {}  # rid -> seq
        with self.lock:
            self.pending_by_conn[conn] = pending
        seq = 0
        deadline = time.monotonic() + self.args.duration
        try:
            ready.wait(30)
        except threading.BrokenBarrierError:
            return
        try:
            while True:
                if time.monotonic() > deadline and not self.killed.is_set():
                    break  # never reached --kill-after: reported as not killed
                while not self.killed.is_set() and len(pending) < self.args.depth:
                    # Registered as pending before the bytes leave: a send that fails half-way is "unacked".
                    rid = client.next_id
                    with self.lock:
                        pending[rid] = seq
                    got = client.start("RegisterToken", request_bytes(self.pb, self.args.app_id, self.args.run, conn, seq),
                                       wait_for_slot=False)
                    assert got == rid, (got, rid)
                    seq += 1
                if not pending:
                    break  # killed and nothing left to wait for
                try:
                    frame = client.pump(self.args.timeout)
                except socket.timeout:
                    if self.killed.is_set():
                        break  # the connection did not close within the bound: the rest stay unacked
                    raise
                if frame.type not in (FrameType.RESPONSE, FrameType.ERROR):
                    continue
                rid = frame.request_id
                result = client.results.pop(rid)
                with self.lock:
                    s = pending.pop(rid)
                    if result.ok:
                        reply = self.pb.RegisterTokenReply()
                        reply.ParseFromString(result.payload)
                        self.acked.append([conn, s, reply.result])
                        self.ack_count += 1
                        self.maybe_kill(conn)
                    elif self.killed.is_set():
                        self.late_errors += 1
                        self.unacked.append([conn, s])
                    else:
                        self.errors.append([conn, s, int(result.error.status), result.error.message])
        except (ConnectionClosed, OSError, ProtocolViolation, RpcError) as error:
            if not self.killed.is_set():
                with self.lock:
                    self.errors.append([conn, -1, -1, f"connection failed before the kill: {type(error).__name__}: {error}"])
        finally:
            with self.lock:
                self.unacked.extend([conn, s] for s in pending.values())
                pending.clear()
            client.conn.close()

    def run(self) -> dict:
        clients = []
        for conn in range(self.args.connections):
            clients.append(connect(self.args, self.pb))
        depth = min(self.args.depth, clients[0].max_in_flight)
        self.args.depth = depth
        ready = threading.Barrier(len(clients))
        threads = [threading.Thread(target=self.worker, args=(i, c, ready), daemon=True) for i, c in enumerate(clients)]
        self.start_time = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.args.duration + 3 * self.args.timeout)
        hung = sum(1 for t in threads if t.is_alive())
        with self.lock:
            results = [a[2] for a in self.acked]
            return {
                "phase": "load",
                "run": self.args.run,
                "connections": len(clients),
                "depth": depth,
                "killed": self.killed.is_set(),
                "acks_at_kill": self.acks_at_kill,
                "in_flight_at_kill": self.in_flight_at_kill,
                "acked": len(self.acked),
                "acked_after_kill": len(self.acked) - self.acks_at_kill if self.killed.is_set() else 0,
                "acked_not_created": sum(1 for r in results if r != self.pb.REGISTER_TOKEN_RESULT_CREATED),
                "unacked": len(self.unacked),
                "errors": len(self.errors),
                "error_samples": self.errors[:5],
                "late_errors": self.late_errors,
                "hung_threads": hung,
                "seconds_to_kill": round(self.kill_time - self.start_time, 3) if self.kill_time else None,
            }


# ====================================================================== verify after restart

def verify(args, pb) -> dict:
    with open(args.state) as f:
        state = json.load(f)
    run = state["run"]
    client = connect(args, pb)
    depth = min(64, client.max_in_flight)
    max_seq = max([a[1] for a in state["acked"]] + [u[1] for u in state["unacked"]] + [0])
    controls = [[0, max_seq + 1_000_000 + i] for i in range(args.controls)]

    # (what, conn, seq): every call of this phase, sent pipelined `depth` at a time.
    work = [("acked", c, s) for c, s, _ in state["acked"]]
    work += [("unacked", c, s) for c, s in state["unacked"]]
    work += [("control", c, s) for c, s in controls]
    replies = {}  # index in work -> result value, or ("error", status, message)
    pending = {}
    index = 0
    while index < len(work) or pending:
        while index < len(work) and len(pending) < depth:
            _, c, s = work[index]
            rid = client.start("RegisterToken", request_bytes(pb, args.app_id, run, c, s), wait_for_slot=False)
            pending[rid] = index
            index += 1
        frame = client.pump(args.timeout)
        if frame.type not in (FrameType.RESPONSE, FrameType.ERROR):
            continue
        result = client.results.pop(frame.request_id)
        i = pending.pop(frame.request_id)
        if result.ok:
            reply = pb.RegisterTokenReply()
            reply.ParseFromString(result.payload)
            replies[i] = reply.result
        else:
            replies[i] = ("error", int(result.error.status), result.error.message)

    # The controls again: now that they were created, the same call must say UNCHANGED.
    controls_again = []
    for c, s in controls:
        reply = client.register_token(**fields(pb, args.app_id, run, c, s))
        controls_again.append(reply.result)
    client.close(5)

    unchanged, created = pb.REGISTER_TOKEN_RESULT_UNCHANGED, pb.REGISTER_TOKEN_RESULT_CREATED
    lost, acked_other, unacked_present, unacked_absent, unacked_other = [], [], 0, 0, []
    control_results = []
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
    parser.add_argument("--timeout", type=float, default=10.0, help="bound on every socket wait")
    parser.add_argument("--controls", type=int, default=16, help="never-sent tokens that verify must see CREATED")
    args = parser.parse_args()
    pb = lr.load_protos(os.environ.get("LIVERELAY_PROTOS"))

    if args.phase == "load":
        if not args.kill_pid or args.kill_pid <= 1:
            parser.error("load needs --kill-pid (the server's pid)")
        load = Load(args, pb)
        summary = load.run()
        with open(args.state, "w") as f:
            json.dump({"run": args.run, "acked": load.acked, "unacked": load.unacked, "summary": summary}, f)
        ok = summary["killed"] and summary["errors"] == 0 and summary["acked_not_created"] == 0
    else:
        summary = verify(args, pb)
        ok = (summary["lost"] == 0 and summary["acked_other"] == 0 and summary["unacked_other"] == 0
              and summary["controls_created"] == summary["controls"]
              and summary["controls_unchanged_on_repeat"] == summary["controls"])
    print("RESULT " + json.dumps(summary), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
