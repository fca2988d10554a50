"""The shared conformance scenarios (clients/conformance/scenarios.json) through the Python client.

The Swift and Go clients run the same file; clients/conformance/README.md describes its format.
Each scenario is one test, in the file's order, against one `liverelay serve` set up as the
file's "setup" says (apps, keys and a slow mock APNs made through the admin API).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

import pytest
from google.protobuf.message import Message

import harness
from harness import MockAPNs, Server

import liverelay
from liverelay import admin_pb, pb

SCENARIOS_PATH = harness.REPO / "clients" / "conformance" / "scenarios.json"
with open(SCENARIOS_PATH, encoding="utf-8") as _file:
    SPEC: Dict[str, Any] = json.load(_file)

EVENTUALLY_SECONDS = 30.0


class ScenarioError(Exception):
    """A scenario this runner cannot run (an unknown step, field or key): fix the runner or the file."""


@dataclass
class Conformance:
    server: Server
    keys: Dict[str, str]
    mocks: List[MockAPNs] = field(default_factory=list)


def _wait_accepted(server: Server, secret: str) -> None:
    deadline = time.monotonic() + EVENTUALLY_SECONDS
    while True:
        with server.client(secret, retry=liverelay.RetryPolicy(max_attempts=1)) as client:
            try:
                client.ping(b"")
                return
            except liverelay.UnauthenticatedError:
                if time.monotonic() > deadline:
                    raise
            except liverelay.PermissionDeniedError:
                return  # an admin key: authenticated, and not allowed Ping
        time.sleep(0.1)


@pytest.fixture(scope="module")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Conformance]:
    setup = SPEC["setup"]
    data_dir = harness.new_data_dir("liverelay-conformance-")
    server: Optional[Server] = None
    mocks: List[MockAPNs] = []
    try:
        admin_key = harness.bootstrap_admin_key(data_dir)
        server = Server(data_dir)
        env = Conformance(server=server, keys={"dev": server.first_start_api_key(), "admin": admin_key,
                                               **setup.get("fixed_keys", {})}, mocks=mocks)
        _wait_accepted(server, admin_key)
        p8_path = os.path.join(data_dir, "apns-dev-key.p8")
        with server.client(admin_key) as admin:
            for app in setup["apps"]:
                quotas = admin_pb.Quotas(**app["quotas"]) if "quotas" in app else None
                admin.create_app(app_id=app["app_id"], bundle_id=app["bundle_id"], quotas=quotas)
                slow = app.get("slow_apns")
                if slow is not None:
                    directory = str(tmp_path_factory.mktemp("conformance-mock"))
                    mock = MockAPNs(
                        directory, [f"{app['bundle_id']},{slow['team_id']},{slow['key_id']},{p8_path}"],
                        latency_ms=int(slow["latency_ms"]),
                    )
                    mocks.append(mock)
                    with open(p8_path, encoding="utf-8") as key_file, open(mock.cert, encoding="utf-8") as cert_file:
                        admin.put_apns_credentials(
                            app_id=app["app_id"], team_id=slow["team_id"], key_id=slow["key_id"],
                            private_key_pem=key_file.read(), endpoint=f"127.0.0.1:{mock.port}",
                            trust_certificate_pem=cert_file.read(),
                        )
            for name, spec in setup["keys"].items():
                created = admin.create_api_key(
                    app_ids=spec.get("app_ids", ()), all_apps=spec.get("all_apps"),
                    allowed_methods=spec["allowed_methods"], label=spec.get("label"),
                )
                env.keys[name] = created.secret
        for name in setup["keys"]:
            _wait_accepted(server, env.keys[name])
        yield env
    finally:
        for mock in mocks:
            mock.stop()
        if server is not None:
            server.stop()
        harness.remove_tree(data_dir)


# ---------------------------------------------------------------- values


def expand(value: Any, variables: Mapping[str, str]) -> Any:
    """`$name` strings become the variable's value; {"$repeat": s, "times": n} becomes s * n."""
    if isinstance(value, str) and value.startswith("$"):
        if value[1:] not in variables:
            raise ScenarioError(f"unknown variable {value}")
        return variables[value[1:]]
    if isinstance(value, dict):
        if "$repeat" in value:
            return str(value["$repeat"]) * int(value["times"])
        return {k: expand(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, variables) for v in value]
    return value


