"""docs/PROTOCOL.md's connection rules against a real server, frame by frame: the
preface and HELLO, 0-RTT requests, request ids, CANCEL, PING, GOAWAY, and the
GOAWAY a server owes each malformed frame or protocol violation.

The client never sends a frame that breaks a rule, so these tests write their
bytes themselves, with the package's codec (``liverelay._wire``, checked against
the document's hex dumps in test_wire.py), on a TLS socket of their own. Every
read is bounded."""

from __future__ import annotations

import secrets
import socket
import ssl
import struct
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import Dev, SlowApp
from harness import token, uid

from liverelay import _wire as wire
from liverelay import pb
from liverelay.errors import Status

PING = "/liverelay.v1.LiveRelay/Ping"
START = "/liverelay.v1.LiveRelay/StartActivity"
REGISTER = "/liverelay.v1.LiveRelay/RegisterToken"
TIMEOUT = 10.0


class Closed(Exception):
    """The server closed the connection."""


class RawConnection:
    """One TLS socket to the server, speaking frames written by the test."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        self.reader = wire.FrameReader(wire.DEFAULT_MAX_FRAME_SIZE, from_server=True)
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self, timeout: float = TIMEOUT) -> wire.Frame:
        """The next whole frame (its header checked before its payload is read); raises
        Closed once the server has closed, socket.timeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                return frame
            if self.eof:
                raise Closed()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("no frame in time")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(262144)
            except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError):
                chunk = b""  # a close without close_notify is a close too
            if not chunk:
                self.eof = True
            self.reader.feed(chunk)

    def read_until_closed(self, timeout: float = TIMEOUT) -> List[wire.Frame]:
        """Every frame until the server closes; raises socket.timeout if it does not close in time."""
        deadline = time.monotonic() + timeout
        frames = []
        while True:
            try:
                frames.append(self.read_frame(max(0.0, deadline - time.monotonic())))
            except Closed:
                return frames

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


Connect = Callable[[], RawConnection]


@pytest.fixture
def connect(dev: Dev) -> Iterator[Connect]:
    """Opens raw connections to the development server; all are closed after the test."""
    context = dev.server.tls().build_context()
    opened: List[RawConnection] = []

    def open_connection() -> RawConnection:
        connection = RawConnection(dev.server.port, context)
        opened.append(connection)
        return connection

    yield open_connection
    for connection in opened:
        connection.close()


def hello(api_key: str, name: str = "py-raw", min_version: int = 1, max_version: int = 1) -> bytes:
    settings = {wire.Setting.MAX_FRAME_SIZE: wire.DEFAULT_MAX_FRAME_SIZE}
    return wire.MAGIC + wire.encode_hello(api_key.encode(), name, settings, min_version, max_version)


def ping_request(request_id: int, payload: bytes = b"x", timeout_ms: int = 5000) -> bytes:
    return wire.encode_request(request_id, PING, pb.PingRequest(payload=payload).SerializeToString(), timeout_ms)


def opened(connect: Connect, dev: Dev, extra: bytes = b"", api_key: Optional[str] = None) -> Tuple[RawConnection, wire.Welcome]:
    """A raw connection past WELCOME (HELLO and `extra` in one write)."""
    connection = connect()
    connection.send(hello(api_key or dev.api_key) + extra)
    first = connection.read_frame()
    assert first.type == wire.FrameType.WELCOME, f"first frame of type {first.type}"
    return connection, wire.decode_welcome(first.payload)


def goaway_then_close(connection: RawConnection, code: wire.GoAwayCode) -> Tuple[wire.GoAway, List[wire.Frame]]:
    """Reads until the server closes (bounded): exactly one GOAWAY, with `code`; returns it and the other frames."""
    frames = connection.read_until_closed()
    goaways = [wire.decode_goaway(f.payload) for f in frames if f.type == wire.FrameType.GOAWAY]
    assert len(goaways) == 1, f"GOAWAY frames {goaways}; frame types {[f.type for f in frames]}"
    assert wire.goaway_code_name(goaways[0].code) == code.name, goaways[0]
    return goaways[0], [f for f in frames if f.type != wire.FrameType.GOAWAY]


