"""Closed-loop RegisterToken load through ``liverelay.AsyncClient``.

Prints calls/s, the latency percentiles and the CPU each call cost this process
(and the server, given its pid). scripts/bench/clients.sh runs it beside the Swift
and Go clients against one null-service server (docs/BENCHMARKS.md, "Client
libraries")::

    python clients/python/bench/load.py --port 7443 --ca-file cert.pem [--connections 4]
        [--depth 32] [--warmup 2] [--duration 10] [--server-pid PID] [--json]

Each connection is an AsyncClient of one connection with ``depth`` tasks, each
sending its next call when the previous one returns, all on one event loop. The
requests are those of ``liverelay bench --mix register``: a new push-to-start token
per call. Retries are off. A call is measured when it starts inside the window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import secrets
import sys
import time
from typing import Any, Dict, List, Optional

import liverelay
from liverelay import pb

MASK = (1 << 64) - 1
TOKEN_TAIL = "04" + "5a1e" + "c3" * 17  # kind 04 (registered push-to-start), filler to 64 digits

WARMUP, MEASURING, STOPPING = 0, 1, 2


def scatter(value: int) -> int:
    """The splitmix64 finalizer, as liverelay bench spreads its tokens over the key space."""
    z = (value + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def process_cpu_seconds(pid: int) -> Optional[float]:
    """Another process's CPU time (user + system) from /proc; None elsewhere."""
    if pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 1 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: List[float], p: float) -> float:
    if not values:
        return 0.0
    i = max(0, min(len(values) - 1, math.ceil(p / 100 * len(values)) - 1))
    return values[i]


class Run:
    def __init__(self, app_id: str, timeout: float) -> None:
        self.phase = WARMUP
        self.next = 0
        self.tag = secrets.token_hex(4)
        self.app_id = app_id
        self.timeout = timeout
        self.latencies: List[float] = []  # seconds, measured calls that succeeded
        self.errors = 0
        self.first_error: Optional[str] = None

    async def caller(self, client: liverelay.AsyncClient) -> None:
        clock = time.perf_counter
        while True:
            phase = self.phase
            if phase == STOPPING:
                return
            n = self.next
            self.next = n + 1
            scattered = format(scatter(n), "016x")
            start = clock()
            try:
                await client.register_token(
                    app_id=self.app_id,
                    kind=pb.TOKEN_KIND_PUSH_TO_START,
                    token=scattered + self.tag + TOKEN_TAIL,
                    environment=pb.ENVIRONMENT_SANDBOX,
                    attributes_type="BenchRegistered",
                    device_id=f"b{self.tag}-r{scattered}",
                    timeout=self.timeout,
                )
            except liverelay.RpcError as error:
                if phase == MEASURING:
                    self.errors += 1
                    if self.first_error is None:
                        self.first_error = str(error)
                await asyncio.sleep(0.001)
                continue
            if phase == MEASURING:
                self.latencies.append(clock() - start)


async def main(args: argparse.Namespace) -> Dict[str, Any]:
    clients = [
        liverelay.AsyncClient(
            args.host,
            args.port,
            api_key=args.api_key,
            tls=liverelay.TLSConfig(ca_file=args.ca_file),
            client_name="liverelay-load-python",
            connections=1,
            default_timeout=args.timeout,
            retry=liverelay.RetryPolicy(max_attempts=1),
            max_pending_calls=2 * args.depth + 16,
        )
        for _ in range(args.connections)
    ]
    try:
        # Open every connection (TCP, TLS, HELLO) before any clock starts.
        for client in clients:
            await client.ping(timeout=10)
        run = Run(args.app_id, args.timeout)
        tasks = [
            asyncio.ensure_future(run.caller(client)) for client in clients for _ in range(args.depth)
        ]
        await asyncio.sleep(args.warmup)
        cpu0, server0 = time.process_time(), process_cpu_seconds(args.server_pid)
        t0 = time.perf_counter()
        run.phase = MEASURING
        await asyncio.sleep(args.duration)
        run.phase = STOPPING
        window = time.perf_counter() - t0
        cpu1, server1 = time.process_time(), process_cpu_seconds(args.server_pid)
        await asyncio.gather(*tasks)
    finally:
        for client in clients:
            await client.close()

    latencies = sorted(run.latencies)
    calls = len(latencies)
    completed = calls + run.errors
    return {
        "client": "python",
        "connections": args.connections,
        "depth": args.depth,
        "seconds": window,
        "calls": calls,
        "errors": run.errors,
        "calls_per_second": calls / window,
        "p50_us": percentile(latencies, 50) * 1e6,
        "p99_us": percentile(latencies, 99) * 1e6,
        "client_cpu_us_per_call": (cpu1 - cpu0) * 1e6 / completed if completed else None,
        "server_cpu_us_per_call": (
            (server1 - server0) * 1e6 / completed if completed and server0 is not None and server1 is not None else None
        ),
        "first_error": run.first_error,
    }


def summary(r: Dict[str, Any]) -> str:
    def show(v: Optional[float]) -> str:
        return "n/a" if v is None else f"{v:.1f}"

    line = (
        f"python: {r['connections']}x{r['depth']} RegisterToken: {r['calls_per_second']:.0f} calls/s, "
        f"p50 {r['p50_us']:.0f} µs, p99 {r['p99_us']:.0f} µs, client CPU {show(r['client_cpu_us_per_call'])} µs/call, "
        f"server CPU {show(r['server_cpu_us_per_call'])} µs/call ({r['calls']} calls in {r['seconds']:.2f} s, "
        f"{r['errors']} errors)"
    )
    if r["first_error"]:
        line += f"; first error: {r['first_error']}"
    return line


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7443)
    parser.add_argument("--ca-file", help="PEM file of the CA to trust (default: the system's roots)")
    parser.add_argument("--api-key", default=os.environ.get("LIVERELAY_API_KEY", ""))
    parser.add_argument("--app-id", default="dev.app")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--depth", type=int, default=32)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=10.0, help="per-call deadline in seconds")
    parser.add_argument("--server-pid", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout (the summary on stderr)")
    options = parser.parse_args()
    if not options.api_key or options.connections < 1 or options.depth < 1 or options.duration <= 0:
        parser.error("needs an API key, connections and depth >= 1, duration > 0")
    result = asyncio.run(main(options))
    if options.json:
        print(summary(result), file=sys.stderr)
        print(json.dumps(result))
    else:
        print(summary(result))