def text(value: Any) -> str:
    """The canonical text of an expected or actual scalar: true/false, decimal integers, strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def is_set(value: str) -> bool:
    return value not in ("", "0", "false") and not value.endswith("_UNSPECIFIED")


def resolve(message: Message, path: str) -> List[str]:
    """The values at a dotted path of the reply, `[*]` marking a repeated field (every element)."""
    current: List[Any] = [message]
    for segment in path.split("."):
        many = segment.endswith("[*]")
        name = segment[:-3] if many else segment
        following: List[Any] = []
        for item in current:
            if not isinstance(item, Message) or name not in item.DESCRIPTOR.fields_by_name:
                raise ScenarioError(f"the reply {type(message).__name__} has no field {path!r}")
            descriptor = item.DESCRIPTOR.fields_by_name[name]
            value = getattr(item, name)
            values = list(value) if many else [value]
            if descriptor.enum_type is not None:
                values = [descriptor.enum_type.values_by_number[v].name if v in descriptor.enum_type.values_by_number
                          else str(v) for v in values]
            following.extend(values)
        current = following
    if any(isinstance(v, Message) for v in current):
        raise ScenarioError(f"reply field {path!r} is a message, not a value")
    return [text(v) for v in current]


# ---------------------------------------------------------------- the RPCs, on the typed API


def _messages(request: Dict[str, Any], **types: Callable[..., Message]) -> Dict[str, Any]:
    for name, make in types.items():
        if name in request:
            request[name] = make(**request[name])
    return request


# The typed methods' required arguments of the proto3 requests: a field the step leaves out is
# sent as its zero value, which is what an absent proto3 field is on the wire.
PROTO3_ZERO: Dict[str, Dict[str, Any]] = {
    "RegisterToken": {"app_id": "", "kind": 0, "token": ""},
    "CreateChannel": {"app_id": "", "environment": 0, "storage_policy": 0},
    "ListChannels": {"app_id": ""},
    "DeleteChannel": {"app_id": "", "channel_id": ""},
    "ListEvents": {"app_id": ""},
}


def call(client: liverelay.Client, rpc: str, request: Dict[str, Any], timeout: Optional[float]) -> Message:
    """One step's RPC through the client's typed method, and its reply as the .proto's reply message."""
    options: Dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    r = {**PROTO3_ZERO.get(rpc, {}), **request}
    if rpc == "RegisterToken":
        return client.register_token(**r, **options)
    if rpc == "StartActivity":
        return client.start_activity(**_messages(r, targets=pb.Targets, alert=pb.Alert), **options)
    if rpc == "UpdateActivity":
        return client.update_activity(**_messages(r, alert=pb.Alert), **options)
    if rpc == "EndActivity":
        return client.end_activity(**_messages(r, alert=pb.Alert), **options)
    if rpc == "Ping":
        return client.ping(str(r.pop("payload", "")).encode("utf-8"), **r, **options)
    if rpc == "CreateChannel":
        return pb.CreateChannelReply(channel=client.create_channel(**r, **options))
    if rpc == "ListChannels":
        return client.list_channels(**r, **options)
    if rpc == "DeleteChannel":
        return client.delete_channel(**r, **options)
    if rpc == "ListEvents":
        return client.list_events(**r, **options)
    if rpc == "CreateApp":
        return admin_pb.AppReply(app=client.create_app(**_messages(r, quotas=admin_pb.Quotas), **options))
    if rpc == "GetApp":
        return admin_pb.AppReply(app=client.get_app(**r, **options))
    if rpc == "DisableApp":
        return admin_pb.AppReply(app=client.disable_app(**r, **options))
    if rpc == "ListApps":
        return client.list_apps(**r, **options)
    if rpc == "GetAppStats":
        return client.get_app_stats(**r, **options)
    if rpc == "CreateAPIKey":
        created = client.create_api_key(**r, **options)
        return admin_pb.CreateAPIKeyReply(key=created.key, secret=created.secret)
    if rpc == "ListAPIKeys":
        return client.list_api_keys(**r, **options)
    if rpc == "RevokeAPIKey":
        return admin_pb.APIKeyReply(key=client.revoke_api_key(**r, **options))
    if rpc == "PutWebhook":
        put = client.put_webhook(**r, **options)
        if put.signing_secret is None:
            return admin_pb.PutWebhookReply(webhook=put.webhook)
        return admin_pb.PutWebhookReply(webhook=put.webhook, signing_secret=put.signing_secret)
    if rpc == "GetWebhook":
        return admin_pb.WebhookReply(webhook=client.get_webhook(**r, **options))
    if rpc == "DeleteWebhook":
        return admin_pb.WebhookReply(webhook=client.delete_webhook(**r, **options))
    if rpc == "ResetWebhook":
        return admin_pb.WebhookReply(webhook=client.reset_webhook(**r, **options))
    raise ScenarioError(f"this runner does not know the step {rpc!r}: implement it in all three runners")


