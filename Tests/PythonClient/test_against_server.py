#!/usr/bin/env python3
"""The Python reference client's suite: docs/PROTOCOL.md checked against a real LiveRelay server.

Usage:
  test_against_server.py --offline
      only the codec tests against the hex dumps of PROTOCOL.md section 12 (no server needed)
  test_against_server.py --port N --api-key KEY --ca DATA_DIR/cert.pem [--host 127.0.0.1]
                         [--server-name NAME] [--app-id dev.app] [--plaintext] [-k PATTERN] [-v]
      everything, against `liverelay serve` listening on host:port

Every option has an environment fallback: LIVERELAY_HOST, LIVERELAY_PORT, LIVERELAY_API_KEY,
LIVERELAY_CA, LIVERELAY_SERVER_NAME, LIVERELAY_APP_ID, LIVERELAY_PLAINTEXT=1, LIVERELAY_PROTOS.

Every socket operation is bounded by a timeout. The last line printed is `N passed, N failed`;
the exit code is 0 only when nothing failed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import ssl
import struct
import sys
import time
import traceback
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import liverelay_client as lr  # noqa: E402
from liverelay_client import (  # noqa: E402
    Client, FrameConnection, FrameType, GoAwayCode, RpcError, Setting, Status,
)

CONFIG = argparse.Namespace(host="127.0.0.1", port=0, api_key="", ca=None, server_name=None,
                            app_id="dev.app", plaintext=False, timeout=10.0)
PB = None
RUN = secrets.token_hex(4)  # makes ids unique when the suite runs twice against one server


def unhex(text: str) -> bytes:
    """Bytes from a hex dump like the ones in PROTOCOL.md: each line's leading hex pairs, comments ignored."""
    out = bytearray()
    for line in text.strip().splitlines():
        for word in line.split():
            if len(word) == 2 and all(c in "0123456789ABCDEFabcdef" for c in word):
                out.append(int(word, 16))
            else:
                break
    return bytes(out)


def token() -> str:
    return secrets.token_hex(32)  # 64 lowercase hex characters


def uid(prefix: str) -> str:
    return f"{prefix}-{RUN}-{secrets.token_hex(4)}"


# ====================================================================== offline: the doc's bytes

class DocExampleTests(unittest.TestCase):
    """The codec against the byte dumps of PROTOCOL.md section 12 (no server)."""

    CLIENT_TO_SERVER = """
4C 52 50 43 0D 0A 1A 0A                            preface "LRPC\\r\\n\\x1a\\n"
00 00 00 1C 01 00 00 00 00 00                      HELLO header: length 28, type 1, flags 0, id 0
00 01 00 01                                        min_version 1, max_version 1
00 0B 6C 72 5F 64 65 6D 6F 5F 6B 65 79             api_key_length 11, "lr_demo_key"
04 64 65 6D 6F                                     client_name_length 4, "demo"
00 01 00 10 00 00                                  MAX_FRAME_SIZE = 1048576
00 00 00 25 03 00 00 00 00 01                      REQUEST header: length 37, type 3, id 1
00 00 13 88                                        timeout_ms 5000
1C 2F 6C 69 76 65 72 65 6C 61 79 2E 76 31 2E 4C    method_length 28, "/liverelay.v1.L
69 76 65 52 65 6C 61 79 2F 50 69 6E 67                iveRelay/Ping"
0A 02 68 69                                        PingRequest: field 1 (payload) = "hi"
"""
    SERVER_TO_CLIENT = """
00 00 00 14 02 00 00 00 00 00                      WELCOME header: length 20, type 2, id 0
00 01                                              version 1
00 01 00 10 00 00                                  MAX_FRAME_SIZE = 1048576
00 02 00 00 00 64                                  MAX_REQUESTS_IN_FLIGHT = 100
00 03 00 04 93 E0                                  IDLE_TIMEOUT_MS = 300000
00 00 00 10 04 00 00 00 00 01                      RESPONSE header: length 16, type 4, id 1
0A 02 68 69                                        PingReply: payload = "hi"
10 80 D0 95 FF BC 31                                          server_time_ms = 1700000000000
1A 03 31 2E 30                                                server_version = "1.0"
"""
    ERROR_EXAMPLE = """
00 00 00 16 05 00 00 00 00 01                      ERROR header: length 22, type 5, id 1
05                                                 status 5 NOT_FOUND
00 10 6E 6F 20 73 75 63 68 20 61 63 74 69 76 69    message_length 16, "no such activi
74 79                                                 ty"
1A 01 78                                           ErrorDetails: field 3 (reason) = "x"
"""

    def test_client_bytes(self):
        ping = PB.PingRequest(payload=b"hi").SerializeToString()
        got = (lr.MAGIC
               + lr.encode_hello(b"lr_demo_key", "demo", settings={Setting.MAX_FRAME_SIZE: 1048576})
               + lr.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping, 5000))
        self.assertEqual(got.hex(), unhex(self.CLIENT_TO_SERVER).hex())

    def test_server_bytes(self):
        frames = lr.parse_frames(unhex(self.SERVER_TO_CLIENT))
        self.assertEqual([f.type for f in frames], [FrameType.WELCOME, FrameType.RESPONSE])
        version, settings = lr.decode_welcome(frames[0].payload)
        self.assertEqual(version, 1)
        self.assertEqual(settings, {1: 1048576, 2: 100, 3: 300000})
        self.assertEqual(frames[1].request_id, 1)
        reply = PB.PingReply()
        reply.ParseFromString(frames[1].payload)
        self.assertEqual((reply.payload, reply.server_time_ms, reply.server_version),
                         (b"hi", 1700000000000, "1.0"))
        # and our encoder makes the same bytes
        welcome = lr.encode_frame(FrameType.WELCOME, 0, struct.pack(">H", 1) + lr.encode_settings(
            {1: 1048576, 2: 100, 3: 300000}))
        response = lr.encode_frame(FrameType.RESPONSE, 1, PB.PingReply(
            payload=b"hi", server_time_ms=1700000000000, server_version="1.0").SerializeToString())
        self.assertEqual((welcome + response).hex(), unhex(self.SERVER_TO_CLIENT).hex())

    def test_error_bytes(self):
        data = unhex(self.ERROR_EXAMPLE)
        (frame,) = lr.parse_frames(data)
        err = lr.decode_error(frame.payload)
        self.assertEqual((err.status, err.message), (Status.NOT_FOUND, "no such activity"))
        details = PB.ErrorDetails()
        details.ParseFromString(err.details)
        self.assertEqual(details.reason, "x")
        made = lr.encode_frame(FrameType.ERROR, 1, lr.encode_error_payload(
            Status.NOT_FOUND, "no such activity", PB.ErrorDetails(reason="x").SerializeToString()))
        self.assertEqual(made.hex(), data.hex())

    def test_other_frames(self):
        self.assertEqual(lr.encode_cancel(9).hex(), unhex("00 00 00 00 06 00 00 00 00 09").hex())
        ping = bytes(range(1, 9))
        self.assertEqual(lr.encode_ping(ping).hex(),
                         unhex("00 00 00 08 07 00 00 00 00 00 01 02 03 04 05 06 07 08").hex())
        self.assertEqual(lr.encode_pong(ping).hex(),
                         unhex("00 00 00 08 08 00 00 00 00 00 01 02 03 04 05 06 07 08").hex())
        goaway = unhex("00 00 00 0D 09 00 00 00 00 00 00 00 00 05 00 00 00 00 00 03 62 79 65")
        self.assertEqual(lr.encode_goaway(5, GoAwayCode.NO_ERROR, "bye").hex(), goaway.hex())
        (frame,) = lr.parse_frames(goaway)
        self.assertEqual(lr.decode_goaway(frame.payload), lr.GoAway(5, 0, "bye"))

    def test_decoder_rejects(self):
        with self.assertRaisesRegex(lr.ProtocolViolation, "status code 0 is not in 1...16"):
            lr.decode_error(b"\x00\x00\x00")
        with self.assertRaisesRegex(lr.ProtocolViolation, "unknown frame type 0x0a"):
            lr.parse_frames(lr.encode_header(0, 0x0A, 0))
        with self.assertRaisesRegex(lr.ProtocolViolation, "above MAX_FRAME_SIZE"):
            lr.parse_frames(lr.encode_header(1048577, FrameType.RESPONSE, 1))
        with self.assertRaisesRegex(lr.ProtocolViolation, "GOAWAY"):
            lr.decode_goaway(lr.encode_goaway_payload(1, 0, "x") + b"!")
        with self.assertRaises(lr.ProtocolViolation):
            lr.decode_welcome(b"\x00\x01" + lr.encode_settings({1: 100}))  # MAX_FRAME_SIZE below 16384
        self.assertEqual(lr.goaway_code_name(9), "TOO_MANY_CONNECTIONS")
        self.assertTrue(lr.GoAwayReceived(lr.GoAway(0, GoAwayCode.TOO_MANY_CONNECTIONS, "")).retry_later)
        self.assertFalse(lr.GoAwayReceived(lr.GoAway(0, GoAwayCode.UNAUTHENTICATED, "")).retry_later)
        self.assertEqual(lr.goaway_code_name(99), "UNKNOWN_99(INTERNAL_ERROR)")


