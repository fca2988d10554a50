"""GOAWAY and lost connections against a real server that is shut down and started again on
the same port and data: a graceful SIGTERM drains the calls in flight (they are answered on
their connection, not resent) and the client reconnects with back-off; a SIGKILL loses the
connection, and the client resends an idempotent call with the same key to the new server."""

from __future__ import annotations

import asyncio
import signal
from typing import Iterator, List, Tuple

import pytest
from conftest import SlowApp, make_slow_app
from harness import Server, bootstrap_admin_key, eventually, new_data_dir, queued, remove_tree, run, token, uid

import liverelay
from liverelay import pb

PATIENT = dict(
    connections=1,
    retry=liverelay.RetryPolicy(max_attempts=10_000, backoff=liverelay.Backoff(initial=0.05, maximum=0.5)),
    reconnect_backoff=liverelay.Backoff(initial=0.05, maximum=0.5),
)


@pytest.fixture
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[List[Server], SlowApp]]:
    """A server of its own (the tests stop it) with a slow app; servers started by the test
    are appended to the list, and all of them are stopped at the end."""
    data_dir = new_data_dir()
    servers: List[Server] = []
    app = None
    try:
        admin_key = bootstrap_admin_key(data_dir)
        servers.append(Server(data_dir))
        app = make_slow_app(servers[0], admin_key, str(tmp_path_factory.mktemp("mock")), "drain.app", 3000)
        yield servers, app
    finally:
        for server in servers:
            server.stop()
        if app is not None:
            app.mock.stop()
        remove_tree(data_dir)


async def registered_start(client: liverelay.AsyncClient, app: SlowApp, activity: str) -> dict:
    t = token()
    await client.register_token(app_id=app.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                environment=pb.ENVIRONMENT_SANDBOX, attributes_type="Slow")
    return dict(app_id=app.app_id, activity_id=activity, attributes_type="Slow", attributes_json={},
                content_state_json={"s": 1}, targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True,
                idempotency_key=uid("key"))


async def in_executor(function: object) -> object:
    return await asyncio.get_running_loop().run_in_executor(None, function)  # type: ignore[arg-type]


def test_sigterm_drains_in_flight_calls_then_the_client_reconnects(restartable: Tuple[List[Server], SlowApp]) -> None:
    servers, app = restartable
    first = servers[0]

    async def main() -> None:
        async with first.async_client(app.api_key, **PATIENT) as client:  # type: ignore[arg-type]
            activities = [uid("drain") for _ in range(3)]
            requests = [await registered_start(client, app, a) for a in activities]
            mark = first.mark()
            calls = [asyncio.ensure_future(client.start_activity(**r, timeout=90)) for r in requests]
            for activity in activities:
                await in_executor(lambda a=activity: first.wait_for(queued(a), 60, mark))
            first.signal(signal.SIGTERM)
            await eventually(lambda: client.stats().goaways_received >= 1, what="GOAWAY from the server")
            assert client.stats().open_connections == 0  # the draining connection takes no new call
            # A call made now waits for a new connection, reopened with back-off.
            later = asyncio.ensure_future(client.ping(b"after the restart", timeout=120))
            for reply in await asyncio.gather(*calls):
                # Answered by the draining server on their own connection, never resent (a resend
                # would be a replay) and never failed.
                assert not reply.replayed
                assert (reply.summary.delivered, reply.summary.complete) == (1, True)
            assert await in_executor(lambda: first.wait_exit(60)) == 0
            servers.append(Server(first.data_dir, port=first.port))
            assert (await later).payload == b"after the restart"
            # The new server has what the old one stored: a resend with the same key replays.
            again = await client.start_activity(**requests[0], timeout=30)
            assert again.replayed and again.activity_id == activities[0]
            stats = client.stats()
            assert stats.connections_opened >= 2 and stats.goaways_received >= 1

    run(main(), timeout=300)


def test_lost_connection_resends_the_start_with_its_key(restartable: Tuple[List[Server], SlowApp]) -> None:
    servers, app = restartable
    first = servers[0]

    async def main() -> None:
        async with first.async_client(app.api_key, **PATIENT) as client:  # type: ignore[arg-type]
            activity = uid("killed")
            request = await registered_start(client, app, activity)
            mark = first.mark()
            call = asyncio.ensure_future(client.start_activity(**request, timeout=120))
            await in_executor(lambda: first.wait_for(queued(activity), 60, mark))
            first.kill()  # SIGKILL: no GOAWAY, the call's outcome is unknown to the client
            servers.append(Server(first.data_dir, port=first.port))
            reply = await call
            # The first attempt was stored before the kill: the resend, with the same
            # idempotency key, gets its reply replayed instead of starting it twice.
            assert reply.replayed and reply.activity_id == activity
            assert client.stats().retries >= 1

    run(main(), timeout=300)
