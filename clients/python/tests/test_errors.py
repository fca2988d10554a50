"""Each error status the server gives for bad input, with its reason, field violations and
retry-after, raised as the matching exception class."""

from __future__ import annotations

from typing import Callable, Iterator

import pytest
from conftest import V1_METHODS, Dev
from harness import key_accepted, raised_eventually, token, uid

import liverelay
from liverelay import admin_pb, pb
from liverelay.errors import Processing, Status

ATTRS = "MatchAttributes"


def expect(error_type: type, status: Status, call: Callable[[], object], reason: str = "") -> liverelay.RpcError:
    with pytest.raises(error_type) as info:
        call()
    error = info.value
    assert isinstance(error, liverelay.RpcError)
    assert error.status is status, str(error)
    assert not error.local and error.processing in (Processing.ANSWERED, Processing.NOT_PROCESSED)
    if reason:
        assert error.reason == reason, str(error)
    return error


@pytest.fixture(scope="module")
def client(dev: Dev) -> Iterator[liverelay.Client]:
    with dev.client() as c:
        yield c


def start(client: liverelay.Client, app: str, **overrides: object) -> pb.StartActivityReply:
    request: dict = dict(app_id=app, activity_id=uid("act"), attributes_type=ATTRS, attributes_json={},
                         content_state_json={}, targets=pb.Targets(push_to_start_tokens=[token()]))
    request.update(overrides)
    return client.start_activity(**request)


def test_invalid_argument_names_each_field(client: liverelay.Client, dev: Dev) -> None:
    error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT, lambda: client.register_token(
        app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token="NOT-HEX", environment=pb.ENVIRONMENT_SANDBOX,
        attributes_type=ATTRS))
    assert error.reason == "InvalidField"
    assert "token" in error.violations and "16...512" in error.violations["token"]
    error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT, lambda: start(
        client, dev.app_id, targets=pb.Targets(push_to_start_tokens=[token(), "ABCDEF12"])))
    assert "targets.push_to_start_tokens[1]" in error.violations
    assert error.violations["targets.push_to_start_tokens[1]"]
    error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT,
                   lambda: start(client, dev.app_id, content_state_json="[1, 2]"))
    assert "content_state_json" in error.violations
    error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT, lambda: client.update_activity(
        app_id=dev.app_id, activity_id=uid("act"), content_state_json={}, channel_only=True))
    assert "channel_only" in error.violations
    error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT,
                   lambda: client.list_channels(app_id=dev.app_id, page_size=1001))
    assert "page_size" in error.violations
    assert "page_size" in str(error)  # the message and violations are readable


def test_channel_fields_are_validated(client: liverelay.Client, dev: Dev) -> None:
    """Checked when the request is decoded, before any service sees it (docs/PROTOCOL.md section 16)."""
    cases = [
        ("channel_id", lambda: client.delete_channel(app_id=dev.app_id, channel_id="not base64!")),
        ("environment", lambda: client.create_channel(app_id=dev.app_id, environment=0,  # type: ignore[arg-type]
                                                      storage_policy=pb.CHANNEL_STORAGE_POLICY_NO_STORAGE)),
        ("storage_policy", lambda: client.create_channel(app_id=dev.app_id, environment=pb.ENVIRONMENT_SANDBOX,
                                                         storage_policy=0)),  # type: ignore[arg-type]
        # Without a channel to carry the updates, the activity needs its update token.
        ("input_push_token", lambda: start(client, dev.app_id, input_push_token=False)),
    ]
    for field, call in cases:
        error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT, call)
        assert field in error.violations, (field, str(error))
    assert client.ping(b"ok").payload == b"ok"


def test_payload_too_large(client: liverelay.Client, dev: Dev) -> None:
    t = token()
    client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                          environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
    # Each part is within its own limit; together they are above APNs's 4,096 bytes.
    expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT, lambda: start(
        client, dev.app_id, content_state_json={"text": "x" * 3000}, targets=pb.Targets(push_to_start_tokens=[t]),
        alert=pb.Alert(title="t" * 1000, body="b" * 1000)), reason="PayloadTooLarge")


def test_not_found(client: liverelay.Client, dev: Dev) -> None:
    expect(liverelay.NotFoundError, Status.NOT_FOUND, lambda: client.update_activity(
        app_id=dev.app_id, activity_id=uid("never-started"), content_state_json={}), reason="ActivityNotFound")
    expect(liverelay.NotFoundError, Status.NOT_FOUND, lambda: client.end_activity(
        app_id=dev.app_id, activity_id=uid("never-started")), reason="ActivityNotFound")
    expect(liverelay.NotFoundError, Status.NOT_FOUND,
           lambda: client.delete_channel(app_id=dev.app_id, channel_id="bm8tc3VjaC1jaGFubmVs"))


def test_already_exists_and_failed_preconditions(client: liverelay.Client, dev: Dev) -> None:
    t = token()
    client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                          environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
    activity, key = uid("act"), uid("key")
    first = start(client, dev.app_id, activity_id=activity, targets=pb.Targets(push_to_start_tokens=[t]),
                  idempotency_key=key)
    assert not first.replayed
    expect(liverelay.AlreadyExistsError, Status.ALREADY_EXISTS,
           lambda: start(client, dev.app_id, activity_id=activity, targets=pb.Targets(push_to_start_tokens=[t])),
           reason="ActivityAlreadyExists")
    expect(liverelay.FailedPreconditionError, Status.FAILED_PRECONDITION,
           lambda: start(client, dev.app_id, activity_id=activity, targets=pb.Targets(push_to_start_tokens=[t]),
                         idempotency_key=key, content_state_json={"different": True}),
           reason="IdempotencyKeyReused")
    client.end_activity(app_id=dev.app_id, activity_id=activity)
    expect(liverelay.FailedPreconditionError, Status.FAILED_PRECONDITION, lambda: client.update_activity(
        app_id=dev.app_id, activity_id=activity, content_state_json={}), reason="ActivityEnded")
    expect(liverelay.FailedPreconditionError, Status.FAILED_PRECONDITION,
           lambda: client.end_activity(app_id=dev.app_id, activity_id=activity), reason="ActivityEnded")


