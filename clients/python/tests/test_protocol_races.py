"""The client's protocol rules against a scripted server (tests/fake_server.py): which calls
it resends after GOAWAY, a lost connection or OutcomeUnknown, and with which idempotency key;
TOO_MANY_CONNECTIONS and refused keys; keepalive; deadlines and CANCEL on the wire."""

from __future__ import annotations

import asyncio
from typing import List

import pytest
from fake_server import FakeConnection, FakeServer, Request
from harness import run

import liverelay
from liverelay import _wire as wire
from liverelay import admin_pb, pb
from liverelay.errors import Processing, Status

FAST = liverelay.Backoff(initial=0.001, maximum=0.01, jitter=0)


def client(server: FakeServer, **options: object) -> liverelay.AsyncClient:
    settings: dict = dict(
        api_key="lrk_test_secret_0123456789",
        insecure_plaintext=True,
        connections=1,
        reconnect_backoff=FAST,
        retry=liverelay.RetryPolicy(max_attempts=3, backoff=FAST),
    )
    settings.update(options)
    return liverelay.AsyncClient("127.0.0.1", server.port, **settings)  # type: ignore[arg-type]


def ping_payload(request: Request) -> bytes:
    return pb.PingRequest.FromString(request.message).payload


async def serve_forever(connection: FakeConnection) -> None:
    """A well-behaved connection: Ping echoes its payload, everything else gets an empty reply."""
    while True:
        request = await connection.next()
        if request is None:
            return
        if request.method.endswith("/Ping"):
            connection.reply(request.request_id, pb.PingReply(payload=ping_payload(request)).SerializeToString())
        else:
            connection.reply(request.request_id, b"")


def test_goaway_resends_exactly_the_calls_above_its_last_id() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        if connection.index > 0:
            return await serve_forever(connection)
        held = [await connection.next() for _ in range(6)]
        connection.goaway(3, wire.GoAwayCode.NO_ERROR, "shutting down")
        for request in held[:3]:
            assert request is not None
            payload = ping_payload(request) if request.method.endswith("/Ping") else b""
            connection.reply(request.request_id, pb.PingReply(payload=payload).SerializeToString()
                             if payload else b"")
        await connection.close()

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                calls = [
                    c.ping(b"p1"),
                    c.create_channel(app_id="a", environment=pb.ENVIRONMENT_SANDBOX,
                                     storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE),
                    c.ping(b"p3"),
                    c.ping(b"p4"),
                    c.create_channel(app_id="a", environment=pb.ENVIRONMENT_SANDBOX,
                                     storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE),
                    c.ping(b"p6"),
                ]
                results = await asyncio.gather(*calls)
                assert [r.payload for r in (results[0], results[2], results[3], results[5])] == [b"p1", b"p3", b"p4", b"p6"]
                stats = c.stats()
            first = server.connections[0].requests
            second = server.connections[1].requests
            assert [r.request_id for r in first] == [1, 2, 3, 4, 5, 6]
            # Only the calls above last_request_id 3 went again, the non-idempotent
            # CreateChannel among them (not processed is safe to resend), and nothing else.
            assert sorted((r.method.rsplit("/", 1)[1], ping_payload(r) if r.method.endswith("Ping") else b"")
                          for r in second) == [("CreateChannel", b""), ("Ping", b"p4"), ("Ping", b"p6")]
            assert len(server.connections) == 2
            assert stats.goaways_received == 1 and stats.connections_opened == 2 and stats.retries == 3

    run(main())