# ====================================================================== against the server

def client(**kw) -> Client:
    kw.setdefault("timeout", CONFIG.timeout)
    return Client(CONFIG.host, CONFIG.port, CONFIG.api_key, ssl_context=ssl_ctx(),
                  server_hostname=CONFIG.server_name, pb=PB, **kw)


def raw() -> FrameConnection:
    return FrameConnection(CONFIG.host, CONFIG.port, ssl_context=ssl_ctx(), server_hostname=CONFIG.server_name,
                           timeout=CONFIG.timeout)


_CTX = None


def ssl_ctx():
    global _CTX
    if CONFIG.plaintext:
        return None
    if _CTX is None:
        _CTX = lr.tls_context(CONFIG.ca, check_hostname=True)
    return _CTX


def ping_bytes(payload: bytes) -> bytes:
    return PB.PingRequest(payload=payload).SerializeToString()


def hello(key=None, name="py-raw", **kw) -> bytes:
    return lr.MAGIC + lr.encode_hello((key or CONFIG.api_key).encode(), name, **kw)


class ServerTest(unittest.TestCase):
    def setUp(self):
        self._closers = []

    def tearDown(self):
        for c in self._closers:
            try:
                c.close()
            except Exception:
                pass

    def track(self, c):
        self._closers.append(c)
        return c

    def client(self, **kw) -> Client:
        return self.track(client(**kw))

    def raw(self) -> FrameConnection:
        return self.track(raw())

    def open_raw(self, extra: bytes = b""):
        """A raw connection past WELCOME; returns (conn, settings)."""
        c = self.raw()
        c.send(hello() + extra)
        first = c.read_frame()
        self.assertEqual(first.type, FrameType.WELCOME, f"first frame {first.type_name()}")
        return c, lr.decode_welcome(first.payload)[1]

    def assertRpcError(self, status, fn, *args, **kw) -> RpcError:
        with self.assertRaises(RpcError) as ctx:
            fn(*args, **kw)
        self.assertEqual(Status(ctx.exception.status).name, Status(status).name, str(ctx.exception))
        self.assertFalse(ctx.exception.local, "the error came from this client, not from the server")
        return ctx.exception

    def expect_goaway_then_close(self, conn: FrameConnection, code: int, timeout: float = 10.0):
        """Reads until the server closes (bounded); returns (goaway, the other frames)."""
        frames = conn.read_until_closed(timeout)
        goaways = [lr.decode_goaway(f.payload) for f in frames if f.type == FrameType.GOAWAY]
        self.assertEqual(len(goaways), 1, f"GOAWAY frames: {goaways}; all: {[f.type_name() for f in frames]}")
        g = goaways[0]
        self.assertEqual(lr.goaway_code_name(g.code), GoAwayCode(code).name, str(g))
        if conn.eof_error:
            NOTES.append(f"{self.id()}: the server closed without TLS close_notify ({conn.eof_error})")
        return g, [f for f in frames if f.type != FrameType.GOAWAY]

    def replies_by_id(self, frames):
        out = {}
        for f in frames:
            if f.type in (FrameType.RESPONSE, FrameType.ERROR):
                self.assertNotIn(f.request_id, out, f"request id {f.request_id} answered twice")
                out[f.request_id] = f
        return out


NOTES: list = []


# ---------------------------------------------------------------- connection setup