def test_permission_denied(client: liverelay.Client, dev: Dev) -> None:
    # An app this key may not act for, whether or not it exists.
    expect(liverelay.PermissionDeniedError, Status.PERMISSION_DENIED, lambda: client.register_token(
        app_id="someone.else", kind=pb.TOKEN_KIND_PUSH_TO_START, token=token(),
        environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS))
    # A tenant key calls no admin method, an admin key no tenant method.
    expect(liverelay.PermissionDeniedError, Status.PERMISSION_DENIED, lambda: client.list_apps())
    with dev.admin() as admin:
        expect(liverelay.PermissionDeniedError, Status.PERMISSION_DENIED, lambda: admin.ping())
    # The connection is unharmed by refusals.
    assert client.ping(b"ok").payload == b"ok"


def test_unimplemented_method(client: liverelay.Client) -> None:
    expect(liverelay.UnimplementedError, Status.UNIMPLEMENTED,
           lambda: client.call("/liverelay.v1.LiveRelay/Teleport", pb.PingRequest(), pb.PingReply))


def test_quota_refusals_carry_retry_after(dev: Dev) -> None:
    app = uid("quota").replace("-", ".")
    with dev.admin() as admin:
        admin.create_app(app_id=app, bundle_id="com.example.quota",
                         quotas=admin_pb.Quotas(max_tokens=1, calls_per_second=1000, burst=1000))
        created = admin.create_api_key(app_ids=[app], allowed_methods=V1_METHODS, label="quota test")
    register = dict(app_id=app, kind=pb.TOKEN_KIND_PUSH_TO_START, environment=pb.ENVIRONMENT_SANDBOX,
                    attributes_type=ATTRS)
    first = token()
    key_accepted(dev.server, created.secret, lambda c: c.register_token(token=first, **register))  # type: ignore[arg-type]
    with dev.server.client(created.secret) as tenant:
        error = expect(liverelay.ResourceExhaustedError, Status.RESOURCE_EXHAUSTED,
                       lambda: tenant.register_token(token=token(), **register),  # type: ignore[arg-type]
                       reason="TokenQuotaExceeded")
        assert error.retry_after is not None and error.retry_after > 0
        assert error.retryable and error.attempts == 1  # the client leaves it to the caller


def test_disabled_app_and_unknown_app(dev: Dev) -> None:
    app = uid("off").replace("-", ".")
    with dev.admin() as admin:
        admin.create_app(app_id=app, bundle_id="com.example.off")
        tenant_key = admin.create_api_key(all_apps=True, allowed_methods=V1_METHODS, label="all apps").secret
    register = dict(kind=pb.TOKEN_KIND_PUSH_TO_START, environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
    key_accepted(dev.server, tenant_key, lambda c: c.register_token(app_id=app, token=token(), **register))  # type: ignore[arg-type]
    with dev.server.client(tenant_key) as tenant:
        expect(liverelay.NotFoundError, Status.NOT_FOUND, lambda: tenant.register_token(
            app_id=uid("nowhere"), token=token(), **register), reason="UnknownApp")  # type: ignore[arg-type]
        with dev.admin() as admin:
            assert not admin.disable_app(app_id=app).enabled
        # The node applies the registry change on its next poll.
        error = raised_eventually(liverelay.FailedPreconditionError, lambda: tenant.register_token(
            app_id=app, token=token(), **register))  # type: ignore[arg-type]
        assert error.reason == "AppDisabled" and error.status is Status.FAILED_PRECONDITION


def test_admin_errors(dev: Dev) -> None:
    with dev.admin() as admin:
        expect(liverelay.NotFoundError, Status.NOT_FOUND, lambda: admin.get_app(app_id=uid("missing")))
        expect(liverelay.AlreadyExistsError, Status.ALREADY_EXISTS,
               lambda: admin.create_app(app_id=dev.app_id, bundle_id="com.example.dup"))
        error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT,
                       lambda: admin.create_app(app_id=uid("bad"), bundle_id=".starts.with.a.dot"))
        assert "bundle_id" in error.violations or "bundle_id" in error.message
        error = expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT, lambda: admin.put_apns_credentials(
            app_id=dev.app_id, team_id="TEAM000001", key_id="KEY0000001", private_key_pem=b"not a key"))
        assert "private_key_pem" in error.violations or "private_key_pem" in error.message
        expect(liverelay.NotFoundError, Status.NOT_FOUND,
               lambda: admin.create_api_key(app_ids=[uid("ghost")], allowed_methods=["Ping"]))
        expect(liverelay.InvalidArgumentError, Status.INVALID_ARGUMENT,
               lambda: admin.revoke_api_key(key_id="NOT-A-KEY-ID"))


def test_no_error_shows_the_api_key(client: liverelay.Client, dev: Dev) -> None:
    with pytest.raises(liverelay.RpcError) as info:
        client.register_token(app_id=dev.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token="x",
                              environment=pb.ENVIRONMENT_SANDBOX, attributes_type=ATTRS)
    secret = dev.api_key.rsplit("_", 1)[1]
    for text in (str(info.value), repr(info.value), info.value.message):
        assert secret not in text
