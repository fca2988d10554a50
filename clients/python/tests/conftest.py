from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Iterator

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import MockAPNs, Server  # noqa: E402

import liverelay  # noqa: E402

V1_METHODS = [
    "RegisterToken", "StartActivity", "UpdateActivity", "EndActivity", "Ping",
    "CreateChannel", "ListChannels", "DeleteChannel", "ListEvents",
]


@dataclass
class Dev:
    """The shared development server: dev.app with its key, and an admin key."""

    server: Server
    api_key: str
    admin_key: str
    app_id: str = "dev.app"

    def client(self, **options: object) -> liverelay.Client:
        return self.server.client(self.api_key, **options)  # type: ignore[arg-type]

    def admin(self, **options: object) -> liverelay.Client:
        return self.server.client(self.admin_key, **options)  # type: ignore[arg-type]


@dataclass
class SlowApp:
    """An app whose pushes a mock APNs answers only after `latency` seconds, so a call
    that waits for delivery stays in flight that long."""

    app_id: str
    api_key: str
    latency: float
    mock: MockAPNs


@pytest.fixture(scope="session")
def dev() -> Iterator[Dev]:
    data_dir = harness.new_data_dir()
    try:
        # Minted before the first start, so the server knows it from its first HELLO on.
        admin_key = harness.bootstrap_admin_key(data_dir)
        server = Server(data_dir)
        try:
            yield Dev(server=server, api_key=server.first_start_api_key(), admin_key=admin_key)
        finally:
            server.stop()
    finally:
        harness.remove_tree(data_dir)


def make_slow_app(server: Server, admin_key: str, directory: str, app_id: str, latency_ms: int) -> SlowApp:
    team, key_id = "SLOWTEAM01", "SLOWKEY001"
    p8 = os.path.join(server.data_dir, "apns-dev-key.p8")
    bundle = f"com.example.{app_id.replace('.', '-')}"
    mock = MockAPNs(directory, [f"{bundle},{team},{key_id},{p8}"], latency_ms=latency_ms)
    with server.client(admin_key) as admin:
        admin.create_app(app_id=app_id, bundle_id=bundle)
        with open(p8) as key_file, open(mock.cert) as cert_file:
            admin.put_apns_credentials(
                app_id=app_id, team_id=team, key_id=key_id, private_key_pem=key_file.read(),
                endpoint=f"127.0.0.1:{mock.port}", trust_certificate_pem=cert_file.read(),
            )
        created = admin.create_api_key(app_ids=[app_id], allowed_methods=V1_METHODS, label=f"{app_id} tests")
    harness.key_accepted(
        server, created.secret,
        lambda c: c.register_token(app_id=app_id, kind=liverelay.pb.TOKEN_KIND_PUSH_TO_START, token=harness.token(),
                                   environment=liverelay.pb.ENVIRONMENT_SANDBOX, attributes_type="Probe"),
    )
    return SlowApp(app_id=app_id, api_key=created.secret, latency=latency_ms / 1000, mock=mock)


@pytest.fixture(scope="session")
def slow(dev: Dev, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlowApp]:
    app = make_slow_app(dev.server, dev.admin_key, str(tmp_path_factory.mktemp("mock")), "slow.app", 4000)
    try:
        yield app
    finally:
        app.mock.stop()