class ConnectionTests(ServerTest):
    def test_tls_handshake_verifies_the_dev_certificate(self):
        if CONFIG.plaintext:
            self.skipTest("plaintext")
        c = self.raw()
        self.assertIn(c.tls_version, ("TLSv1.2", "TLSv1.3"))
        cert = c.sock.getpeercert()
        self.assertTrue(cert, "no verified peer certificate")
        # without the dev CA the same handshake must fail verification
        ctx = ssl.create_default_context()
        s = socket.create_connection((CONFIG.host, CONFIG.port), timeout=CONFIG.timeout)
        try:
            with self.assertRaises(ssl.SSLCertVerificationError):
                ctx.wrap_socket(s, server_hostname=CONFIG.server_name or CONFIG.host)
        finally:
            s.close()

    def test_welcome_and_settings(self):
        c = self.client()
        self.assertEqual(c.version, 1)
        for s in Setting:
            self.assertIn(int(s), c.raw_settings, f"WELCOME lacks {s.name}")
        self.assertTrue(16384 <= c.settings[Setting.MAX_FRAME_SIZE] <= 16777215)
        self.assertGreaterEqual(c.settings[Setting.MAX_REQUESTS_IN_FLIGHT], 1)

    def test_doc_example_zero_rtt_ping(self):
        """Section 12 live: a Ping pipelined behind HELLO; WELCOME first, then the reply."""
        c = self.raw()
        c.send(hello(name="demo", settings={Setting.MAX_FRAME_SIZE: 1048576})
               + lr.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"hi"), 5000))
        first = c.read_frame()
        self.assertEqual(first.type, FrameType.WELCOME)
        reply = c.read_frame()
        self.assertEqual((reply.type, reply.request_id), (FrameType.RESPONSE, 1), reply)
        r = PB.PingReply()
        r.ParseFromString(reply.payload)
        self.assertEqual(r.payload, b"hi")
        self.assertGreater(r.server_time_ms, 1_600_000_000_000)
        self.assertTrue(r.server_version)

    def test_bad_api_key_goaway_unauthenticated(self):
        c = self.raw()
        c.send(hello(key="lr_not_a_key_" + secrets.token_hex(8))
               + lr.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"x"), 5000))
        g, others = self.expect_goaway_then_close(c, GoAwayCode.UNAUTHENTICATED)
        self.assertEqual(g.last_request_id, 0)
        self.assertTrue(g.reason, "UNAUTHENTICATED without a reason")
        self.assertEqual(others, [], "a 0-RTT request was answered although the key was refused")

    def test_bad_preface(self):
        c = self.raw()
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        g, _ = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertTrue(g.reason.startswith("bad connection preface"), g.reason)
        self.assertEqual(g.last_request_id, 0)

    def test_first_frame_not_hello(self):
        c = self.raw()
        c.send(lr.MAGIC + lr.encode_ping(b"12345678"))
        g, _ = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertEqual(g.last_request_id, 0)

    def test_unsupported_version(self):
        c = self.raw()
        c.send(hello(min_version=2, max_version=3))
        g, _ = self.expect_goaway_then_close(c, GoAwayCode.UNSUPPORTED_VERSION)
        self.assertEqual(g.last_request_id, 0)

    def test_hello_above_4096(self):
        c = self.raw()
        c.send(lr.MAGIC + lr.encode_header(4097, FrameType.HELLO, 0))
        self.expect_goaway_then_close(c, GoAwayCode.FRAME_SIZE_ERROR)

    def test_graceful_client_goaway(self):
        c = self.client()
        ids = [c.start("Ping", ping_bytes(b"%d" % i), 5000) for i in range(5)]
        c.conn.send(lr.encode_goaway(0, GoAwayCode.NO_ERROR, "bye"))
        frames = c.conn.read_until_closed(10)
        got = self.replies_by_id(frames)
        self.assertEqual(sorted(got), ids, "outstanding calls not answered after the client's GOAWAY")


# ---------------------------------------------------------------- every RPC