def replies_by_id(frames: List[wire.Frame], into: Optional[Dict[int, wire.Frame]] = None) -> Dict[int, wire.Frame]:
    """The RESPONSE and ERROR frames by request id; fails on a second reply for an id."""
    out: Dict[int, wire.Frame] = {} if into is None else into
    for frame in frames:
        if frame.type in (wire.FrameType.RESPONSE, wire.FrameType.ERROR):
            assert frame.request_id not in out, f"request id {frame.request_id} answered twice"
            out[frame.request_id] = frame
    return out


def status_of(frame: wire.Frame) -> Status:
    return Status.OK if frame.type == wire.FrameType.RESPONSE else Status(wire.decode_error(frame.payload).status)


def reply_for(connection: RawConnection, request_id: int, seen: Dict[int, wire.Frame]) -> wire.Frame:
    """Reads until `request_id` is answered, recording every reply read on the way in `seen`."""
    while request_id not in seen:
        replies_by_id([connection.read_frame()], seen)
    return seen[request_id]


def heavy_start(app_id: str, tokens: int) -> bytes:
    """A StartActivity with `tokens` push-to-start tokens and as many user ids (none registered)."""
    return pb.StartActivityRequest(
        app_id=app_id, activity_id=uid("heavy"), attributes_type="MatchAttributes", attributes_json="{}",
        content_state_json="{}", idempotency_key=uid("key"),
        targets=pb.Targets(push_to_start_tokens=[token() for _ in range(tokens)],
                           external_user_ids=[uid("u") for _ in range(tokens)]),
    ).SerializeToString()


# ---------------------------------------------------------------- connection setup


def test_tls_handshake_and_the_dev_certificate(connect: Connect) -> None:
    connection = connect()
    assert connection.sock.version() in ("TLSv1.2", "TLSv1.3")
    assert connection.sock.getpeercert(), "no verified peer certificate"


def test_welcome_carries_every_setting(connect: Connect, dev: Dev) -> None:
    _, welcome = opened(connect, dev)
    assert welcome.version == 1
    for setting in wire.Setting:
        assert int(setting) in welcome.settings, f"WELCOME lacks {setting.name}"
    assert wire.MIN_MAX_FRAME_SIZE <= welcome.max_frame_size <= wire.MAX_MAX_FRAME_SIZE
    assert welcome.max_requests_in_flight >= 1


def test_zero_rtt_ping_of_the_documents_example(connect: Connect, dev: Dev) -> None:
    """Section 12 live: a Ping pipelined behind HELLO; WELCOME first, then the reply."""
    connection = connect()
    connection.send(hello(dev.api_key, name="demo") + ping_request(1, b"hi"))
    assert connection.read_frame().type == wire.FrameType.WELCOME
    reply = connection.read_frame()
    assert (reply.type, reply.request_id) == (wire.FrameType.RESPONSE, 1)
    ping = pb.PingReply.FromString(reply.payload)
    assert ping.payload == b"hi" and ping.server_time_ms > 1_600_000_000_000 and ping.server_version


def test_unknown_key_gets_goaway_unauthenticated_and_its_zero_rtt_request_no_answer(connect: Connect) -> None:
    connection = connect()
    connection.send(hello("lr_not_a_key_" + secrets.token_hex(8)) + ping_request(1))
    goaway, others = goaway_then_close(connection, wire.GoAwayCode.UNAUTHENTICATED)
    assert goaway.last_request_id == 0
    assert goaway.reason, "UNAUTHENTICATED without a reason"
    assert others == [], "a 0-RTT request was answered although the key was refused"


def test_bad_preface(connect: Connect) -> None:
    connection = connect()
    connection.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    goaway, _ = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.reason.startswith("bad connection preface"), goaway.reason
    assert goaway.last_request_id == 0


def test_first_frame_not_hello(connect: Connect) -> None:
    connection = connect()
    connection.send(wire.MAGIC + wire.encode_ping(b"12345678"))
    goaway, _ = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.last_request_id == 0


def test_unsupported_version(connect: Connect, dev: Dev) -> None:
    connection = connect()
    connection.send(hello(dev.api_key, min_version=2, max_version=3))
    goaway, _ = goaway_then_close(connection, wire.GoAwayCode.UNSUPPORTED_VERSION)
    assert goaway.last_request_id == 0


