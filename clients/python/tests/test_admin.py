"""Every RPC of the admin API (liverelay.admin.v1) with an admin key."""

from __future__ import annotations

import os

import pytest
from conftest import V1_METHODS, Dev
from fake_server import FakeConnection, FakeServer
from harness import eventually_sync, key_accepted, run, uid

import liverelay
from liverelay import admin_pb, pb

FAST = liverelay.Backoff(initial=0.001, maximum=0.01, jitter=0)


def test_apps_credentials_keys_and_stats(dev: Dev) -> None:
    app = uid("orders").replace("-", ".")
    with dev.admin() as admin:
        created = admin.create_app(app_id=app, bundle_id="com.example.orders", queue_capacity=1000, weight=2,
                                   quotas=admin_pb.Quotas(calls_per_second=50.0, burst=100))
        assert (created.app_id, created.bundle_id, created.enabled, created.owner) == (
            app, "com.example.orders", True, "admin")
        assert (created.queue_capacity, created.weight, created.quotas.burst) == (1000, 2, 100)
        assert not created.HasField("credentials")

        assert admin.get_app(app_id=app).bundle_id == "com.example.orders"
        updated = admin.update_app(app_id=app, weight=3, max_push_lifetime_s=600)
        assert (updated.weight, updated.max_push_lifetime_s, updated.queue_capacity) == (3, 600, 1000)

        with open(os.path.join(dev.server.data_dir, "apns-dev-key.p8")) as key_file:
            with_key = admin.put_apns_credentials(app_id=app, team_id="ABCDE12345", key_id="KEY1234567",
                                                  private_key_pem=key_file.read())
        info = with_key.credentials
        assert (info.team_id, info.key_id, info.endpoint, info.key_source) == (
            "ABCDE12345", "KEY1234567", "apple", "registry")

        listed = [a.app_id for a in admin.iter_apps(page_size=1)]
        assert app in listed and dev.app_id in listed and listed == sorted(listed)
        first_page = admin.list_apps(page_size=1)
        assert len(first_page.apps) == 1 and first_page.next_page_token

        tenant = admin.create_api_key(app_ids=[app], allowed_methods=["Ping", "RegisterToken"], label="orders backend")
        assert tenant.secret.startswith(f"lrk_{tenant.key.key_id}_")
        assert tenant.secret not in repr(tenant)
        assert (list(tenant.key.app_ids), sorted(tenant.key.allowed_methods), tenant.key.label) == (
            [app], ["Ping", "RegisterToken"], "orders backend")
        keys = {k.key_id for k in admin.iter_api_keys(app_id=app, page_size=1)}
        assert tenant.key.key_id in keys
        assert admin.list_api_keys(app_id=app).keys

        # The node's own view: its queue for the app exists once it has applied the change.
        eventually_sync(lambda: admin.get_app_stats(app_id=app).queue_capacity == 1000, what="the app's queue")
        assert admin.get_app_stats(app_id=app).app_id == app

        disabled = admin.disable_app(app_id=app)
        assert not disabled.enabled
        assert app not in [a.app_id for a in admin.iter_apps()]
        assert app in [a.app_id for a in admin.iter_apps(include_disabled=True)]
        assert admin.update_app(app_id=app, enabled=True).enabled

        revoked = admin.revoke_api_key(key_id=tenant.key.key_id)
        assert revoked.revoked_at_ms > 0
        assert tenant.key.key_id not in {k.key_id for k in admin.iter_api_keys(app_id=app)}
        assert tenant.key.key_id in {k.key_id for k in admin.iter_api_keys(app_id=app, include_revoked=True)}


def test_admin_key_made_through_the_api_works(dev: Dev) -> None:
    with dev.admin() as admin:
        second = admin.create_api_key(admin=True, label="second admin")
    assert second.key.admin
    key_accepted(dev.server, second.secret, lambda c: c.list_apps(page_size=1))
    with dev.server.client(second.secret) as other:
        assert other.get_app(app_id=dev.app_id).app_id == dev.app_id