class RpcTests(ServerTest):
    def setUp(self):
        super().setUp()
        self.c = self.client()
        self.app = CONFIG.app_id

    def register(self, **kw):
        base = dict(app_id=self.app, environment=PB.ENVIRONMENT_SANDBOX)
        base.update(kw)
        return self.c.register_token(**base)

    def start_req(self, **kw):
        base = dict(app_id=self.app, activity_id=uid("act"), attributes_type="MatchAttributes",
                    attributes_json='{"home":"A","away":"B"}', content_state_json='{"score":"0-0"}',
                    alert=PB.Alert(title="Kick-off", body="A vs B"), idempotency_key=uid("key"))
        base.update(kw)
        return base

    def test_ping_rpc(self):
        r = self.c.ping_rpc(b"\x00\x01hello\xff")
        self.assertEqual(r.payload, b"\x00\x01hello\xff")
        self.assertGreater(r.server_time_ms, 1_600_000_000_000)
        self.assertTrue(r.server_version)

    def test_register_push_to_start_created_unchanged_rotated_removed(self):
        t1, t2, dev, user = token(), token(), uid("device"), uid("user")
        common = dict(kind=PB.TOKEN_KIND_PUSH_TO_START, attributes_type="MatchAttributes",
                      device_id=dev, external_user_id=user)
        self.assertEqual(self.register(token=t1, **common).result, PB.REGISTER_TOKEN_RESULT_CREATED)
        self.assertEqual(self.register(token=t1, **common).result, PB.REGISTER_TOKEN_RESULT_UNCHANGED)
        r = self.register(token=t2, **common)
        self.assertEqual(r.result, PB.REGISTER_TOKEN_RESULT_ROTATED)
        self.assertEqual(r.replaced_token, t1)
        self.assertEqual(self.register(token=t2, remove=True, **common).result, PB.REGISTER_TOKEN_RESULT_REMOVED)
        self.assertEqual(self.register(token=t2, remove=True, **common).result,
                         PB.REGISTER_TOKEN_RESULT_NOT_FOUND)

    def test_register_update_token_created_and_rotated(self):
        act, dev, t1, t2 = uid("act"), uid("device"), token(), token()
        common = dict(kind=PB.TOKEN_KIND_UPDATE, activity_id=act, device_id=dev)
        self.assertEqual(self.register(token=t1, **common).result, PB.REGISTER_TOKEN_RESULT_CREATED)
        r = self.register(token=t2, **common)
        self.assertEqual(r.result, PB.REGISTER_TOKEN_RESULT_ROTATED)
        self.assertEqual(r.replaced_token, t1)
        self.assertEqual(self.register(token=t2, remove=True, **common).result, PB.REGISTER_TOKEN_RESULT_REMOVED)

    def test_start_with_registered_push_to_start_token(self):
        t, user = token(), uid("user")
        self.register(token=t, kind=PB.TOKEN_KIND_PUSH_TO_START, attributes_type="MatchAttributes",
                      device_id=uid("device"), external_user_id=user)
        req = self.start_req(targets=PB.Targets(push_to_start_tokens=[t]))
        r = self.c.start_activity(**req)
        self.assertEqual(r.activity_id, req["activity_id"])
        self.assertEqual(r.summary.targeted, 1, r)
        self.assertEqual(list(r.summary.unresolved), [], r)
        self.assertFalse(r.replayed)
        self.assertIn(r.state, (PB.ACTIVITY_STATE_STARTING, PB.ACTIVITY_STATE_ACTIVE), r)
        # by user id too
        r2 = self.c.start_activity(**self.start_req(targets=PB.Targets(external_user_ids=[user])))
        self.assertEqual(r2.summary.targeted, 1, r2)
        self.assertEqual(list(r2.summary.unresolved), [], r2)

    def test_start_with_unresolved_external_user_id(self):
        nobody = uid("nobody")
        r = self.c.start_activity(**self.start_req(targets=PB.Targets(external_user_ids=[nobody])))
        self.assertEqual(r.summary.targeted, 0, r)
        self.assertEqual(len(r.summary.unresolved), 1, r)
        u = r.summary.unresolved[0]
        self.assertEqual(u.kind, PB.TARGET_KIND_EXTERNAL_USER_ID)
        self.assertEqual(u.value, nobody)
        self.assertTrue(u.reason)

    def test_start_idempotency(self):
        t = token()
        self.register(token=t, kind=PB.TOKEN_KIND_PUSH_TO_START, attributes_type="MatchAttributes",
                      device_id=uid("device"))
        req = self.start_req(targets=PB.Targets(push_to_start_tokens=[t]))
        first = self.c.start_activity(**req)
        again = self.c.start_activity(**req)
        self.assertTrue(again.replayed)
        self.assertEqual(again.activity_id, first.activity_id)
        self.assertRpcError(Status.ALREADY_EXISTS, self.c.start_activity, **dict(req, idempotency_key=uid("key")))
        self.assertRpcError(Status.FAILED_PRECONDITION, self.c.start_activity,
                            **dict(req, content_state_json='{"score":"9-9"}'))

    def test_update_end_then_update_after_end(self):
        t = token()
        self.register(token=t, kind=PB.TOKEN_KIND_PUSH_TO_START, attributes_type="MatchAttributes",
                      device_id=uid("device"))
        req = self.start_req(targets=PB.Targets(push_to_start_tokens=[t]))
        self.c.start_activity(**req)
        act = req["activity_id"]
        self.register(token=token(), kind=PB.TOKEN_KIND_UPDATE, activity_id=act, device_id=uid("device"))
        u = self.c.update_activity(app_id=self.app, activity_id=act, content_state_json='{"score":"1-0"}',
                                   idempotency_key=uid("key"), priority=PB.PRIORITY_LOW)
        self.assertFalse(u.replayed)
        self.assertGreater(u.timestamp, 1_600_000_000)
        e = self.c.end_activity(app_id=self.app, activity_id=act, content_state_json='{"score":"2-1"}',
                                idempotency_key=uid("key"))
        self.assertEqual(e.state, PB.ACTIVITY_STATE_ENDED, e)
        self.assertRpcError(Status.FAILED_PRECONDITION, self.c.update_activity, app_id=self.app, activity_id=act,
                            content_state_json='{"score":"3-1"}', idempotency_key=uid("key"))
        self.assertRpcError(Status.FAILED_PRECONDITION, self.c.end_activity, app_id=self.app, activity_id=act,
                            idempotency_key=uid("key"))

    def test_unknown_activity_not_found(self):
        act = uid("never-started")
        self.assertRpcError(Status.NOT_FOUND, self.c.update_activity, app_id=self.app, activity_id=act,
                            content_state_json="{}", idempotency_key=uid("key"))
        self.assertRpcError(Status.NOT_FOUND, self.c.end_activity, app_id=self.app, activity_id=act,
                            idempotency_key=uid("key"))

    def test_other_app_is_refused(self):
        """Section 7: an app the key may not act for (PERMISSION_DENIED) or that does not exist (NOT_FOUND)."""
        with self.assertRaises(RpcError) as ctx:
            self.register(app_id=uid("no.such.app"), token=token(), kind=PB.TOKEN_KIND_PUSH_TO_START,
                          attributes_type="MatchAttributes", device_id=uid("device"))
        self.assertIn(Status(ctx.exception.status).name, ("PERMISSION_DENIED", "NOT_FOUND"), str(ctx.exception))
        NOTES.append(f"unknown app: {ctx.exception}")
        self.assertEqual(self.c.ping_rpc(b"ok").payload, b"ok")

    def violations(self, err: RpcError):
        return {v.field: v.description for v in err.details(PB).field_violations}

    def test_invalid_argument_names_the_field(self):
        e = self.assertRpcError(Status.INVALID_ARGUMENT, self.register, token="NOT-HEX",
                                kind=PB.TOKEN_KIND_PUSH_TO_START, attributes_type="MatchAttributes",
                                device_id=uid("device"))
        self.assertIn("token", self.violations(e), e.details(PB))
        e = self.assertRpcError(Status.INVALID_ARGUMENT, self.c.start_activity,
                                **self.start_req(targets=PB.Targets(push_to_start_tokens=[token(), "ABCDEF12"])))
        self.assertIn("targets.push_to_start_tokens[1]", self.violations(e), e.details(PB))
        e = self.assertRpcError(Status.INVALID_ARGUMENT, self.c.start_activity,
                                **self.start_req(content_state_json="[1, 2]",
                                                 targets=PB.Targets(push_to_start_tokens=[token()])))
        self.assertIn("content_state_json", self.violations(e), e.details(PB))
        # the connection is unharmed
        self.assertEqual(self.c.ping_rpc(b"ok").payload, b"ok")

    def test_channel_fields_and_requests_are_validated(self):
        # Section 16: checked when the request is decoded, before any service sees it.
        cases = [
            ("page_size", self.c.list_channels, (self.app,), dict(page_size=1001)),
            ("channel_id", self.c.delete_channel, (self.app, "not base64!"), {}),
            ("environment", self.c.create_channel, (self.app, 0, PB.CHANNEL_STORAGE_POLICY_NO_STORAGE), {}),
            ("storage_policy", self.c.create_channel, (self.app, PB.ENVIRONMENT_SANDBOX, 0), {}),
            ("channel_only", self.c.update_activity, (),
             dict(app_id=self.app, activity_id=uid("act"), content_state_json="{}", channel_only=True)),
            ("input_push_token", self.c.start_activity, (),
             self.start_req(targets=PB.Targets(push_to_start_tokens=[token()]), input_push_token=False)),
        ]
        for field, fn, args, kw in cases:
            e = self.assertRpcError(Status.INVALID_ARGUMENT, fn, *args, **kw)
            self.assertIn(field, self.violations(e), e.details(PB))
        self.assertEqual(self.c.ping_rpc(b"ok").payload, b"ok")

    def test_broadcast_channel_flow(self):
        """Section 16 end to end: create, subscribe at start, broadcast, refuse an unknown channel, delete."""
        ch = self.c.create_channel(self.app, PB.ENVIRONMENT_SANDBOX, PB.CHANNEL_STORAGE_POLICY_NO_STORAGE).channel
        self.assertTrue(ch.channel_id, ch)
        self.assertEqual(ch.storage_policy, PB.CHANNEL_STORAGE_POLICY_NO_STORAGE)
        self.assertIn(ch.channel_id, [c.channel_id for c in self.c.all_channels(self.app, page_size=1)])
        t = token()
        self.register(token=t, kind=PB.TOKEN_KIND_PUSH_TO_START, attributes_type="MatchAttributes",
                      device_id=uid("device"))
        req = self.start_req(targets=PB.Targets(push_to_start_tokens=[t]), channel_id=ch.channel_id,
                             input_push_token=False, wait_for_delivery=True)
        self.assertEqual(self.c.start_activity(**req).summary.delivered, 1)
        u = self.c.update_activity(app_id=self.app, activity_id=req["activity_id"], content_state_json='{"score":"1-0"}',
                                   channel_id=ch.channel_id, channel_only=True, wait_for_delivery=True,
                                   idempotency_key=uid("key"))
        self.assertEqual((u.summary.targeted, u.summary.delivered, u.summary.complete), (1, 1, True), u)
        e = self.assertRpcError(Status.NOT_FOUND, self.c.update_activity, app_id=self.app,
                                activity_id=req["activity_id"], content_state_json="{}",
                                channel_id="bm8tc3VjaC1jaGFubmVs", channel_only=True, idempotency_key=uid("key"))
        self.assertEqual(e.details(PB).reason, "ChannelNotFound")
        self.c.delete_channel(self.app, ch.channel_id)
        self.assertNotIn(ch.channel_id, [c.channel_id for c in self.c.all_channels(self.app)])
        self.assertRpcError(Status.NOT_FOUND, self.c.delete_channel, self.app, ch.channel_id)

    def test_malformed_protobuf_is_invalid_argument(self):
        r = self.c.call_raw("RegisterToken", b"\x0a\xff\xff\xff")  # field 1, length runs past the end
        self.assertEqual(r.status, Status.INVALID_ARGUMENT, r)
        self.assertEqual(self.c.ping_rpc(b"ok").payload, b"ok")

    def test_unknown_method_unimplemented(self):
        r = self.c.call_raw("/liverelay.v1.LiveRelay/Teleport", b"")
        self.assertEqual(r.status, Status.UNIMPLEMENTED, r)
        self.assertEqual(self.c.ping_rpc(b"ok").payload, b"ok")