def test_hello_above_4096_bytes(connect: Connect) -> None:
    connection = connect()
    connection.send(wire.MAGIC + wire.HEADER.pack(wire.MAX_HELLO_PAYLOAD + 1, wire.FrameType.HELLO, 0, 0))
    goaway_then_close(connection, wire.GoAwayCode.FRAME_SIZE_ERROR)


def test_client_goaway_lets_outstanding_requests_be_answered(connect: Connect, dev: Dev) -> None:
    ids = [1, 2, 3, 4, 5]
    connection, _ = opened(connect, dev, b"".join(ping_request(i, b"%d" % i) for i in ids))
    connection.send(wire.encode_goaway(0, wire.GoAwayCode.NO_ERROR, "bye"))
    got = replies_by_id(connection.read_until_closed())
    assert sorted(got) == ids, "outstanding calls not answered after the client's GOAWAY"


# ---------------------------------------------------------------- requests


def test_malformed_protobuf_is_invalid_argument(connect: Connect, dev: Dev) -> None:
    # Field 1, with a length that runs past the end of the message.
    connection, _ = opened(connect, dev, wire.encode_request(1, REGISTER, b"\x0a\xff\xff\xff", 5000))
    reply = connection.read_frame()
    assert (reply.request_id, status_of(reply)) == (1, Status.INVALID_ARGUMENT)
    connection.send(ping_request(2, b"ok"))
    assert pb.PingReply.FromString(connection.read_frame().payload).payload == b"ok"


def test_1000_requests_in_one_write_each_answered_exactly_once(connect: Connect, dev: Dev) -> None:
    """Past the in-flight limit at once: every id still gets exactly one reply, OK or RESOURCE_EXHAUSTED."""
    n = 1000
    connection, _ = opened(connect, dev)
    connection.send(b"".join(ping_request(i, b"%d" % i, 20000) for i in range(1, n + 1)))
    got: Dict[int, wire.Frame] = {}
    while len(got) < n:
        replies_by_id([connection.read_frame(30)], got)
    assert sorted(got) == list(range(1, n + 1))
    for request_id, frame in got.items():
        if frame.type == wire.FrameType.RESPONSE:
            assert pb.PingReply.FromString(frame.payload).payload == b"%d" % request_id
        else:
            assert status_of(frame) is Status.RESOURCE_EXHAUSTED, f"id {request_id}"
    connection.send(ping_request(n + 1, b"after"))
    assert reply_for(connection, n + 1, got).type == wire.FrameType.RESPONSE


def test_deadline_passing_on_the_server_is_answered_once(dev: Dev, slow: SlowApp) -> None:
    """A call still waiting on the server at its deadline (a StartActivity waiting for delivery to
    an APNs that answers after seconds) is answered DEADLINE_EXCEEDED at the deadline, once, and
    the connection goes on."""
    t = token()
    with dev.server.client(slow.api_key) as client:
        client.register_token(app_id=slow.app_id, kind=pb.TOKEN_KIND_PUSH_TO_START, token=t,
                              environment=pb.ENVIRONMENT_SANDBOX, attributes_type="Slow")
    start = pb.StartActivityRequest(
        app_id=slow.app_id, activity_id=uid("expire"), attributes_type="Slow", attributes_json="{}",
        content_state_json="{}", idempotency_key=uid("key"), targets=pb.Targets(push_to_start_tokens=[t]),
        wait_for_delivery=True,
    ).SerializeToString()
    connection = RawConnection(dev.server.port, dev.server.tls().build_context())
    try:
        connection.send(hello(slow.api_key) + wire.encode_request(1, START, start, 300))
        assert connection.read_frame().type == wire.FrameType.WELCOME
        sent = time.monotonic()
        seen: Dict[int, wire.Frame] = {}
        assert status_of(reply_for(connection, 1, seen)) is Status.DEADLINE_EXCEEDED
        assert time.monotonic() - sent < slow.latency, "answered after the delivery, not at the deadline"
        # Past the time the delivery takes: no second reply for id 1 came meanwhile.
        time.sleep(max(0.0, slow.latency + 0.5 - (time.monotonic() - sent)))
        connection.send(ping_request(2, b"ok"))
        assert reply_for(connection, 2, seen).type == wire.FrameType.RESPONSE
        connection.send(wire.encode_ping(b"afterdln"))
        frame = connection.read_frame()
        assert (frame.type, frame.payload) == (wire.FrameType.PONG, b"afterdln"), frame
    finally:
        connection.close()


