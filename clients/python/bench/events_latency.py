"""How soon a long poll of the event feed (ListEvents) answers after an event is committed.

One task keeps a ListEvents long poll open on the app's feed, following its cursor; another
starts activities through a registered push-to-start token at a steady pace, without waiting
for delivery. Each start's pushes settle on the server (the mock APNs answers), which commits a
CALL_SETTLED event stamped with the time of its commit's plan (`time_ms`); the poller notes when
the event reached it. The latency is the difference, on the machine's one clock. Prints the
percentiles; scripts/bench/events.sh runs it against a release `liverelay serve` (SQLite)::

    python clients/python/bench/events_latency.py --port 7443 --ca-file cert.pem --api-key KEY
        [--poll-port 7444] [--events 300] [--rate 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import secrets
import sys
import time
from typing import Any, Dict, List

import liverelay
from liverelay import pb


def percentile(values: List[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def run(args: argparse.Namespace) -> Dict[str, Any]:
    tls = liverelay.TLSConfig(ca_file=args.ca_file)
    async with liverelay.AsyncClient("127.0.0.1", args.port, api_key=args.api_key, tls=tls) as producer, \
            liverelay.AsyncClient("127.0.0.1", args.poll_port or args.port, api_key=args.api_key, tls=tls) as poller:
        token = secrets.token_hex(32)
        await producer.register_token(app_id=args.app, kind=pb.TOKEN_KIND_PUSH_TO_START, token=token,
                                      environment=pb.ENVIRONMENT_SANDBOX, attributes_type="BenchAttributes")
        # Start after what the feed holds already.
        cursor = 0
        while True:
            page = await poller.list_events(app_id=args.app, after_cursor=cursor, max_events=1000)
            cursor = page.next_cursor
            if not page.more:
                break
        run_tag = secrets.token_hex(4)
        latencies: List[float] = []
        done = asyncio.Event()

        async def poll() -> None:
            nonlocal cursor
            while not done.is_set():
                page = await poller.list_events(app_id=args.app, after_cursor=cursor, max_events=1000, wait_ms=5000)
                received = time.time() * 1000
                for event in page.events:
                    if event.kind == pb.EVENT_KIND_CALL_SETTLED and event.activity_id.startswith(run_tag):
                        latencies.append(received - event.time_ms)
                cursor = page.next_cursor
                if len(latencies) >= args.events:
                    done.set()

        async def produce() -> None:
            for i in range(args.events):
                await producer.start_activity(
                    app_id=args.app, activity_id=f"{run_tag}-{i}", attributes_type="BenchAttributes",
                    attributes_json={"i": i}, content_state_json={"s": 0},
                    targets=pb.Targets(push_to_start_tokens=[token]))
                await asyncio.sleep(1 / args.rate)

        poller_task = asyncio.ensure_future(poll())
        await produce()
        try:
            await asyncio.wait_for(done.wait(), timeout=60)
        finally:
            done.set()
            poller_task.cancel()
            await asyncio.gather(poller_task, return_exceptions=True)
        return {
            "events": len(latencies), "rate_per_second": args.rate,
            "p50_ms": round(percentile(latencies, 50), 2), "p99_ms": round(percentile(latencies, 99), 2),
            "max_ms": round(max(latencies), 2),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--poll-port", type=int, help="another node's port for the poller (PostgreSQL, two nodes)")
    parser.add_argument("--ca-file", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--app", default="dev.app")
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"events: {result['events']} at {args.rate}/s; commit to long-poll answer p50 {result['p50_ms']} ms, "
              f"p99 {result['p99_ms']} ms, max {result['max_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