# ---------------------------------------------------------------- pipelining

class PipeliningTests(ServerTest):
    N = 1000

    def test_1000_pipelined_within_the_in_flight_limit(self):
        c = self.client(timeout=30)
        limit = c.max_in_flight
        payload_of = {}
        highest_outstanding = 0
        started = time.monotonic()
        for i in range(self.N):
            p = b"p%d-" % i + secrets.token_bytes(4)
            rid = c.start("Ping", ping_bytes(p), 10000)  # reads replies whenever the limit is reached
            payload_of[rid] = p
            highest_outstanding = max(highest_outstanding, len(c.outstanding))
        results = c.wait_all(payload_of, timeout=60)
        elapsed = time.monotonic() - started
        self.assertLessEqual(highest_outstanding, limit)
        self.assertEqual(len(results), self.N)
        for rid, res in results.items():
            self.assertTrue(res.ok, f"id {rid}: {res.error}")
            self.assertEqual(c.decode_reply("Ping", res.payload).payload, payload_of[rid], f"id {rid} mismatched")
        self.assertEqual(set(c.reply_counts), set(payload_of))
        self.assertTrue(all(n == 1 for n in c.reply_counts.values()), "an id was answered more than once")
        order = sorted(results, key=lambda r: results[r].received_at)
        NOTES.append(f"1000 pipelined Pings, window {limit}: {elapsed * 1000:.0f} ms; replies out of order: "
                     f"{sum(1 for a, b in zip(order, order[1:]) if b < a)}")

    def test_1000_in_one_write_each_answered_exactly_once(self):
        """Past the in-flight limit at once: every id still gets exactly one reply (OK, or RESOURCE_EXHAUSTED)."""
        c = self.client(timeout=30)
        ids = list(range(1, self.N + 1))
        blob = b"".join(lr.encode_request(i, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"%d" % i), 20000)
                        for i in ids)
        for i in ids:
            c.outstanding[i] = time.monotonic()
        c.next_id = self.N + 1
        c.conn.send(blob)
        results = c.wait_all(ids, timeout=60)
        exhausted = 0
        for rid, res in results.items():
            if res.ok:
                self.assertEqual(c.decode_reply("Ping", res.payload).payload, b"%d" % rid)
            else:
                self.assertEqual(res.status, Status.RESOURCE_EXHAUSTED, f"id {rid}: {res.error}")
                exhausted += 1
        self.assertTrue(all(c.reply_counts[i] == 1 for i in ids))
        self.assertEqual(c.ping_rpc(b"after").payload, b"after")
        NOTES.append(f"1000 Pings in one write: {self.N - exhausted} OK, {exhausted} RESOURCE_EXHAUSTED")


# ---------------------------------------------------------------- deadlines and cancellation