def test_lost_connection_resends_only_idempotent_calls_with_the_same_key() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        if connection.index > 0:
            while True:
                request = await connection.next()
                if request is None:
                    return
                connection.reply(request.request_id, pb.StartActivityReply(activity_id="act-1", replayed=True)
                                 .SerializeToString())
        await connection.next()
        await connection.next()
        await connection.close()  # both outstanding, no GOAWAY: their outcome is unknown

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                start = c.start_activity(app_id="a", activity_id="act-1", attributes_type="T", attributes_json={},
                                         content_state_json={"s": 1}, targets=pb.Targets(all_devices=True))
                create = c.create_channel(app_id="a", environment=pb.ENVIRONMENT_SANDBOX,
                                          storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE)
                started, failed = await asyncio.gather(start, create, return_exceptions=True)
            assert isinstance(started, pb.StartActivityReply) and started.replayed
            assert isinstance(failed, liverelay.UnavailableError), failed
            assert failed.processing is Processing.UNKNOWN and failed.attempts == 1
            sent = [r for _, r in server.requests]
            starts = [pb.StartActivityRequest.FromString(r.message) for r in sent if r.method.endswith("StartActivity")]
            assert len(starts) == 2
            assert starts[0].idempotency_key and starts[0].idempotency_key == starts[1].idempotency_key
            assert starts[0] == starts[1]
            assert sum(1 for r in sent if r.method.endswith("CreateChannel")) == 1

    run(main())


def outcome_unknown(connection: FakeConnection, request: Request) -> None:
    details = pb.ErrorDetails(reason="OutcomeUnknown").SerializeToString()
    connection.error(request.request_id, Status.UNAVAILABLE, "the store's commit got no answer", details)


def test_outcome_unknown_resends_a_start_with_its_key_but_never_a_create_app() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        seen = 0
        while True:
            request = await connection.next()
            if request is None:
                return
            if request.method.endswith("StartActivity"):
                seen += 1
                if seen == 1:
                    outcome_unknown(connection, request)
                else:
                    connection.reply(request.request_id, pb.StartActivityReply(replayed=True).SerializeToString())
            else:
                outcome_unknown(connection, request)

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                reply = await c.start_activity(app_id="a", activity_id="x", attributes_type="T", attributes_json="{}",
                                               content_state_json="{}", targets=pb.Targets(all_devices=True),
                                               idempotency_key="my-key")
                assert reply.replayed
                with pytest.raises(liverelay.OutcomeUnknownError) as info:
                    await c.create_app(app_id="new", bundle_id="com.example.new")
            error = info.value
            assert error.processing is Processing.UNKNOWN and error.attempts == 1 and error.reason == "OutcomeUnknown"
            keys = [pb.StartActivityRequest.FromString(r.message).idempotency_key
                    for _, r in server.requests if r.method.endswith("StartActivity")]
            assert keys == ["my-key", "my-key"]
            assert sum(1 for _, r in server.requests if r.method.endswith("CreateApp")) == 1

    run(main())


def test_resending_is_bounded_and_the_error_carries_the_key() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        while True:
            request = await connection.next()
            if request is None:
                return
            outcome_unknown(connection, request)

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                with pytest.raises(liverelay.OutcomeUnknownError) as info:
                    await c.end_activity(app_id="a", activity_id="x")
            keys = {pb.EndActivityRequest.FromString(r.message).idempotency_key
                    for _, r in server.requests}
            assert len(server.requests) == 3  # RetryPolicy(max_attempts=3)
            assert info.value.attempts == 3
            assert keys == {info.value.idempotency_key}
            assert info.value.method == "/liverelay.v1.LiveRelay/EndActivity"

    run(main())


def test_unavailable_answer_is_resent_after_its_retry_after() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        answered = 0
        while True:
            request = await connection.next()
            if request is None:
                return
            answered += 1
            if answered == 1:
                details = pb.ErrorDetails(reason="StoreUnavailable", retry_after_ms=5).SerializeToString()
                connection.error(request.request_id, Status.UNAVAILABLE, "store busy", details)
            else:
                connection.reply(request.request_id, admin_pb.AppReply(app=admin_pb.App(app_id="new")).SerializeToString())

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                app = await c.create_app(app_id="new", bundle_id="com.example.new")
                assert app.app_id == "new"
                assert c.stats().retries == 1
            assert len(server.requests) == 2

    run(main())