# ---------------------------------------------------------------- checking a step


def check(step: Mapping[str, Any], reply: Optional[Message], error: Optional[liverelay.RpcError],
          variables: Mapping[str, str]) -> Optional[str]:
    """None when the outcome is the one the step expects; otherwise what differs."""
    expect = step["expect"]
    if "ok" in expect:
        if error is not None:
            return (f"expected OK, got {error.status.name} reason {error.reason!r} "
                    f"fields {list(error.violations)}: {error.message}")
        assert reply is not None
        for path, wanted in expect["ok"].items():
            values = resolve(reply, path)
            if isinstance(wanted, list):
                # A list: exactly these values, in this order.
                wanted_values = [text(expand(v, variables)) for v in wanted]
                if values != wanted_values:
                    return f"reply field {path}: expected {wanted_values!r}, got {values!r}"
                continue
            want = text(expand(wanted, variables))
            if want == "<set>":
                ok = bool(values) and all(is_set(str(v)) for v in values)
            elif path.endswith("[*]") or "[*]." in path:
                ok = want in values
            else:
                ok = values == [want]
            if not ok:
                return f"reply field {path}: expected {want!r}, got {values!r}"
        return None
    if "error" not in expect:
        raise ScenarioError(f"a step expects neither ok nor error: {expect}")
    wanted_error = expect["error"]
    if error is None:
        return f"expected {wanted_error['status']}, got OK: {reply}"
    if error.status.name != wanted_error["status"]:
        return f"expected {wanted_error['status']}, got {error.status.name} reason {error.reason!r}: {error.message}"
    if "reason" in wanted_error and error.reason != wanted_error["reason"]:
        return f"expected reason {wanted_error['reason']!r}, got {error.reason!r}: {error.message}"
    if "field" in wanted_error and wanted_error["field"] not in error.violations:
        return f"expected a field violation of {wanted_error['field']!r}, got {list(error.violations)}: {error.message}"
    if "retry_after" in wanted_error:
        present = error.retry_after_ms is not None and error.retry_after_ms > 0
        if present != bool(wanted_error["retry_after"]):
            return f"expected retry_after present={wanted_error['retry_after']}, got {error.retry_after_ms!r}"
    return None


KNOWN_STEP_KEYS = {"rpc", "request", "expect", "key", "eventually", "timeout_ms", "save"}


def run_step(env: Conformance, scenario: Mapping[str, Any], step: Mapping[str, Any], variables: Dict[str, str]) -> None:
    unknown = set(step) - KNOWN_STEP_KEYS
    if unknown:
        raise ScenarioError(f"unknown step keys {sorted(unknown)}")
    key_name = str(step.get("key", scenario["key"]))
    secret = expand(key_name, variables) if key_name.startswith("$") else env.keys.get(key_name)
    if secret is None:
        raise ScenarioError(f"unknown key {key_name!r}")
    request = expand(step.get("request", {}), variables)
    timeout = step["timeout_ms"] / 1000.0 if "timeout_ms" in step else None
    deadline = time.monotonic() + (EVENTUALLY_SECONDS if step.get("eventually") else 0)
    while True:
        reply: Optional[Message] = None
        error: Optional[liverelay.RpcError] = None
        with env.server.client(secret) as client:
            try:
                reply = call(client, step["rpc"], request, timeout)
            except liverelay.RpcError as caught:
                error = caught
        problem = check(step, reply, error, variables)
        if problem is None or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert problem is None, f"{scenario['name']}: {step['rpc']} as {key_name}: {problem}"
    for name, path in step.get("save", {}).items():
        assert reply is not None
        values = resolve(reply, path)
        if len(values) != 1:
            raise ScenarioError(f"save {name} from {path}: {values!r} is not one value")
        variables[name] = str(values[0])


SCENARIOS = [pytest.param(scenario, id=scenario["name"]) for scenario in SPEC["scenarios"]]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance(conformance: Conformance, scenario: Dict[str, Any]) -> None:
    mismatch = scenario.get("known_mismatch")
    if mismatch is not None and "python" in mismatch.get("clients", ["python"]):
        print(f"conformance: skipping {scenario['name']}, a known mismatch: {mismatch['note']}")
        pytest.skip(f"known mismatch: {mismatch['note']}")
    variables: Dict[str, str] = {k: str(v) for k, v in SPEC.get("vars", {}).items()}
    for step in scenario["steps"]:
        run_step(conformance, scenario, step, variables)