class DeadlineAndCancelTests(ServerTest):
    def setUp(self):
        super().setUp()
        self.app = CONFIG.app_id

    def heavy_start(self, n_tokens=1000) -> bytes:
        return PB.StartActivityRequest(
            app_id=self.app, activity_id=uid("heavy"), attributes_type="MatchAttributes",
            attributes_json="{}", content_state_json="{}", idempotency_key=uid("key"),
            targets=PB.Targets(push_to_start_tokens=[token() for _ in range(n_tokens)],
                               external_user_ids=[uid("u") for _ in range(n_tokens)])).SerializeToString()

    def huge_start(self) -> bytes:
        """A StartActivity near the 1 MiB message limit: 1,000 512-character tokens and 1,000 256-byte
        user ids, so that decoding and validating it on the server takes a measurable time."""
        return PB.StartActivityRequest(
            app_id=self.app, activity_id=uid("huge"), attributes_type="MatchAttributes",
            attributes_json="{}", content_state_json="{}", idempotency_key=uid("key"),
            targets=PB.Targets(push_to_start_tokens=[secrets.token_hex(256) for _ in range(1000)],
                               external_user_ids=["u" * 240 + secrets.token_hex(8) for _ in range(1000)])
        ).SerializeToString()

    def test_deadline_expires_on_the_server(self):
        """A call whose deadline passes on the server is answered DEADLINE_EXCEEDED, exactly once,
        and the connection keeps working.

        The dev server answers in microseconds and starts a call's deadline when its whole frame has
        arrived (a frame sent in two halves 50 ms apart does not expire at 5 ms), so a deadline only
        passes while a call waits on the server. The test tries, in order, until one call expires (and
        notes which one did); against a debug build the second one always does (a 1 ms deadline on an
        ~800 KB call expires; deadlines up to ~20 ms do):
          1. StartActivity with wait_for_delivery and timeout_ms 300: the dev server has no APNs
             connection, so if it waits for delivery its pushes never reach a final state;
          2. a 1 ms StartActivity of ~800 KB (it waits for its own decoding and validation);
          3. 0-RTT: a 1 ms StartActivity pipelined behind HELLO (it waits for the API key check);
          4. 1 ms Pings in the same write behind three ~800 KB calls (they wait for the big calls).
        Every call must be answered exactly once, OK or DEADLINE_EXCEEDED.
        """
        c = self.client(timeout=30)
        t = token()
        c.register_token(app_id=self.app, kind=PB.TOKEN_KIND_PUSH_TO_START, token=t,
                         environment=PB.ENVIRONMENT_SANDBOX, attributes_type="MatchAttributes",
                         device_id=uid("device"))
        counts = {}  # label -> [expired, calls]

        def expired(label, statuses):
            for s in statuses:
                self.assertIn(Status(s).name, ("OK", "DEADLINE_EXCEEDED"), label)
            n = sum(1 for s in statuses if s == Status.DEADLINE_EXCEEDED)
            entry = counts.setdefault(label, [0, 0])
            entry[0] += n
            entry[1] += len(statuses)
            return n > 0

        req = PB.StartActivityRequest(app_id=self.app, activity_id=uid("wait"), attributes_type="MatchAttributes",
                                      attributes_json="{}", content_state_json="{}", idempotency_key=uid("key"),
                                      targets=PB.Targets(push_to_start_tokens=[t]), wait_for_delivery=True)
        r = c.call_raw("StartActivity", req.SerializeToString(), 300, client_deadline=False)
        done = expired("wait_for_delivery, timeout 300 ms", [r.status])
        if not done:
            huge = self.huge_start()
            for attempt in range(5):
                if expired("800 KB StartActivity, timeout 1 ms", [c.call_raw("StartActivity", huge, 1,
                                                                           client_deadline=False).status]):
                    done = True
                    break
        if not done:
            for attempt in range(5):
                z = self.client(timeout=30, zero_rtt=lr.encode_request(
                    1, "/liverelay.v1.LiveRelay/StartActivity", self.heavy_start(), 1))
                z.outstanding[1] = time.monotonic()
                z.next_id = 2
                if expired("0-RTT StartActivity behind HELLO, timeout 1 ms", [z.wait(1).status]):
                    done = True
                    break
        if not done:
            for attempt in range(3):
                blob = b"".join(lr.encode_request(c.next_id + i, "/liverelay.v1.LiveRelay/StartActivity",
                                                  self.huge_start(), 0) for i in range(3))
                blob += b"".join(lr.encode_request(c.next_id + 3 + i, "/liverelay.v1.LiveRelay/Ping",
                                                   ping_bytes(b"q"), 1) for i in range(20))
                ids = list(range(c.next_id, c.next_id + 23))
                for i in ids:
                    c.outstanding[i] = time.monotonic()
                c.next_id += 23
                c.conn.send(blob)  # one write: the Pings arrive right behind the big calls
                res = c.wait_all(ids, timeout=60)
                if expired("1 ms Pings in one write behind 3 800 KB StartActivity calls",
                           [res[i].status for i in ids[3:]]):
                    done = True
                    break
        tried = "; ".join(f"{label}: {e}/{n} expired" for label, (e, n) in counts.items())
        NOTES.append("deadline: " + tried)
        self.assertTrue(done, "no call ever expired on the server: " + tried)
        self.assertTrue(all(n == 1 for n in c.reply_counts.values()), "an id was answered more than once")
        self.assertEqual(c.ping_rpc(b"ok").payload, b"ok")

    def test_client_deadline_cancels_and_drops_the_late_reply(self):
        """Section 6: at its own deadline (send time + timeout) the client fails the call DEADLINE_EXCEEDED
        and sends CANCEL; the id stays taken until the server's one reply arrives, which is then dropped.

        The REQUEST's last byte is written only once the call's deadline has passed (a slow write), so
        the server cannot have answered it before the client gives up, however fast both sides are."""
        c = self.client(timeout=30)
        real_send = c.conn.send
        stalled = []

        def stalled_send(data: bytes):
            if stalled:
                return real_send(data)
            stalled.append(True)
            real_send(data[:-1])
            rid = max(c.outstanding)
            while time.monotonic() <= c.outstanding[rid] + 0.001:
                time.sleep(0.0005)
            real_send(data[-1:])

        c.conn.send = stalled_send
        res = c.call_raw("StartActivity", self.heavy_start(10), 1)
        c.conn.send = real_send
        rid = res.request_id
        self.assertEqual(Status(res.status).name, "DEADLINE_EXCEEDED")
        self.assertTrue(res.error.local, "expected the client's own deadline to fire first")
        self.assertIsNone(res.late, "no reply can have been read before the deadline")
        self.assertIn(rid, c.outstanding, "the id must stay taken until the server's reply")
        follow = c.call("Ping", PB.PingRequest(payload=b"next"))
        self.assertEqual(follow.payload, b"next")
        deadline = time.monotonic() + 10
        while rid in c.outstanding and time.monotonic() < deadline:
            c.pump(max(0.0, deadline - time.monotonic()))
        self.assertNotIn(rid, c.outstanding, "no reply ever came for the abandoned call")
        self.assertEqual(c.reply_counts[rid], 1)
        late_type, late_payload = c.results[rid].late
        late_error = None if late_type == FrameType.RESPONSE else lr.decode_error(late_payload)
        late = "OK" if late_error is None else Status(late_error.status).name
        # UNAVAILABLE: refused unprocessed, its 1 ms being shorter than calls take (DeadlineUnreachable)
        self.assertIn(late, ("OK", "DEADLINE_EXCEEDED", "CANCELLED", "UNAVAILABLE"), late_error and late_error.message)
        if late == "UNAVAILABLE":
            details = PB.ErrorDetails()
            details.ParseFromString(late_error.details)
            self.assertEqual(details.reason, "DeadlineUnreachable", late_error.message)
        NOTES.append(f"client deadline: the server's late reply, dropped, was {late}")
        self.assertIsNone(c.violation)

    def test_reply_read_after_the_deadline_is_late(self):
        """Section 6: a reply that the client reads only after the call's deadline has passed (a blocking
        read can overshoot it) does not succeed the call: it fails DEADLINE_EXCEEDED, the reply is kept
        as late, and its id is free (no CANCEL is due). The read here waits until the deadline has passed."""
        c = self.client(timeout=30)
        real_pump = c.pump

        def overshooting_pump(timeout=None):
            rid = max(c.outstanding)
            while time.monotonic() <= c.outstanding[rid] + 0.05:
                time.sleep(0.001)
            return real_pump(30)

        c.pump = overshooting_pump
        res = c.call_raw("Ping", PB.PingRequest(payload=b"late").SerializeToString(), 50)
        c.pump = real_pump
        self.assertEqual(Status(res.status).name, "DEADLINE_EXCEEDED")
        self.assertTrue(res.error.local)
        self.assertIsNotNone(res.late, "the reply was read, after the deadline")
        self.assertNotIn(res.request_id, c.outstanding)
        self.assertNotIn(res.request_id, c.abandoned, "no CANCEL for a call already answered")
        self.assertEqual(c.reply_counts[res.request_id], 1)
        self.assertEqual(c.call("Ping", PB.PingRequest(payload=b"next")).payload, b"next")
        self.assertIsNone(c.violation)

    def test_cancel_pipelined_before_welcome(self):
        """Section 8: a CANCEL for a request pipelined before WELCOME is honoured (CANCELLED right after
        WELCOME, without running). Preface, HELLO, REQUEST 1, CANCEL 1 and REQUEST 2 go in one write.

        Whether the server still holds request 1 when it reads the CANCEL depends on whether it has
        finished checking the key (a server that authenticates at once has sent WELCOME and answered
        request 1 before it reads the CANCEL, which then crossed the reply). So: exactly one reply
        for id 1, CANCELLED or the real one, after WELCOME; request 2 answered; nothing else."""
        c = self.raw()
        c.send(hello() + lr.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"x"), 5000)
               + lr.encode_cancel(1)
               + lr.encode_request(2, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"y"), 5000))
        frames = [c.read_frame(), c.read_frame(), c.read_frame()]
        self.assertEqual(frames[0].type, FrameType.WELCOME)
        got = self.replies_by_id(frames[1:])
        self.assertEqual(sorted(got), [1, 2])
        if got[1].type == FrameType.ERROR:
            self.assertEqual(Status(lr.decode_error(got[1].payload).status).name, "CANCELLED")
            outcome = "CANCELLED"
        else:
            self.assertEqual(PB.PingReply.FromString(got[1].payload).payload, b"x")
            outcome = "the real reply (the server had authenticated and answered before reading the CANCEL)"
        NOTES.append(f"CANCEL pipelined before WELCOME: {outcome}")
        self.assertEqual(got[2].type, FrameType.RESPONSE)
        # nothing more for id 1: a PING round trip proves the server has nothing else queued
        c.send(lr.encode_ping(b"afterccl"))
        f = c.read_frame()
        self.assertEqual((f.type, f.payload), (FrameType.PONG, b"afterccl"), f)

    def test_cancel_race_exactly_one_reply(self):
        """Section 8: CANCEL right behind the REQUEST: exactly one reply, CANCELLED or the real one."""
        c = self.client(timeout=30)
        outcomes = {}
        for i in range(50):
            body = self.heavy_start(200) if i % 2 else ping_bytes(b"r")
            method = "StartActivity" if i % 2 else "Ping"
            rid = c.start(method, body, 0)
            c.cancel(rid)
            res = c.wait(rid)
            self.assertIn(res.status, (Status.OK, Status.CANCELLED), res.error)
            outcomes[Status(res.status).name] = outcomes.get(Status(res.status).name, 0) + 1
        # a Ping round trip after all of them: no second reply for any id turned up meanwhile
        self.assertEqual(c.ping_rpc(b"end").payload, b"end")
        self.assertTrue(all(n == 1 for n in c.reply_counts.values()))
        NOTES.append(f"cancel race outcomes over 50 calls: {outcomes}")

    def test_cancel_of_answered_id_is_ignored(self):
        c = self.client()
        c.ping_rpc(b"1")
        c.cancel(1)
        self.assertEqual(c.ping_rpc(b"2").payload, b"2")
        self.assertEqual(c.reply_counts, {1: 1, 2: 1})

    def test_cancel_above_highest_id_is_protocol_error(self):
        c, _ = self.open_raw(lr.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"a"), 5000))
        self.assertEqual(c.read_frame().request_id, 1)
        c.send(lr.encode_cancel(7))
        g, others = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertEqual(g.last_request_id, 1)