# ---------------------------------------------------------------- CANCEL


def test_cancel_pipelined_before_welcome(connect: Connect, dev: Dev) -> None:
    """Section 8: preface, HELLO, REQUEST 1, CANCEL 1 and REQUEST 2 in one write. Whether the
    server still holds request 1 when it reads the CANCEL depends on whether it has finished
    checking the key, so: exactly one reply for id 1, CANCELLED or the real one, after WELCOME;
    request 2 answered; nothing else."""
    connection = connect()
    connection.send(hello(dev.api_key) + ping_request(1, b"x") + wire.encode_cancel(1) + ping_request(2, b"y"))
    frames = [connection.read_frame() for _ in range(3)]
    assert frames[0].type == wire.FrameType.WELCOME
    got = replies_by_id(frames[1:])
    assert sorted(got) == [1, 2]
    if got[1].type == wire.FrameType.ERROR:
        assert status_of(got[1]) is Status.CANCELLED
    else:
        assert pb.PingReply.FromString(got[1].payload).payload == b"x"
    assert got[2].type == wire.FrameType.RESPONSE
    # Nothing more for id 1: a PING round trip proves the server has nothing else queued.
    connection.send(wire.encode_ping(b"afterccl"))
    frame = connection.read_frame()
    assert (frame.type, frame.payload) == (wire.FrameType.PONG, b"afterccl"), frame


def test_cancel_right_behind_its_request_gets_exactly_one_reply(connect: Connect, dev: Dev) -> None:
    """Section 8: CANCEL right behind the REQUEST: exactly one reply, CANCELLED or the real one."""
    connection, _ = opened(connect, dev)
    seen: Dict[int, wire.Frame] = {}
    for request_id in range(1, 51):
        if request_id % 2:
            request = ping_request(request_id, b"r", 0)
        else:
            request = wire.encode_request(request_id, START, heavy_start(dev.app_id, 200), 0)
        connection.send(request + wire.encode_cancel(request_id))
        assert status_of(reply_for(connection, request_id, seen)) in (Status.OK, Status.CANCELLED)
    # A Ping and a PING round trip after all of them: no second reply for any id turned up meanwhile.
    connection.send(ping_request(51, b"end") + wire.encode_ping(b"cancelrc"))
    assert reply_for(connection, 51, seen).type == wire.FrameType.RESPONSE
    frame = connection.read_frame()
    assert (frame.type, frame.payload) == (wire.FrameType.PONG, b"cancelrc"), frame
    assert sorted(seen) == list(range(1, 52))


def test_cancel_of_an_answered_id_is_ignored(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev, ping_request(1, b"1"))
    seen: Dict[int, wire.Frame] = {}
    reply_for(connection, 1, seen)
    connection.send(wire.encode_cancel(1) + ping_request(2, b"2") + wire.encode_ping(b"ignored!"))
    assert pb.PingReply.FromString(reply_for(connection, 2, seen).payload).payload == b"2"
    frame = connection.read_frame()
    assert (frame.type, frame.payload) == (wire.FrameType.PONG, b"ignored!"), frame
    assert sorted(seen) == [1, 2]


def test_cancel_above_the_highest_id_is_a_protocol_error(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev, ping_request(1, b"a"))
    assert connection.read_frame().request_id == 1
    connection.send(wire.encode_cancel(7))
    goaway, _ = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.last_request_id == 1


# ---------------------------------------------------------------- PING


def test_ping_is_answered_with_its_data(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev)
    for data in (b"\x00" * 8, bytes(range(1, 9)), b"\xff" * 8):
        connection.send(wire.encode_ping(data))
        frame = connection.read_frame()
        assert (frame.type, frame.payload) == (wire.FrameType.PONG, data)