def test_too_many_connections_is_retried_with_backoff_and_is_not_final() -> None:
    refuse = {"on": True}

    async def handler(connection: FakeConnection) -> None:
        await connection.hello()
        if refuse["on"]:
            connection.goaway(0, wire.GoAwayCode.TOO_MANY_CONNECTIONS, "API key abc has 2 connections, the limit is 2")
            await connection.close()
            return
        connection.send(wire.encode_welcome({2: 100}))
        await serve_forever(connection)

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                with pytest.raises(liverelay.TooManyConnectionsError) as info:
                    await c.ping(b"x")
                assert info.value.processing is Processing.NOT_PROCESSED and info.value.attempts == 3
                assert "the limit is 2" in str(info.value)
                assert len(server.connections) == 3
                assert c.fatal_error is None
                refuse["on"] = False
                assert (await c.ping(b"after")).payload == b"after"

    run(main())


def test_refused_key_is_final_and_never_shown() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.hello()
        connection.goaway(0, wire.GoAwayCode.UNAUTHENTICATED, "unknown API key id")
        await connection.close()

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server, connections=2) as c:
                with pytest.raises(liverelay.ApiKeyRefusedError) as first:
                    await c.ping()
                with pytest.raises(liverelay.ApiKeyRefusedError):
                    await c.ping()
                assert isinstance(c.fatal_error, liverelay.UnauthenticatedError)
            assert first.value.status is Status.UNAUTHENTICATED
            assert "lrk_test_secret" not in str(first.value) and "lrk_test_secret" not in repr(first.value)
            assert server.connections[0].api_key == b"lrk_test_secret_0123456789"
            # Both slots tried once; nothing after the refusal.
            assert len(server.connections) <= 2

    run(main())


def test_revocation_on_an_open_connection_answers_accepted_calls_and_fails_the_rest() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        first = await connection.next()
        second = await connection.next()
        assert first is not None and second is not None
        connection.goaway(first.request_id, wire.GoAwayCode.UNAUTHENTICATED, "API key revoked")
        connection.reply(first.request_id, pb.PingReply(payload=b"one").SerializeToString())
        await connection.close()

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                one, two = await asyncio.gather(c.ping(b"one"), c.ping(b"two"), return_exceptions=True)
                assert isinstance(one, pb.PingReply) and one.payload == b"one"
                assert isinstance(two, liverelay.ApiKeyRevokedError)
                assert two.processing is Processing.NOT_PROCESSED
                with pytest.raises(liverelay.ApiKeyRevokedError):
                    await c.ping(b"three")
            assert len(server.connections) == 1

    run(main())


def test_keepalive_declares_a_silent_connection_dead() -> None:
    async def handler(connection: FakeConnection) -> None:
        connection.server.answer_pings = False
        await connection.handshake()
        await connection.next()
        while await connection.read_frame() is not None:  # reads PINGs, never answers
            pass

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server, keepalive_interval=0.2, keepalive_timeout=0.2, default_timeout=30) as c:
                with pytest.raises(liverelay.UnavailableError) as info:
                    await c.create_channel(app_id="a", environment=pb.ENVIRONMENT_SANDBOX,
                                           storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE)
                assert "no PONG" in str(info.value)
                assert info.value.processing is Processing.UNKNOWN
                assert c.stats().keepalive_pings_sent >= 1

    run(main())


def test_deadline_is_sent_enforced_locally_and_cancelled() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        held = await connection.next()
        assert held is not None
        await connection.until(lambda: held.request_id in connection.cancels)
        connection.error(held.request_id, Status.CANCELLED, "cancelled")  # the late reply
        await serve_forever(connection)

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                with pytest.raises(liverelay.DeadlineExceededError) as info:
                    await c.ping(b"slow", timeout=0.3)
                assert info.value.local and info.value.processing is Processing.UNKNOWN
                request = server.connections[0].requests[0]
                assert 0 < request.timeout_ms <= 300
                await server.wait_until(lambda: server.connections[0].cancels == [request.request_id])
                # The late CANCELLED reply is dropped and frees the id; the connection goes on.
                # The late reply was written before this one's: both arrived in order.
                assert (await c.ping(b"next")).payload == b"next"
                stats = c.stats()
                assert stats.late_replies_dropped == 1
                assert stats.cancels_sent == 1 and stats.in_flight == 0 and stats.connections_opened == 1
                none = await c.ping(b"no deadline", timeout=float("inf"))
                assert none.payload == b"no deadline"
                assert server.connections[0].requests[-1].timeout_ms == 0

    run(main())


