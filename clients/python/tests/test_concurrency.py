"""Many calls at once: 1,000 pipelined on one connection, and many threads on one sync client."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List

from conftest import Dev
from harness import run, token, uid

import liverelay
from liverelay import pb


def test_1000_calls_pipelined_on_one_connection(dev: Dev) -> None:
    async def main() -> None:
        async with dev.server.async_client(dev.api_key, connections=1) as client:
            payloads = [b"p%d-" % i + uid("x").encode() for i in range(1000)]
            replies = await asyncio.gather(*(client.ping(p, timeout=60) for p in payloads))
            assert [r.payload for r in replies] == payloads
            stats = client.stats()
            assert stats.connections_opened == 1
            assert stats.requests_sent == 1000
            # Pipelined up to the server's MAX_REQUESTS_IN_FLIGHT (the dev server's is 100),
            # never beyond it; the rest waited in the client.
            assert stats.peak_in_flight == 100
            assert stats.in_flight == 0 and stats.waiting_calls == 0

    run(main())


def test_many_threads_share_one_sync_client(dev: Dev) -> None:
    errors: List[BaseException] = []
    threads, calls = 16, 40
    with dev.client(connections=2) as client:
        barrier = threading.Barrier(threads)

        def worker(n: int) -> int:
            barrier.wait()
            done = 0
            for i in range(calls):
                payload = b"t%d-%d" % (n, i)
                if i % 4 == 0:
                    reply = client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_UPDATE, token=token(),
                                                  environment=pb.ENVIRONMENT_SANDBOX, activity_id=uid("act"))
                    assert reply.result == pb.REGISTER_TOKEN_RESULT_CREATED
                else:
                    assert client.ping(payload).payload == payload
                done += 1
            return done

        with ThreadPoolExecutor(threads) as pool:
            futures = [pool.submit(worker, n) for n in range(threads)]
            results = []
            for future in futures:
                try:
                    results.append(future.result(timeout=120))
                except BaseException as error:  # collected, so every thread is joined first
                    errors.append(error)
        assert not errors, errors
        assert sum(results) == threads * calls
        stats = client.stats()
        assert stats.requests_sent == threads * calls
        assert 1 <= stats.connections_opened <= 2
        assert stats.peak_in_flight > 1  # the threads' calls were pipelined, not serialised


def test_max_pending_calls_refuses_beyond_the_bound(dev: Dev) -> None:
    async def main() -> None:
        async with dev.server.async_client(dev.api_key, connections=1, max_pending_calls=5) as client:
            results = await asyncio.gather(*(client.ping(b"%d" % i) for i in range(8)), return_exceptions=True)
            refused = [r for r in results if isinstance(r, liverelay.ResourceExhaustedError)]
            assert len(refused) == 3 and all(r.local for r in refused)
            assert sum(1 for r in results if isinstance(r, pb.PingReply)) == 5

    run(main())
