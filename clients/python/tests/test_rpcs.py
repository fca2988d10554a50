"""Every RPC of liverelay.v1 succeeds against a real server, through both clients."""

from __future__ import annotations

import asyncio

import pytest
from conftest import Dev
from harness import run, token, uid

import liverelay
from liverelay import pb

ATTRS = "MatchAttributes"


def register_start_token(client: liverelay.Client, app: str) -> str:
    t = token()
    reply = client.register_token(app_id=app, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                  environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS, device_id=uid("device"))
    assert reply.result == pb.REGISTER_TOKEN_RESULT_CREATED
    return t


def test_ping(dev: Dev) -> None:
    with dev.client() as client:
        reply = client.ping(b"\x00\x01hello\xff")
        assert reply.payload == b"\x00\x01hello\xff"
        assert reply.server_time_ms > 1_600_000_000_000
        assert reply.server_version


def test_register_token_lifecycle(dev: Dev) -> None:
    t1, t2, device, user = token(), token(), uid("device"), uid("user")
    common = dict(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, attributes_type=ATTRS, device_id=device,
                  external_user_id=user, environment=pb.ENVIRONMENT_SANDBOX)
    with dev.client() as client:
        assert client.register_token(token=t1, **common).result == pb.REGISTER_TOKEN_RESULT_CREATED  # type: ignore[arg-type]
        assert client.register_token(token=t1, **common).result == pb.REGISTER_TOKEN_RESULT_UNCHANGED  # type: ignore[arg-type]
        rotated = client.register_token(token=t2, **common)  # type: ignore[arg-type]
        assert (rotated.result, rotated.replaced_token) == (pb.REGISTER_TOKEN_RESULT_ROTATED, t1)
        assert client.register_token(token=t2, remove=True, **common).result == pb.REGISTER_TOKEN_RESULT_REMOVED  # type: ignore[arg-type]
        assert client.register_token(token=t2, remove=True, **common).result == pb.REGISTER_TOKEN_RESULT_NOT_FOUND  # type: ignore[arg-type]
        # Enum names are accepted as well as values.
        by_name = client.register_token(app_id=dev.app_id, kind="TOKEN_KIND_UPDATE", token=token(),
                                        environment="ENVIRONMENT_SANDBOX", activity_id=uid("act"))
        assert by_name.result == pb.REGISTER_TOKEN_RESULT_CREATED


def test_update_token_lifecycle(dev: Dev) -> None:
    """An update token is per activity and device: a new token for the same pair rotates the old one."""
    activity, device, t1, t2 = uid("act"), uid("device"), token(), token()
    common = dict(app_id=dev.app_id, kind=pb.TOKEN_KIND_UPDATE, activity_id=activity, device_id=device,
                  environment=pb.ENVIRONMENT_SANDBOX)
    with dev.client() as client:
        assert client.register_token(token=t1, **common).result == pb.REGISTER_TOKEN_RESULT_CREATED  # type: ignore[arg-type]
        rotated = client.register_token(token=t2, **common)  # type: ignore[arg-type]
        assert (rotated.result, rotated.replaced_token) == (pb.REGISTER_TOKEN_RESULT_ROTATED, t1)
        assert client.register_token(token=t2, remove=True, **common).result == pb.REGISTER_TOKEN_RESULT_REMOVED  # type: ignore[arg-type]


def test_start_by_external_user_id_reaches_the_users_token(dev: Dev) -> None:
    user = uid("user")
    with dev.client() as client:
        client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=token(),
                              environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS, device_id=uid("device"),
                              external_user_id=user)
        reply = client.start_activity(app_id=dev.app_id, activity_id=uid("act"), attributes_type=ATTRS,
                                      attributes_json={}, content_state_json={},
                                      targets=pb.Targets(external_user_ids=[user]))
    assert reply.summary.targeted == 1 and list(reply.summary.unresolved) == []