def test_cancelling_the_task_sends_cancel() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        held = await connection.next()
        assert held is not None
        await connection.until(lambda: held.request_id in connection.cancels)
        connection.error(held.request_id, Status.CANCELLED, "cancelled")
        await serve_forever(connection)

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                task = asyncio.ensure_future(c.ping(b"never"))
                await server.wait_until(lambda: len(server.requests) == 1)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await server.wait_until(lambda: server.connections[0].cancels == [1])
                assert (await c.ping(b"after")).payload == b"after"

    run(main())


def test_the_servers_in_flight_limit_is_respected() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake({1: 1048576, 2: 2})
        pending: List[Request] = []
        while True:
            request = await connection.next()
            if request is None:
                return
            pending.append(request)
            connection.server.most = max(getattr(connection.server, "most", 0), len(pending))  # type: ignore[attr-defined]
            if len(pending) == 2:
                for held in pending:
                    connection.reply(held.request_id, pb.PingReply(payload=ping_payload(held)).SerializeToString())
                pending.clear()

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                payloads = [b"%d" % i for i in range(20)]
                replies = await asyncio.gather(*(c.ping(p) for p in payloads))
                assert [r.payload for r in replies] == payloads
                assert c.stats().peak_in_flight == 2
            assert server.most == 2  # type: ignore[attr-defined]

    run(main())


def test_a_reply_for_an_unknown_id_is_a_protocol_error() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        await connection.next()
        connection.reply(99, b"")
        while await connection.next() is not None:
            pass

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with client(server) as c:
                with pytest.raises(liverelay.ProtocolError) as info:
                    await c.create_channel(app_id="a", environment=pb.ENVIRONMENT_SANDBOX,
                                           storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE)
                assert info.value.status is Status.INTERNAL and "request id 99" in str(info.value)
                await server.wait_until(lambda: bool(server.connections[0].goaways))
            assert server.connections[0].goaways[0].code == wire.GoAwayCode.PROTOCOL_ERROR

    run(main())


def test_close_sends_goaway_and_lets_outstanding_calls_finish() -> None:
    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        held = await connection.next()
        assert held is not None
        await connection.until(lambda: bool(connection.goaways))
        connection.reply(held.request_id, pb.PingReply(payload=b"finished").SerializeToString())
        while await connection.read_frame() is not None:
            pass

    async def main() -> None:
        async with FakeServer(handler) as server:
            c = client(server)
            call = asyncio.ensure_future(c.ping(b"x"))
            await server.wait_until(lambda: len(server.requests) == 1)
            await c.close()
            assert (await call).payload == b"finished"
            goaway = server.connections[0].goaways[0]
            assert (goaway.code, goaway.last_request_id) == (wire.GoAwayCode.NO_ERROR, 0)
            with pytest.raises(liverelay.ClientClosedError):
                await c.ping()

    run(main())


def test_no_server_is_a_connect_error_after_bounded_attempts() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        c = liverelay.AsyncClient("127.0.0.1", port, api_key="k", insecure_plaintext=True, reconnect_backoff=FAST,
                                  retry=liverelay.RetryPolicy(max_attempts=3, backoff=FAST))
        async with c:
            with pytest.raises(liverelay.ConnectError) as info:
                await c.ping()
        assert info.value.attempts == 3 and "cannot connect" in str(info.value)
        assert info.value.processing is Processing.NOT_PROCESSED

    run(main())


def test_sync_client_against_the_scripted_server() -> None:
    async def main() -> None:
        async with FakeServer(serve_forever_after_handshake) as server:
            def blocking() -> List[bytes]:
                with liverelay.Client("127.0.0.1", server.port, api_key="k", insecure_plaintext=True) as c:
                    return [c.ping(b"%d" % i).payload for i in range(5)]

            assert await asyncio.get_running_loop().run_in_executor(None, blocking) == [b"%d" % i for i in range(5)]

    run(main())


async def serve_forever_after_handshake(connection: FakeConnection) -> None:
    await connection.handshake()
    await serve_forever(connection)