def test_ping_flood_gets_goaway_enhance_your_calm(connect: Connect, dev: Dev) -> None:
    """Section 10: more than 10 PINGs in 60 s with no REQUEST among them."""
    connection, _ = opened(connect, dev)
    connection.send(b"".join(wire.encode_ping(struct.pack(">Q", i)) for i in range(11)))
    goaway, others = goaway_then_close(connection, wire.GoAwayCode.ENHANCE_YOUR_CALM)
    assert goaway.last_request_id == 0
    assert all(f.type == wire.FrameType.PONG for f in others), others


def test_a_request_resets_the_ping_count(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev)
    seen: Dict[int, wire.Frame] = {}
    for round_, request_id in ((0, 1), (100, 2)):
        for i in range(10):
            data = struct.pack(">Q", round_ + i)
            connection.send(wire.encode_ping(data))
            frame = connection.read_frame()
            assert (frame.type, frame.payload) == (wire.FrameType.PONG, data), frame
        connection.send(ping_request(request_id, b"reset"))
        assert reply_for(connection, request_id, seen).type == wire.FrameType.RESPONSE


# ---------------------------------------------------------------- malformed frames and violations


def test_unknown_frame_type(connect: Connect, dev: Dev) -> None:
    """GOAWAY PROTOCOL_ERROR naming the type, last id the highest accepted; a connection opened
    before keeps working."""
    other, _ = opened(connect, dev, ping_request(1, b"before"))
    assert other.read_frame().type == wire.FrameType.RESPONSE
    connection, _ = opened(connect, dev)
    for i in (1, 2, 3):
        connection.send(ping_request(i))
        assert connection.read_frame().request_id == i
    connection.send(wire.HEADER.pack(0, 0x0A, 0, 0))
    goaway, others = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.last_request_id == 3
    assert "unknown frame type 0x0a" in goaway.reason.lower(), goaway.reason
    assert others == []
    other.send(ping_request(2, b"after") + wire.encode_ping(b"stillok!"))
    assert other.read_frame().request_id == 2
    frame = other.read_frame()
    assert (frame.type, frame.payload) == (wire.FrameType.PONG, b"stillok!")


def test_oversize_frame_still_lets_the_accepted_request_be_answered(connect: Connect, dev: Dev) -> None:
    """A header above MAX_FRAME_SIZE: GOAWAY FRAME_SIZE_ERROR from the header alone (the payload is
    never sent); the request accepted just before still gets its reply; other connections are unharmed."""
    other, _ = opened(connect, dev)
    connection, welcome = opened(connect, dev)
    connection.send(ping_request(1, b"in-flight") + wire.HEADER.pack(welcome.max_frame_size + 1, wire.FrameType.REQUEST, 0, 2))
    goaway, others = goaway_then_close(connection, wire.GoAwayCode.FRAME_SIZE_ERROR)
    assert goaway.last_request_id == 1
    got = replies_by_id(others)
    assert list(got) == [1], "the accepted request was lost to the malformed frame"
    assert got[1].type == wire.FrameType.RESPONSE
    other.send(ping_request(1, b"after"))
    assert other.read_frame().type == wire.FrameType.RESPONSE


def test_repeated_request_id(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev, ping_request(5, b"5"))
    assert connection.read_frame().request_id == 5
    connection.send(ping_request(5, b"dup"))
    goaway, others = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.last_request_id == 5
    assert others == [], "the repeated id was answered"


def test_lower_request_id(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev)
    connection.send(ping_request(10, b"10") + ping_request(4, b"4"))
    goaway, others = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.last_request_id == 10
    assert list(replies_by_id(others)) == [10]


def test_request_with_id_zero(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev)
    connection.send(ping_request(0))
    goaway, _ = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.last_request_id == 0


def test_ping_of_seven_bytes(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev)
    connection.send(wire.encode_frame(wire.FrameType.PING, 0, b"1234567"))
    goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)


def test_cancel_with_a_payload(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev, ping_request(1, b"a"))
    assert connection.read_frame().request_id == 1
    connection.send(wire.encode_frame(wire.FrameType.CANCEL, 1, b"x"))
    goaway, _ = goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
    assert goaway.last_request_id == 1


def test_response_frame_from_the_client(connect: Connect, dev: Dev) -> None:
    connection, _ = opened(connect, dev)
    connection.send(wire.encode_frame(wire.FrameType.RESPONSE, 1, b""))
    goaway_then_close(connection, wire.GoAwayCode.PROTOCOL_ERROR)