def test_activity_lifecycle_start_update_end(dev: Dev) -> None:
    with dev.client() as client:
        t = register_start_token(client, dev.app_id)
        activity = uid("act")
        started = client.start_activity(
            app_id=dev.app_id, activity_id=activity, attributes_type=ATTRS, attributes_json={"home": "A", "away": "B"},
            content_state_json={"score": "0-0"}, targets=pb.Targets(push_to_start_tokens=[t]),
            alert=pb.Alert(title="Kick-off", body="A vs B"), wait_for_delivery=True,
        )
        assert started.activity_id == activity
        assert not started.replayed
        assert (started.summary.targeted, started.summary.delivered, started.summary.complete) == (1, 1, True)
        assert started.state in (pb.ACTIVITY_STATE_STARTING, pb.ACTIVITY_STATE_ACTIVE)
        client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_UPDATE, token=token(),
                              environment=pb.ENVIRONMENT_SANDBOX, activity_id=activity, device_id=uid("device"))
        updated = client.update_activity(app_id=dev.app_id, activity_id=activity, content_state_json='{"score":"1-0"}',
                                         priority=pb.PRIORITY_LOW, relevance_score=0.0, stale_date=2_000_000_000)
        assert updated.timestamp >= started.timestamp and not updated.replayed
        ended = client.end_activity(app_id=dev.app_id, activity_id=activity, content_state_json={"score": "2-1"})
        assert ended.state == pb.ACTIVITY_STATE_ENDED


def test_given_idempotency_key_replays_the_first_reply(dev: Dev) -> None:
    with dev.client() as client:
        t = register_start_token(client, dev.app_id)
        request = dict(app_id=dev.app_id, activity_id=uid("act"), attributes_type=ATTRS, attributes_json={},
                       content_state_json={"s": 0}, targets=pb.Targets(push_to_start_tokens=[t]),
                       idempotency_key=uid("key"))
        first = client.start_activity(**request)  # type: ignore[arg-type]
        again = client.start_activity(**request)  # type: ignore[arg-type]
        assert (first.replayed, again.replayed) == (False, True)
        assert (again.activity_id, again.timestamp) == (first.activity_id, first.timestamp)


def test_each_call_gets_a_fresh_idempotency_key(dev: Dev) -> None:
    """Two updates without a key are two updates, not a replay of the first."""
    with dev.client() as client:
        t = register_start_token(client, dev.app_id)
        activity = uid("act")
        client.start_activity(app_id=dev.app_id, activity_id=activity, attributes_type=ATTRS, attributes_json={},
                              content_state_json={}, targets=pb.Targets(push_to_start_tokens=[t]))
        first = client.update_activity(app_id=dev.app_id, activity_id=activity, content_state_json={"n": 1})
        second = client.update_activity(app_id=dev.app_id, activity_id=activity, content_state_json={"n": 1})
        assert not first.replayed and not second.replayed


def test_start_through_an_unregistered_user_reports_it_unresolved(dev: Dev) -> None:
    nobody = uid("nobody")
    with dev.client() as client:
        reply = client.start_activity(app_id=dev.app_id, activity_id=uid("act"), attributes_type=ATTRS,
                                      attributes_json={}, content_state_json={},
                                      targets=pb.Targets(external_user_ids=[nobody]))
    assert reply.summary.targeted == 0
    (unresolved,) = reply.summary.unresolved
    assert (unresolved.kind, unresolved.value) == (pb.TARGET_KIND_EXTERNAL_USER_ID, nobody)
    assert unresolved.reason


def test_broadcast_channels(dev: Dev) -> None:
    with dev.client() as client:
        channel = client.create_channel(app_id=dev.app_id, environment=pb.ENVIRONMENT_SANDBOX,
                                        storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE)
        assert channel.channel_id and channel.app_id == dev.app_id
        assert channel.storage_policy == pb.CHANNEL_STORAGE_POLICY_NO_STORAGE
        other = client.create_channel(app_id=dev.app_id, environment=pb.ENVIRONMENT_SANDBOX,
                                      storage_policy=pb.CHANNEL_STORAGE_POLICY_MOST_RECENT_MESSAGE)
        page = client.list_channels(app_id=dev.app_id, environment=pb.ENVIRONMENT_SANDBOX, page_size=1)
        assert len(page.channels) == 1 and page.next_page_token
        listed = {c.channel_id for c in client.iter_channels(app_id=dev.app_id, page_size=1)}
        assert {channel.channel_id, other.channel_id} <= listed
        t = register_start_token(client, dev.app_id)
        activity = uid("act")
        client.start_activity(app_id=dev.app_id, activity_id=activity, attributes_type=ATTRS, attributes_json={},
                              content_state_json={}, targets=pb.Targets(push_to_start_tokens=[t]),
                              channel_id=channel.channel_id, input_push_token=False)
        sent = client.update_activity(app_id=dev.app_id, activity_id=activity, content_state_json={"n": 1},
                                      channel_id=channel.channel_id, channel_only=True, wait_for_delivery=True)
        assert (sent.summary.targeted, sent.summary.delivered, sent.summary.complete) == (1, 1, True)
        with pytest.raises(liverelay.NotFoundError) as info:
            client.update_activity(app_id=dev.app_id, activity_id=activity, content_state_json={},
                                   channel_id="bm8tc3VjaC1jaGFubmVs", channel_only=True)
        assert info.value.reason == "ChannelNotFound"
        assert isinstance(client.delete_channel(app_id=dev.app_id, channel_id=channel.channel_id),
                          pb.DeleteChannelReply)
        assert channel.channel_id not in {c.channel_id for c in client.iter_channels(app_id=dev.app_id)}
        with pytest.raises(liverelay.NotFoundError):
            client.delete_channel(app_id=dev.app_id, channel_id=channel.channel_id)
        client.delete_channel(app_id=dev.app_id, channel_id=other.channel_id)