def test_async_admin(dev: Dev) -> None:
    async def main() -> None:
        async with dev.server.async_client(dev.admin_key) as admin:
            app = uid("async").replace("-", ".")
            await admin.create_app(app_id=app, bundle_id="com.example.async")
            assert (await admin.get_app(app_id=app)).bundle_id == "com.example.async"
            assert app in [a.app_id async for a in admin.iter_apps()]
            key = await admin.create_api_key(app_ids=[app], allowed_methods=V1_METHODS)
            assert key.key.key_id in [k.key_id async for k in admin.iter_api_keys(app_id=app)]
            assert (await admin.list_apps(page_size=1)).apps
            assert (await admin.list_api_keys()).keys
            assert (await admin.get_app_stats(app_id=app)).app_id == app
            assert (await admin.update_app(app_id=app, weight=5)).weight == 5
            assert not (await admin.disable_app(app_id=app)).enabled
            assert (await admin.revoke_api_key(key_id=key.key.key_id)).revoked_at_ms > 0
            with open(os.path.join(dev.server.data_dir, "apns-dev-key.p8"), "rb") as key_file:
                app_with_key = await admin.put_apns_credentials(
                    app_id=app, team_id="ABCDE12345", key_id="KEY1234567", private_key_pem=key_file.read())
            assert app_with_key.credentials.key_id == "KEY1234567"

    run(main())


def test_webhook_methods_through_a_scripted_server() -> None:
    """Each webhook method's path, request and reply; the minted secret stays out of repr, and
    only get_webhook (a read) is resent after a lost connection."""
    hook = admin_pb.Webhook(app_id="dev.app", url="https://hooks.example.com/in",
                            event_kinds=["EVENT_KIND_PUSH_FAILED"], state="delivering", delivered_cursor=7)
    secret = "whsec_" + "ab" * 32

    async def handler(connection: FakeConnection) -> None:
        await connection.handshake()
        while True:
            request = await connection.next()
            if request is None:
                return
            method = request.method.rsplit("/", 1)[1]
            if method == "PutWebhook":
                sent = admin_pb.PutWebhookRequest.FromString(request.message)
                if sent.url.endswith("/drop"):
                    return await connection.close()
                reply = admin_pb.PutWebhookReply(webhook=hook)
                if sent.rotate_secret:
                    reply.signing_secret = secret
                connection.reply(request.request_id, reply.SerializeToString())
            elif method == "GetWebhook" and connection.index == 0 and len(connection.requests) > 4:
                return await connection.close()
            else:
                connection.reply(request.request_id, admin_pb.WebhookReply(webhook=hook).SerializeToString())

    async def main() -> None:
        async with FakeServer(handler) as server:
            async with liverelay.AsyncClient("127.0.0.1", server.port, api_key="lrk_test_secret", insecure_plaintext=True,
                                             connections=1, reconnect_backoff=FAST,
                                             retry=liverelay.RetryPolicy(max_attempts=3, backoff=FAST)) as admin:
                minted = await admin.put_webhook(app_id="dev.app", url="https://hooks.example.com/in",
                                                 event_kinds=[pb.EVENT_KIND_PUSH_FAILED, "EVENT_KIND_CALL_SETTLED"],
                                                 rotate_secret=True)
                assert (minted.webhook, minted.signing_secret) == (hook, secret)
                assert secret not in repr(minted)
                kept = await admin.put_webhook(app_id="dev.app", url="https://hooks.example.com/in")
                assert (kept.webhook, kept.signing_secret) == (hook, None)
                assert await admin.get_webhook(app_id="dev.app") == hook
                assert await admin.delete_webhook(app_id="dev.app") == hook
                assert await admin.reset_webhook(app_id="dev.app") == hook
                # The fifth request and on: the first connection drops a GetWebhook unanswered.
                assert await admin.get_webhook(app_id="dev.app") == hook
                with pytest.raises(liverelay.UnavailableError):
                    await admin.put_webhook(app_id="dev.app", url="https://hooks.example.com/drop")
            sent = [(i, r.method.rsplit("/", 1)[1], r.message) for i, r in server.requests]
            assert [m for _, m, _ in sent] == [
                "PutWebhook", "PutWebhook", "GetWebhook", "DeleteWebhook", "ResetWebhook", "GetWebhook", "GetWebhook",
                "PutWebhook",
            ]
            first = admin_pb.PutWebhookRequest.FromString(sent[0][2])
            assert (first.app_id, first.url, list(first.event_kinds), first.rotate_secret) == (
                "dev.app", "https://hooks.example.com/in", ["EVENT_KIND_PUSH_FAILED", "EVENT_KIND_CALL_SETTLED"], True)
            assert not admin_pb.PutWebhookRequest.FromString(sent[1][2]).HasField("rotate_secret")
            for _, method, message in sent[2:5]:
                assert getattr(admin_pb, method + "Request").FromString(message).app_id == "dev.app"
            assert [i for i, _, _ in sent[5:7]] == [0, 1]

    run(main())