# ---------------------------------------------------------------- frames and connection errors

class FrameTests(ServerTest):
    def test_ping_pong(self):
        c = self.client()
        for data in (b"\x00" * 8, bytes(range(1, 9)), b"\xff" * 8):
            self.assertEqual(c.ping_frame(data), data)

    def test_ping_flood_enhance_your_calm(self):
        """Section 10: more than 10 PINGs in 60 s with no REQUEST among them: GOAWAY ENHANCE_YOUR_CALM."""
        c, _ = self.open_raw()
        c.send(b"".join(lr.encode_ping(struct.pack(">Q", i)) for i in range(11)))
        g, others = self.expect_goaway_then_close(c, GoAwayCode.ENHANCE_YOUR_CALM)
        self.assertEqual(g.last_request_id, 0)
        self.assertTrue(all(f.type == FrameType.PONG for f in others), others)

    def test_request_resets_the_ping_count(self):
        c = self.client()
        for i in range(10):
            c.ping_frame(struct.pack(">Q", i))
        self.assertEqual(c.ping_rpc(b"reset").payload, b"reset")
        for i in range(10):
            c.ping_frame(struct.pack(">Q", 100 + i))
        self.assertEqual(c.ping_rpc(b"alive").payload, b"alive")
        self.assertIsNone(c.goaway)

    def test_unknown_frame_type(self):
        """GOAWAY PROTOCOL_ERROR naming the type, last id = the highest accepted; a second connection
        opened before keeps working."""
        other = self.client()
        self.assertEqual(other.ping_rpc(b"before").payload, b"before")
        c, _ = self.open_raw()
        for i in (1, 2, 3):
            c.send(lr.encode_request(i, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"x"), 5000))
            self.assertEqual(c.read_frame().request_id, i)
        c.send(lr.encode_header(0, 0x0A, 0))
        g, others = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertEqual(g.last_request_id, 3)
        self.assertIn("unknown frame type 0x0a", g.reason.lower())
        self.assertEqual(others, [])
        self.assertEqual(other.ping_rpc(b"after").payload, b"after")
        self.assertEqual(other.ping_frame(b"stillok!"), b"stillok!")

    def test_oversize_frame_accepted_requests_still_answered(self):
        """A header above MAX_FRAME_SIZE: GOAWAY FRAME_SIZE_ERROR from the header alone (we never send the
        payload); the request accepted just before still gets its reply; other connections are unharmed."""
        other = self.client()
        c, settings = self.open_raw()
        mfs = settings.get(Setting.MAX_FRAME_SIZE, 1048576)
        c.send(lr.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"in-flight"), 5000)
               + lr.encode_header(mfs + 1, FrameType.REQUEST, 2))
        g, others = self.expect_goaway_then_close(c, GoAwayCode.FRAME_SIZE_ERROR)
        self.assertEqual(g.last_request_id, 1)
        got = self.replies_by_id(others)
        self.assertEqual(list(got), [1], "the accepted request was lost to the malformed frame")
        self.assertEqual(got[1].type, FrameType.RESPONSE)
        self.assertEqual(other.ping_rpc(b"after").payload, b"after")

    def test_non_increasing_request_id(self):
        c, _ = self.open_raw()
        c.send(lr.encode_request(5, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"5"), 5000))
        self.assertEqual(c.read_frame().request_id, 5)
        c.send(lr.encode_request(5, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"dup"), 5000))
        g, others = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertEqual(g.last_request_id, 5)
        self.assertEqual(others, [], "the duplicate id was answered")

    def test_lower_request_id(self):
        c, _ = self.open_raw()
        c.send(lr.encode_request(10, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"10"), 5000)
               + lr.encode_request(4, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"4"), 5000))
        g, others = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertEqual(g.last_request_id, 10)
        self.assertEqual(list(self.replies_by_id(others)), [10])

    def test_malformed_ping_payload(self):
        c, _ = self.open_raw()
        c.send(lr.encode_frame(FrameType.PING, 0, b"1234567"))
        self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)

    def test_non_empty_cancel(self):
        c, _ = self.open_raw(lr.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"a"), 5000))
        self.assertEqual(c.read_frame().request_id, 1)
        c.send(lr.encode_frame(FrameType.CANCEL, 1, b"x"))
        g, _ = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertEqual(g.last_request_id, 1)

    def test_response_frame_from_client(self):
        c, _ = self.open_raw()
        c.send(lr.encode_frame(FrameType.RESPONSE, 1, b""))
        self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)

    def test_request_with_id_zero(self):
        c, _ = self.open_raw()
        c.send(lr.encode_request(0, "/liverelay.v1.LiveRelay/Ping", ping_bytes(b"a"), 5000))
        g, _ = self.expect_goaway_then_close(c, GoAwayCode.PROTOCOL_ERROR)
        self.assertEqual(g.last_request_id, 0)


