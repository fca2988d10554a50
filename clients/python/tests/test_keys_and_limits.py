"""A key revoked while its connections are open, and the server's limit of connections per key."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Iterator

import pytest
from conftest import V1_METHODS, Dev, SlowApp
from harness import Process, binary, eventually, key_accepted, queued, run, token, uid

import liverelay
from liverelay import pb
from liverelay.errors import Processing, Status


def test_revoked_key_gets_goaway_its_accepted_call_is_answered_and_it_is_final(dev: Dev, slow: SlowApp) -> None:
    with dev.admin() as admin:
        created = admin.create_api_key(app_ids=[slow.app_id], allowed_methods=V1_METHODS, label="to be revoked")
    key_accepted(dev.server, created.secret, lambda c: c.ping())

    async def main() -> None:
        async with dev.server.async_client(created.secret, connections=1) as client:
            t = token()
            await client.register_token(app_id=slow.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                                        environment=pb.ENVIRONMENT_SANDBOX, attributes_type="Slow")
            activity = uid("revoked")
            mark = dev.server.mark()
            in_flight = asyncio.ensure_future(client.start_activity(
                app_id=slow.app_id, activity_id=activity, attributes_type="Slow", attributes_json={},
                content_state_json={}, targets=pb.Targets(push_to_start_tokens=[t]), wait_for_delivery=True,
                timeout=60))
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: dev.server.wait_for(queued(activity), 60, mark))
            with dev.admin() as admin:
                revoked = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: admin.revoke_api_key(key_id=created.key.key_id))
            assert revoked.revoked_at_ms > 0
            # The node applies the revocation on its next registry poll: GOAWAY UNAUTHENTICATED.
            await eventually(lambda: client.fatal_error is not None, what="GOAWAY UNAUTHENTICATED")
            assert isinstance(client.fatal_error, liverelay.ApiKeyRevokedError)
            # The call the server had accepted is answered, not failed.
            reply = await in_flight
            assert reply.activity_id == activity and not reply.replayed
            # Final for the key: later calls fail at once, without a new connection.
            opened = client.stats().connections_opened
            with pytest.raises(liverelay.ApiKeyRevokedError) as info:
                await client.ping()
            assert info.value.status is Status.UNAUTHENTICATED
            assert client.stats().connections_opened == opened
            assert created.secret not in str(info.value)

    run(main())
    # A new client with the revoked key is refused at HELLO.
    with dev.server.client(created.secret) as refused:
        with pytest.raises(liverelay.ApiKeyRefusedError) as info:
            refused.ping()
    assert info.value.processing is Processing.NOT_PROCESSED
    assert created.secret.rsplit("_", 1)[1] not in str(info.value)


def test_unknown_key_is_refused_at_hello(dev: Dev) -> None:
    bogus = "lrk_aaaaaaaaaaaa_" + "0" * 64
    with dev.server.client(bogus) as client:
        with pytest.raises(liverelay.ApiKeyRefusedError):
            client.ping()
        assert isinstance(client.fatal_error, liverelay.ApiKeyRefusedError)
        with pytest.raises(liverelay.ApiKeyRefusedError):
            client.ping()


@dataclass
class Production:
    """`serve --config` with operator-made certificates: mutual TLS required, and at most
    two connections per API key."""

    port: int
    directory: str
    api_key: str

    def tls(self, with_certificate: bool = True) -> liverelay.TLSConfig:
        d = self.directory
        if not with_certificate:
            return liverelay.TLSConfig(ca_file=f"{d}/ca.pem")
        return liverelay.TLSConfig(ca_file=f"{d}/ca.pem", client_certificate_file=f"{d}/client.pem",
                                   client_key_file=f"{d}/client-key.pem")

    def client(self, **options: object) -> liverelay.Client:
        options.setdefault("tls", self.tls())
        return liverelay.Client("127.0.0.1", self.port, api_key=self.api_key, **options)  # type: ignore[arg-type]


def openssl(*arguments: str) -> None:
    subprocess.run(["openssl", *arguments], check=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def production(dev: Dev, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Production]:
    d = str(tmp_path_factory.mktemp("operator"))
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=liverelay python test CA", "-keyout", f"{d}/ca-key.pem", "-out", f"{d}/ca.pem")
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                            ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{d}/{name}-key.pem", "-out", f"{d}/{name}.csr")
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(extension + "\n")
        openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca-key.pem",
                "-CAcreateserial", "-days", "2", "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.pem")
    os.makedirs(f"{d}/data", mode=0o700)
    config = {
        "listen": {"host": "127.0.0.1", "port": 0},
        "tls": {"certificate": "server.pem", "private_key": "server-key.pem", "client_ca": "ca.pem",
                "client_auth": "require"},
        # The development server's key file: its dev.app key works here too.
        "api_key_file": os.path.join(dev.server.data_dir, "api-keys.json"),
        "data_dir": "data",
        "limits": {"max_connections_per_key": 2},
    }
    with open(f"{d}/config.json", "w") as f:
        json.dump(config, f)
    server = Process([binary(), "serve", "--config", f"{d}/config.json", "--port", "0", "--no-ops"],
                     name="serve --config")
    try:
        port = int(server.wait_for(r"^listening on 127\.0\.0\.1:(\d+)", timeout=120).group(1))
        yield Production(port=port, directory=d, api_key=dev.api_key)
    finally:
        server.stop()


def test_mutual_tls(production: Production) -> None:
    with production.client() as client:
        assert client.ping(b"mtls").payload == b"mtls"
    with production.client(tls=production.tls(with_certificate=False),
                           retry=liverelay.RetryPolicy(max_attempts=1)) as client:
        with pytest.raises(liverelay.ConnectError):
            client.ping()


def test_too_many_connections_per_key_is_reported_and_not_final(production: Production, dev: Dev) -> None:
    holders = [production.client(connections=1) for _ in range(2)]
    try:
        for holder in holders:
            assert holder.ping(b"held").payload == b"held"
        fast = liverelay.Backoff(initial=0.01, maximum=0.1)
        with production.client(connections=1, reconnect_backoff=fast,
                               retry=liverelay.RetryPolicy(max_attempts=3)) as third:
            with pytest.raises(liverelay.TooManyConnectionsError) as info:
                third.ping()
            error = info.value
            assert error.status is Status.UNAVAILABLE and error.processing is Processing.NOT_PROCESSED
            assert error.attempts == 3 and "the limit is 2" in str(error)
            assert dev.api_key.rsplit("_", 1)[1] not in str(error)
            assert third.fatal_error is None
            # Not final: once a held connection closes, the same client gets in.
            holders.pop().close()
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert third.ping(b"in").payload == b"in"
                    break
                except liverelay.TooManyConnectionsError:
                    # The server counts the closed connection out when it sees it close;
                    # each try waits out the client's back-off.
                    assert time.monotonic() < deadline
    finally:
        for holder in holders:
            holder.close()
