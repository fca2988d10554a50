"""Deadlines and cancellation against a real server, on calls that stay in flight: an app
whose pushes a mock APNs answers only after a few seconds, and calls that wait for delivery."""

from __future__ import annotations

import asyncio
from typing import Any, Dict

import pytest
from conftest import Dev, SlowApp
from harness import eventually, queued, run, token, uid

import liverelay
from liverelay import pb
from liverelay.errors import Processing


async def waiting_start_request(client: liverelay.AsyncClient, slow: SlowApp, activity: str) -> Dict[str, Any]:
    """A StartActivity that waits for delivery, to a token registered for it."""
    t = token()
    await client.register_token(app_id=slow.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                environment=pb.ENVIRONMENT_SANDBOX, attributes_type="Slow")
    return dict(app_id=slow.app_id, activity_id=activity, attributes_type="Slow", attributes_json={},
                content_state_json={"s": 1}, targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True)


def test_deadline_fails_locally_sends_cancel_and_a_resend_with_the_key_is_safe(dev: Dev, slow: SlowApp) -> None:
    async def main() -> None:
        async with dev.server.async_client(slow.api_key, connections=1) as client:
            activity = uid("deadline")
            request = await waiting_start_request(client, slow, activity)
            with pytest.raises(liverelay.DeadlineExceededError) as info:
                await client.start_activity(**request, timeout=1.0)
            error = info.value
            assert error.processing is Processing.UNKNOWN
            assert error.idempotency_key and error.method.endswith("/StartActivity")
            if error.local:
                # The client's deadline fired first: it sent CANCEL, and the server's one
                # answer to the call came later and was dropped.
                assert client.stats().cancels_sent == 1
                await eventually(lambda: client.stats().late_replies_dropped == 1, what="the late reply dropped")
            else:
                # The server's own deadline (receipt + the timeout sent) won the race by a hair.
                assert error.message
            assert client.stats().in_flight == 0
            # Resending with the error's key is safe whatever the first attempt did: a replay
            # if it was stored, the start itself if not; never ALREADY_EXISTS.
            again = await client.start_activity(**request, idempotency_key=error.idempotency_key, timeout=30)
            assert again.activity_id == activity
            assert again.replayed or again.summary.delivered == 1

    run(main())


def test_cancelled_task_sends_cancel_and_the_resend_replays(dev: Dev, slow: SlowApp) -> None:
    async def main() -> None:
        async with dev.server.async_client(slow.api_key, connections=1) as client:
            activity, key = uid("cancel"), uid("key")
            request = await waiting_start_request(client, slow, activity)
            mark = dev.server.mark()
            task = asyncio.ensure_future(client.start_activity(**request, idempotency_key=key, timeout=60))
            # The server logs the call once it is stored and its push is queued for the slow mock.
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: dev.server.wait_for(queued(activity), timeout=60, start=mark))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert client.stats().cancels_sent == 1
            await eventually(lambda: client.stats().late_replies_dropped == 1, what="the CANCELLED reply dropped")
            replayed = await client.start_activity(**request, idempotency_key=key)
            # A replay answers at once, with the account as it stands.
            assert replayed.replayed and replayed.activity_id == activity

    run(main())


def test_sync_client_deadline(dev: Dev, slow: SlowApp) -> None:
    with dev.server.client(slow.api_key, default_timeout=0.5) as client:
        t = token()
        client.register_token(app_id=slow.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                              environment=pb.ENVIRONMENT_SANDBOX, attributes_type="Slow", timeout=30)
        with pytest.raises(liverelay.DeadlineExceededError) as info:
            client.start_activity(app_id=slow.app_id, activity_id=uid("sync"), attributes_type="Slow",
                                  attributes_json={}, content_state_json={},
                                  targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True)
        # The client's deadline or the server's (the same timeout, from receipt), whichever
        # is seen first: either way the call may have been stored.
        assert info.value.processing is Processing.UNKNOWN
        assert client.ping(b"still fine", timeout=30).payload == b"still fine"