# ====================================================================== runner

class CountingResult(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1


def main(argv=None) -> int:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--offline", action="store_true", help="only the codec tests on the doc's hex dumps")
    p.add_argument("--host", default=env("LIVERELAY_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(env("LIVERELAY_PORT", "0")))
    p.add_argument("--api-key", default=env("LIVERELAY_API_KEY", ""))
    p.add_argument("--ca", default=env("LIVERELAY_CA"), help="PEM file to verify the server's certificate")
    p.add_argument("--server-name", default=env("LIVERELAY_SERVER_NAME"),
                   help="TLS server name (SNI and hostname check); default: the host")
    p.add_argument("--app-id", default=env("LIVERELAY_APP_ID", "dev.app"))
    p.add_argument("--plaintext", action="store_true", default=env("LIVERELAY_PLAINTEXT") == "1")
    p.add_argument("--protos", default=env("LIVERELAY_PROTOS"))
    p.add_argument("--timeout", type=float, default=10.0, help="per socket operation, seconds")
    p.add_argument("-k", dest="pattern", action="append", help="run only tests whose id contains this")
    p.add_argument("-v", dest="verbose", action="store_true")
    args = p.parse_args(argv)

    global PB
    PB = lr.load_protos(args.protos)
    for k in ("host", "port", "api_key", "ca", "server_name", "app_id", "plaintext", "timeout"):
        setattr(CONFIG, k, getattr(args, k))

    classes = [DocExampleTests]
    if not args.offline:
        missing = [n for n, v in (("--port", args.port), ("--api-key", args.api_key)) if not v]
        if not args.plaintext and not args.ca:
            missing.append("--ca")
        if missing:
            print(f"test_against_server.py: missing {', '.join(missing)} (or use --offline)", file=sys.stderr)
            print("0 passed, 1 failed")
            return 2
        classes += [ConnectionTests, RpcTests, PipeliningTests, DeadlineAndCancelTests, FrameTests]
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for cls in classes:
        for test in loader.loadTestsFromTestCase(cls):
            if not args.pattern or any(pat in test.id() for pat in args.pattern):
                suite.addTest(test)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2 if args.verbose else 1,
                                     resultclass=CountingResult)
    result = runner.run(suite)
    for note in NOTES:
        print(f"note: {note}")
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    if result.skipped:
        print(f"{len(result.skipped)} skipped")
    sys.stdout.flush()
    print(f"{result.passed} passed, {failed} failed")
    return 0 if failed == 0 and result.passed > 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:  # never leave without the summary line
        traceback.print_exc()
        print("0 passed, 1 failed")
        sys.exit(1)