def test_async_client_every_v1_rpc(dev: Dev) -> None:
    async def main() -> None:
        async with dev.server.async_client(dev.api_key) as client:
            assert (await client.ping(b"a")).payload == b"a"
            t = token()
            await client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                        environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
            activity = uid("act")
            started = await client.start_activity(
                app_id=dev.app_id, activity_id=activity, attributes_type=ATTRS, attributes_json={},
                content_state_json={}, targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True)
            assert started.summary.delivered == 1
            await client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_UPDATE, token=token(),
                                        environment=pb.ENVIRONMENT_SANDBOX, activity_id=activity)
            updated = await client.update_activity(app_id=dev.app_id, activity_id=activity, content_state_json={"n": 2},
                                                   wait_for_delivery=True)
            assert updated.summary.delivered == 1
            ended = await client.end_activity(app_id=dev.app_id, activity_id=activity, wait_for_delivery=True)
            assert ended.state == pb.ACTIVITY_STATE_ENDED
            channel = await client.create_channel(app_id=dev.app_id, environment=pb.ENVIRONMENT_SANDBOX,
                                                  storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE)
            ids = [c.channel_id async for c in client.iter_channels(app_id=dev.app_id)]
            assert channel.channel_id in ids
            page = await client.list_channels(app_id=dev.app_id)
            assert page.channels
            await client.delete_channel(app_id=dev.app_id, channel_id=channel.channel_id)
            # The generic call, with a message built by hand.
            reply = await client.call("/liverelay.v1.LiveRelay/Ping", pb.PingRequest(payload=b"raw"), pb.PingReply)
            assert reply.payload == b"raw"
            stats = client.stats()
            assert stats.connections_opened >= 1 and stats.requests_sent >= 11

    run(main())


def test_tls_verification_failure_is_reported(dev: Dev) -> None:
    """The dev certificate is not in the system's trust store: the connect error says so."""
    with liverelay.Client("127.0.0.1", dev.server.port, api_key=dev.api_key,
                          retry=liverelay.RetryPolicy(max_attempts=1)) as client:
        with pytest.raises(liverelay.ConnectError) as info:
            client.ping()
    assert "certificate" in str(info.value).lower()
    assert dev.api_key not in str(info.value)


def test_ssl_context_and_server_name(dev: Dev) -> None:
    context = liverelay.TLSConfig(ca_file=dev.server.cert).build_context()
    with liverelay.Client("127.0.0.1", dev.server.port, api_key=dev.api_key, tls=context) as client:
        assert client.ping(b"ctx").payload == b"ctx"
    # The certificate names localhost too; SNI and the check use server_name.
    with liverelay.Client("127.0.0.1", dev.server.port, api_key=dev.api_key,
                          tls=liverelay.TLSConfig(ca_file=dev.server.cert, server_name="localhost")) as client:
        assert client.ping(b"sni").payload == b"sni"
    with liverelay.Client("127.0.0.1", dev.server.port, api_key=dev.api_key,
                          retry=liverelay.RetryPolicy(max_attempts=1),
                          tls=liverelay.TLSConfig(ca_file=dev.server.cert, server_name="not-the-host.example")) as client:
        with pytest.raises(liverelay.ConnectError):
            client.ping()


def test_client_reprs_hide_the_key(dev: Dev) -> None:
    async def main() -> None:
        client = dev.server.async_client(dev.api_key)
        assert dev.api_key not in repr(client)
        assert dev.api_key not in repr(client._config)
        await client.close()

    run(main())
    with dev.client() as client:
        assert dev.api_key not in repr(client)


def test_async_client_is_bound_to_one_loop(dev: Dev) -> None:
    client = dev.server.async_client(dev.api_key)
    asyncio.run(client.ping())
    with pytest.raises(RuntimeError, match="event loop"):
        asyncio.run(client.ping())
