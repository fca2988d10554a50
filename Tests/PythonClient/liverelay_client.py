"""A reference client for the LiveRelay wire protocol, version 1.

Written only from docs/PROTOCOL.md and Protos/liverelay/v1/*.proto, with nothing
but the standard library (`socket`, `ssl`, `struct`) and the `protobuf` package,
so that it is an independent peer of the Swift implementation: where this file
and the Swift code disagree, one of them does not follow the document.

Layers, bottom up:

* frame codec: `encode_*` builds whole frames (header + payload) as bytes,
  `decode_*` parses payloads; every layout rule of PROTOCOL.md section 3 is
  checked and a violation raises `ProtocolViolation` naming frame and field;
* `FrameConnection`: one TCP (optionally TLS) socket, the preface, HELLO and
  WELCOME, and a bounded `read_frame()` (socket timeouts everywhere);
* `Client`: calls on top of a `FrameConnection`: request ids 1, 2, 3, ...,
  at most MAX_REQUESTS_IN_FLIGHT outstanding (the rest wait locally), replies
  matched by id (a reply for an id not outstanding is the server's protocol
  error), PING answered with PONG, client-side deadlines with CANCEL,
  GOAWAY handling per section 9.

The client is single-threaded: it reads frames only while the caller waits for
something, which keeps it deterministic for tests.

The protobuf classes are generated at run time by `load_protos()` (protoc
--python_out into a temporary directory); nothing generated is committed.
"""

from __future__ import annotations

import atexit
import enum
import importlib
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

# ---------------------------------------------------------------- constants

MAGIC = b"LRPC\r\n\x1a\n"  # section 2
HEADER = struct.Struct(">IBBI")  # length u32, type u8, flags u8, request_id u32 (3.1)
HEADER_SIZE = HEADER.size  # 10
assert HEADER_SIZE == 10

PROTOCOL_VERSION = 1
MAX_HELLO_PAYLOAD = 4096
MAX_REQUEST_ID = 0xFFFFFFFF


class FrameType(enum.IntEnum):  # 3.2
    HELLO = 0x01
    WELCOME = 0x02
    REQUEST = 0x03
    RESPONSE = 0x04
    ERROR = 0x05
    CANCEL = 0x06
    PING = 0x07
    PONG = 0x08
    GOAWAY = 0x09


CONNECTION_LEVEL = {FrameType.HELLO, FrameType.WELCOME, FrameType.PING, FrameType.PONG, FrameType.GOAWAY}
REQUEST_LEVEL = {FrameType.REQUEST, FrameType.RESPONSE, FrameType.ERROR, FrameType.CANCEL}


class GoAwayCode(enum.IntEnum):  # 3.10
    NO_ERROR = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2
    FRAME_SIZE_ERROR = 3
    UNSUPPORTED_VERSION = 4
    UNAUTHENTICATED = 5
    IDLE_TIMEOUT = 6
    HELLO_TIMEOUT = 7
    ENHANCE_YOUR_CALM = 8
    TOO_MANY_CONNECTIONS = 9  # the API key is at the server's per-key connection limit: retry later


def goaway_code_name(code: int) -> str:
    try:
        return GoAwayCode(code).name
    except ValueError:  # "Unknown codes must be accepted and treated like INTERNAL_ERROR."
        return f"UNKNOWN_{code}(INTERNAL_ERROR)"


class Status(enum.IntEnum):  # section 7
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Setting(enum.IntEnum):  # section 4
    MAX_FRAME_SIZE = 0x0001
    MAX_REQUESTS_IN_FLIGHT = 0x0002
    IDLE_TIMEOUT_MS = 0x0003


DEFAULT_SETTINGS = {
    Setting.MAX_FRAME_SIZE: 1_048_576,
    Setting.MAX_REQUESTS_IN_FLIGHT: 100,
    Setting.IDLE_TIMEOUT_MS: 0,
}
MIN_MAX_FRAME_SIZE = 16_384
MAX_MAX_FRAME_SIZE = 16_777_215

SERVICE = "/liverelay.v1.LiveRelay/"
# method name -> (request message, reply message), section 3.5
METHODS = {
    "RegisterToken": ("RegisterTokenRequest", "RegisterTokenReply"),
    "StartActivity": ("StartActivityRequest", "StartActivityReply"),
    "UpdateActivity": ("UpdateActivityRequest", "UpdateActivityReply"),
    "EndActivity": ("EndActivityRequest", "EndActivityReply"),
    "Ping": ("PingRequest", "PingReply"),
    # broadcast channels, section 16
    "CreateChannel": ("CreateChannelRequest", "CreateChannelReply"),
    "ListChannels": ("ListChannelsRequest", "ListChannelsReply"),
    "DeleteChannel": ("DeleteChannelRequest", "DeleteChannelReply"),
}


# ---------------------------------------------------------------- errors

class ProtocolViolation(Exception):
    """The peer (or a test's deliberately bad bytes) broke a rule of PROTOCOL.md."""


class ConnectionClosed(Exception):
    """The socket reached EOF (or broke) while a frame was expected."""


class GoAwayReceived(Exception):
    """The server answered HELLO with GOAWAY: nothing pipelined ran (section 2)."""

    def __init__(self, goaway: "GoAway"):
        super().__init__(f"GOAWAY {goaway}")
        self.goaway = goaway

    @property
    def retry_later(self) -> bool:
        """Whether a new connection, later, may be accepted (as the Swift client decides: every code but
        UNAUTHENTICATED, whose key would be refused again). After TOO_MANY_CONNECTIONS, back off first."""
        return self.goaway.code != GoAwayCode.UNAUTHENTICATED


class RpcError(Exception):
    """A call that did not end in a RESPONSE: an ERROR frame from the server, or a local failure."""

    def __init__(self, status: int, message: str, details: bytes = b"", local: bool = False):
        try:
            name = Status(status).name
        except ValueError:
            name = str(status)
        super().__init__(f"{name}: {message}")
        self.status = status
        self.message = message
        self.details_bytes = details
        self.local = local  # failed by this client, not by an ERROR frame

    def details(self, pb):
        d = pb.ErrorDetails()
        d.ParseFromString(self.details_bytes)  # must tolerate empty details and unknown fields
        return d


# ---------------------------------------------------------------- frame codec

@dataclass(frozen=True)
class Frame:
    type: int
    flags: int
    request_id: int
    payload: bytes

    def type_name(self) -> str:
        try:
            return FrameType(self.type).name
        except ValueError:
            return f"0x{self.type:02x}"


@dataclass(frozen=True)
class GoAway:
    last_request_id: int
    code: int
    reason: str

    def __str__(self) -> str:
        return f"{goaway_code_name(self.code)} last_request_id={self.last_request_id} reason={self.reason!r}"


@dataclass(frozen=True)
class ErrorFrame:
    status: int
    message: str
    details: bytes


def encode_frame(frame_type: int, request_id: int, payload: bytes = b"", flags: int = 0) -> bytes:
    return HEADER.pack(len(payload), frame_type, flags, request_id) + payload


def encode_header(length: int, frame_type: int, request_id: int, flags: int = 0) -> bytes:
    """A bare header (tests use it to announce payloads they never send)."""
    return HEADER.pack(length, frame_type, flags, request_id)


def decode_header(data: bytes) -> Tuple[int, int, int, int]:
    """-> (length, type, flags, request_id)"""
    return HEADER.unpack(data[:HEADER_SIZE])


def encode_settings(settings: Dict[int, int]) -> bytes:
    return b"".join(struct.pack(">HI", int(k), int(v)) for k, v in settings.items())


def decode_settings(data: bytes, frame_name: str) -> Dict[int, int]:
    if len(data) % 6:
        raise ProtocolViolation(f"malformed {frame_name} frame: settings are {len(data)} bytes, not a multiple of 6")
    out: Dict[int, int] = {}
    for off in range(0, len(data), 6):
        ident, value = struct.unpack_from(">HI", data, off)
        out[ident] = value
    return out


def encode_hello_payload(api_key: bytes, client_name: str = "", min_version: int = PROTOCOL_VERSION,
                         max_version: int = PROTOCOL_VERSION,
                         settings: Optional[Dict[int, int]] = None, validate: bool = True) -> bytes:
    name = client_name.encode("utf-8")
    if validate:
        if not 1 <= len(api_key) <= 512:
            raise ValueError("api key must be 1-512 bytes")
        if len(name) > 255:
            raise ValueError("client name must be 0-255 bytes")
        if min_version > max_version:
            raise ValueError("min_version > max_version")
    if settings is None:
        settings = {Setting.MAX_FRAME_SIZE: DEFAULT_SETTINGS[Setting.MAX_FRAME_SIZE]}
    payload = (struct.pack(">HHH", min_version, max_version, len(api_key)) + api_key
               + struct.pack(">B", len(name)) + name + encode_settings(settings))
    if validate and len(payload) > MAX_HELLO_PAYLOAD:
        raise ValueError("HELLO payload above 4096 bytes")
    return payload


def encode_hello(api_key: bytes, client_name: str = "", **kw) -> bytes:
    return encode_frame(FrameType.HELLO, 0, encode_hello_payload(api_key, client_name, **kw))


def decode_welcome(payload: bytes) -> Tuple[int, Dict[int, int]]:
    if len(payload) < 2:
        raise ProtocolViolation("malformed WELCOME frame: version missing")
    (version,) = struct.unpack_from(">H", payload, 0)
    settings = decode_settings(payload[2:], "WELCOME")
    # "an invalid value of a known setting is a connection error PROTOCOL_ERROR"
    mfs = settings.get(Setting.MAX_FRAME_SIZE)
    if mfs is not None and not MIN_MAX_FRAME_SIZE <= mfs <= MAX_MAX_FRAME_SIZE:
        raise ProtocolViolation(f"malformed WELCOME frame: MAX_FRAME_SIZE {mfs} is not in 16384...16777215")
    mrif = settings.get(Setting.MAX_REQUESTS_IN_FLIGHT)
    if mrif is not None and mrif < 1:
        raise ProtocolViolation("malformed WELCOME frame: MAX_REQUESTS_IN_FLIGHT 0")
    return version, settings


def encode_request_payload(method: str, message: bytes, timeout_ms: int = 0, validate: bool = True) -> bytes:
    m = method.encode("ascii")
    if validate:
        if not 1 <= len(m) <= 255 or any(not 0x21 <= c <= 0x7E for c in m):
            raise ValueError(f"bad method {method!r}")
        if not 0 <= timeout_ms <= 0xFFFFFFFF:
            raise ValueError("timeout_ms out of range")
    return struct.pack(">IB", timeout_ms, len(m)) + m + message


def encode_request(request_id: int, method: str, message: bytes, timeout_ms: int = 0, **kw) -> bytes:
    return encode_frame(FrameType.REQUEST, request_id, encode_request_payload(method, message, timeout_ms, **kw))


def encode_error_payload(status: int, message: str, details: bytes = b"") -> bytes:
    m = message.encode("utf-8")
    return struct.pack(">BH", status, len(m)) + m + details


def decode_error(payload: bytes) -> ErrorFrame:
    if len(payload) < 3:
        raise ProtocolViolation("malformed ERROR frame: shorter than status and message length")
    status, mlen = struct.unpack_from(">BH", payload, 0)
    if not 1 <= status <= 16:
        raise ProtocolViolation(f"malformed ERROR frame: status code {status} is not in 1...16")
    if 3 + mlen > len(payload):
        raise ProtocolViolation("malformed ERROR frame: message runs past the payload")
    try:
        message = payload[3:3 + mlen].decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolViolation("malformed ERROR frame: message is not valid UTF-8") from None
    return ErrorFrame(status, message, bytes(payload[3 + mlen:]))


def encode_cancel(request_id: int) -> bytes:
    return encode_frame(FrameType.CANCEL, request_id)


def encode_ping(data: bytes) -> bytes:
    assert len(data) == 8
    return encode_frame(FrameType.PING, 0, data)


def encode_pong(data: bytes) -> bytes:
    assert len(data) == 8
    return encode_frame(FrameType.PONG, 0, data)


def encode_goaway_payload(last_request_id: int, code: int, reason: str = "") -> bytes:
    r = reason.encode("utf-8")
    return struct.pack(">IIH", last_request_id, code, len(r)) + r


def encode_goaway(last_request_id: int, code: int, reason: str = "") -> bytes:
    return encode_frame(FrameType.GOAWAY, 0, encode_goaway_payload(last_request_id, code, reason))


def decode_goaway(payload: bytes) -> GoAway:
    if len(payload) < 10:
        raise ProtocolViolation("malformed GOAWAY frame: shorter than 10 bytes")
    last, code, rlen = struct.unpack_from(">IIH", payload, 0)
    if 10 + rlen != len(payload):
        raise ProtocolViolation(f"malformed GOAWAY frame: reason length {rlen} does not match the payload")
    try:
        reason = payload[10:].decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolViolation("malformed GOAWAY frame: reason is not valid UTF-8") from None
    return GoAway(last, code, reason)


def check_frame_header(length: int, frame_type: int, request_id: int, max_frame_size: int,
                       from_server: bool = True) -> None:
    """The checks a receiver makes from the header alone (3.1); `from_server`: also the direction."""
    if frame_type not in FrameType._value2member_map_:
        raise ProtocolViolation(f"unknown frame type 0x{frame_type:02x}")
    if length > max_frame_size:
        raise ProtocolViolation(f"frame of {length} bytes above MAX_FRAME_SIZE {max_frame_size}")
    ft = FrameType(frame_type)
    if ft in CONNECTION_LEVEL and request_id != 0:
        raise ProtocolViolation(f"{ft.name} frame with request id {request_id}")
    if ft in REQUEST_LEVEL and request_id == 0:
        raise ProtocolViolation(f"{ft.name} frame with request id 0")
    if from_server and ft in (FrameType.HELLO, FrameType.REQUEST, FrameType.CANCEL):
        raise ProtocolViolation(f"{ft.name} frame from the server")


def parse_frames(data: bytes, max_frame_size: int = DEFAULT_SETTINGS[Setting.MAX_FRAME_SIZE]) -> List[Frame]:
    """Splits a byte string of whole frames (used by the offline tests on the doc's dumps)."""
    frames = []
    off = 0
    while off < len(data):
        length, ftype, flags, rid = decode_header(data[off:off + HEADER_SIZE])
        check_frame_header(length, ftype, rid, max_frame_size)
        frames.append(Frame(ftype, flags, rid, bytes(data[off + HEADER_SIZE:off + HEADER_SIZE + length])))
        off += HEADER_SIZE + length
    if off != len(data):
        raise ProtocolViolation("truncated frame")
    return frames


# ---------------------------------------------------------------- protobuf classes

_PB = None


def load_protos(proto_root: Optional[str] = None, out_dir: Optional[str] = None):
    """Runs protoc --python_out on Protos/liverelay/v1/*.proto and imports the result.

    Returns a namespace holding every message and enum of both files (liverelay_pb2 and
    activity_pb2 merged). The generated code lives in a temporary directory only.
    """
    global _PB
    if _PB is not None:
        return _PB
    if proto_root is None:
        proto_root = os.environ.get("LIVERELAY_PROTOS") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "Protos")
    proto_root = os.path.abspath(proto_root)
    if out_dir is None:
        out_dir = tempfile.mkdtemp(prefix="liverelay-pb-")
        atexit.register(shutil.rmtree, out_dir, True)  # generated code never outlives the run
    files = [os.path.join("liverelay", "v1", f) for f in ("liverelay.proto", "activity.proto")]
    protoc = os.environ.get("PROTOC", "protoc")
    proc = subprocess.run([protoc, f"--python_out={out_dir}", f"-I{proto_root}", *files],
                          cwd=proto_root, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"protoc failed ({proc.returncode}): {proc.stderr.strip()}")
    sys.path.insert(0, out_dir)
    lr = importlib.import_module("liverelay.v1.liverelay_pb2")
    act = importlib.import_module("liverelay.v1.activity_pb2")

    class PB:
        pass

    for mod in (act, lr):
        for name in dir(mod):
            if not name.startswith("_"):
                setattr(PB, name, getattr(mod, name))
    PB.liverelay_pb2 = lr
    PB.activity_pb2 = act
    _PB = PB
    return PB


# ---------------------------------------------------------------- the connection

def tls_context(cafile: Optional[str], check_hostname: bool = True) -> ssl.SSLContext:
    """TLS 1.2 minimum (section 1), server certificate verified against cafile."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


class FrameConnection:
    """One socket speaking frames. Every blocking operation is bounded by a timeout."""

    def __init__(self, host: str, port: int, *, ssl_context: Optional[ssl.SSLContext] = None,
                 server_hostname: Optional[str] = None, timeout: float = 10.0,
                 max_frame_size: int = DEFAULT_SETTINGS[Setting.MAX_FRAME_SIZE]):
        self.timeout = timeout
        self.max_frame_size = max_frame_size  # what this client advertises and enforces
        raw = socket.create_connection((host, port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            self.sock = ssl_context.wrap_socket(raw, server_hostname=server_hostname or host)
        else:
            self.sock = raw
        self.sock.settimeout(timeout)
        self.tls_version = self.sock.version() if ssl_context is not None else None
        self.buffer = bytearray()
        self.eof = False
        self.eof_error: Optional[str] = None  # how the stream ended, when it was not a clean close
        self.bytes_received = 0
        self.from_server = True  # direction check on received frames (3.2)

    # -- writing
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    # -- reading
    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("timed out waiting for a frame")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(262144)
        except (ssl.SSLEOFError, ConnectionResetError, BrokenPipeError) as error:
            self.eof = True
            self.eof_error = f"{type(error).__name__}: {error}"
            raise ConnectionClosed(self.eof_error) from None
        except ssl.SSLError as error:
            self.eof = True
            self.eof_error = f"{type(error).__name__}: {error}"
            raise ConnectionClosed(self.eof_error) from None
        if not chunk:
            self.eof = True
            raise ConnectionClosed("EOF")
        self.bytes_received += len(chunk)
        self.buffer += chunk

    def read_frame(self, timeout: Optional[float] = None) -> Frame:
        """Reads one whole frame; raises socket.timeout, ConnectionClosed or ProtocolViolation.

        The header is checked before the payload is read (3.1): a length above our
        MAX_FRAME_SIZE is refused without buffering the payload.
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self.buffer) < HEADER_SIZE:
            if self.eof:
                raise ConnectionClosed(self.eof_error or "EOF")
            self._fill(deadline)
        length, ftype, flags, rid = decode_header(self.buffer)
        check_frame_header(length, ftype, rid, self.max_frame_size, self.from_server)
        while len(self.buffer) < HEADER_SIZE + length:
            if self.eof:
                raise ConnectionClosed(self.eof_error or "EOF in the middle of a frame")
            self._fill(deadline)
        payload = bytes(self.buffer[HEADER_SIZE:HEADER_SIZE + length])
        del self.buffer[:HEADER_SIZE + length]
        return Frame(ftype, flags, rid, payload)

    def read_until_closed(self, timeout: Optional[float] = None) -> List[Frame]:
        """Every frame until the peer closes; raises socket.timeout if it does not close in time."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        frames = []
        while True:
            try:
                frames.append(self.read_frame(max(0.0, deadline - time.monotonic())))
            except ConnectionClosed:
                return frames

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- the preface
    def open(self, api_key: bytes, client_name: str = "liverelay-python", *, extra: bytes = b"",
             settings: Optional[Dict[int, int]] = None, min_version: int = PROTOCOL_VERSION,
             max_version: int = PROTOCOL_VERSION) -> Frame:
        """Writes magic + HELLO (+ extra bytes: 0-RTT requests) in one write; returns the first frame."""
        if settings is None:
            settings = {Setting.MAX_FRAME_SIZE: self.max_frame_size}
        hello = encode_hello(api_key, client_name, settings=settings,
                             min_version=min_version, max_version=max_version)
        self.send(MAGIC + hello + extra)
        return self.read_frame()


# ---------------------------------------------------------------- the client

@dataclass
class Result:
    request_id: int
    frame_type: int  # RESPONSE or ERROR, or 0 for a local failure
    payload: bytes = b""
    error: Optional[RpcError] = None
    received_at: float = 0.0
    late: Optional[Tuple[int, bytes]] = None  # the server's reply to a call given up locally (dropped)

    @property
    def ok(self) -> bool:
        return self.frame_type == FrameType.RESPONSE

    @property
    def status(self) -> int:
        return Status.OK if self.ok else self.error.status


class Client:
    """Calls over one FrameConnection, per PROTOCOL.md sections 5, 6, 8, 9 and 13."""

    def __init__(self, host: str, port: int, api_key: str | bytes, *, ssl_context=None,
                 server_hostname=None, timeout: float = 10.0, client_name: str = "liverelay-python",
                 pb=None, zero_rtt: bytes = b""):
        self.pb = pb or load_protos()
        self.timeout = timeout
        self.conn = FrameConnection(host, port, ssl_context=ssl_context, server_hostname=server_hostname,
                                    timeout=timeout)
        key = api_key.encode() if isinstance(api_key, str) else api_key
        self.next_id = 1
        self.outstanding: Dict[int, float] = {}  # id -> send time
        self.abandoned: set = set()  # given up locally (deadline, cancel): the reply is dropped
        self.local_deadlines: Dict[int, float] = {}  # id -> send time + timeout, while it is waited for
        self.results: Dict[int, Result] = {}
        self.reply_counts: Dict[int, int] = {}
        self.pongs: List[bytes] = []
        self.goaway: Optional[GoAway] = None
        self.closed = False
        self.violation: Optional[str] = None
        first = self.conn.open(key, client_name, extra=zero_rtt)
        if first.type == FrameType.GOAWAY:
            self.goaway = decode_goaway(first.payload)
            self.conn.close()
            self.closed = True
            raise GoAwayReceived(self.goaway)
        if first.type != FrameType.WELCOME or first.request_id != 0:
            self._violate(f"first frame is {first.type_name()}, not WELCOME or GOAWAY")
        self.version, received = decode_welcome(first.payload)
        if not PROTOCOL_VERSION <= self.version <= PROTOCOL_VERSION:
            self.conn.send(encode_goaway(0, GoAwayCode.UNSUPPORTED_VERSION, "unsupported version"))
            self.conn.close()
            raise ProtocolViolation(f"WELCOME chose version {self.version}")
        self.settings = dict(DEFAULT_SETTINGS)
        self.settings.update({k: v for k, v in received.items() if k in DEFAULT_SETTINGS})
        self.raw_settings = received

    # -- properties
    @property
    def max_in_flight(self) -> int:
        return self.settings[Setting.MAX_REQUESTS_IN_FLIGHT]

    def _violate(self, why: str):
        """The server broke the protocol (section 5): GOAWAY PROTOCOL_ERROR, fail everything INTERNAL."""
        self.violation = why
        try:
            self.conn.send(encode_goaway(0, GoAwayCode.PROTOCOL_ERROR, why[:200]))
        except OSError:
            pass
        for rid in list(self.outstanding):
            self.results[rid] = Result(rid, 0, error=RpcError(Status.INTERNAL, f"may have been processed: {why}",
                                                              local=True))
        self.outstanding.clear()
        self.conn.close()
        self.closed = True
        raise ProtocolViolation(why)

    # -- frames in
    def _dispatch(self, frame: Frame) -> None:
        now = time.monotonic()
        if frame.type in (FrameType.RESPONSE, FrameType.ERROR):
            rid = frame.request_id
            self.reply_counts[rid] = self.reply_counts.get(rid, 0) + 1
            if rid in self.abandoned:  # a late reply to a call we gave up on: dropped, id freed
                self.abandoned.discard(rid)
                self.outstanding.pop(rid, None)
                if rid in self.results:
                    self.results[rid].received_at = now
                    self.results[rid].late = (frame.type, frame.payload)
                return
            if rid not in self.outstanding:
                self._violate(f"{frame.type_name()} for request id {rid}, which is not outstanding")
            self.outstanding.pop(rid)
            if now > self.local_deadlines.pop(rid, now):
                # Read after the call's own deadline (a blocking read can overshoot it): the call
                # failed at its deadline (section 6) and this reply is late, dropped like any other.
                self.results[rid] = Result(rid, 0, error=RpcError(
                    Status.DEADLINE_EXCEEDED, "may have been processed", local=True),
                    received_at=now, late=(frame.type, frame.payload))
                return
            if frame.type == FrameType.RESPONSE:
                self.results[rid] = Result(rid, FrameType.RESPONSE, frame.payload, received_at=now)
            else:
                e = decode_error(frame.payload)
                self.results[rid] = Result(rid, FrameType.ERROR, error=RpcError(e.status, e.message, e.details),
                                           received_at=now)
        elif frame.type == FrameType.PING:
            if len(frame.payload) != 8:
                self._violate("malformed PING frame: payload is not 8 bytes")
            self.conn.send(encode_pong(frame.payload))
        elif frame.type == FrameType.PONG:
            if len(frame.payload) != 8:
                self._violate("malformed PONG frame: payload is not 8 bytes")
            self.pongs.append(frame.payload)
        elif frame.type == FrameType.GOAWAY:
            g = decode_goaway(frame.payload)
            if self.goaway is not None and g.last_request_id > self.goaway.last_request_id:
                self._violate("GOAWAY last_request_id increased")
            self.goaway = g
            # calls above last_request_id were not processed: fail them as retryable (section 9)
            for rid in [r for r in self.outstanding if r > g.last_request_id]:
                self.outstanding.pop(rid)
                self.results[rid] = Result(rid, 0, error=RpcError(Status.UNAVAILABLE,
                                                                  "not processed (above GOAWAY last_request_id)",
                                                                  local=True))
        else:  # WELCOME again, or a client-only frame type
            self._violate(f"unexpected {frame.type_name()} frame")

    def pump(self, timeout: Optional[float] = None) -> Frame:
        """Reads and handles one frame."""
        try:
            frame = self.conn.read_frame(timeout)
        except ConnectionClosed:
            self._connection_lost()
            raise
        self._dispatch(frame)
        return frame

    def _connection_lost(self):
        self.closed = True
        for rid in list(self.outstanding):
            self.outstanding.pop(rid)
            if rid not in self.results:
                self.results[rid] = Result(rid, 0, error=RpcError(
                    Status.UNAVAILABLE, "connection closed; may have been processed", local=True))

    # -- calls
    def allocate_id(self) -> int:
        rid = self.next_id
        if rid > MAX_REQUEST_ID:
            raise RpcError(Status.UNAVAILABLE, "request ids used up: open a new connection", local=True)
        self.next_id += 1
        return rid

    def start(self, method: str, message: bytes, timeout_ms: int = 0, *, request_id: Optional[int] = None,
              wait_for_slot: bool = True) -> int:
        """Sends one REQUEST; keeps at most MAX_REQUESTS_IN_FLIGHT outstanding (reads replies to make room)."""
        if self.closed or self.goaway is not None:
            raise RpcError(Status.UNAVAILABLE, "connection is going away: not processed", local=True)
        path = method if method.startswith("/") else SERVICE + method
        if wait_for_slot:
            deadline = time.monotonic() + self.timeout
            while len(self.outstanding) >= self.max_in_flight:
                self.pump(max(0.0, deadline - time.monotonic()))
        rid = self.allocate_id() if request_id is None else request_id
        if request_id is not None:
            self.next_id = max(self.next_id, rid + 1)
        self.outstanding[rid] = time.monotonic()
        self.conn.send(encode_request(rid, path, message, timeout_ms))
        return rid

    def wait(self, rid: int, timeout: Optional[float] = None) -> Result:
        """Reads frames until the call `rid` has a result (or the bound passes: socket.timeout)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while rid not in self.results:
            self.pump(max(0.0, deadline - time.monotonic()))
        return self.results[rid]

    def wait_all(self, ids: Iterable[int], timeout: Optional[float] = None) -> Dict[int, Result]:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        ids = list(ids)
        for rid in ids:
            self.wait(rid, max(0.0, deadline - time.monotonic()))
        return {rid: self.results[rid] for rid in ids}

    def cancel(self, rid: int) -> None:
        """Sends CANCEL; the id stays taken until the server's one reply arrives."""
        self.conn.send(encode_cancel(rid))

    def call_raw(self, method: str, message: bytes, timeout_ms: int = 0, *, client_deadline: bool = True) -> Result:
        """One call. With a timeout, the client gives up at send time + timeout (section 6):
        it fails the call DEADLINE_EXCEEDED and sends CANCEL; the id stays taken. A reply that a
        blocking read returns only after the deadline (the read's timeout can overshoot it) is late:
        the call fails the same way, the reply is kept in `late`, and the id is free."""
        rid = self.start(method, message, timeout_ms)
        if timeout_ms and client_deadline:
            local_deadline = self.outstanding[rid] + timeout_ms / 1000.0
            self.local_deadlines[rid] = local_deadline
            while rid not in self.results:
                remaining = local_deadline - time.monotonic()
                if remaining <= 0:
                    self.abandoned.add(rid)
                    self.cancel(rid)
                    self.results[rid] = Result(rid, 0, error=RpcError(
                        Status.DEADLINE_EXCEEDED, "may have been processed", local=True))
                    break
                try:
                    self.pump(min(remaining, self.timeout))
                except socket.timeout:
                    continue
            self.local_deadlines.pop(rid, None)
            return self.results[rid]
        return self.wait(rid)

    def call(self, method: str, request, timeout_ms: int = 0, **kw):
        """A typed call: returns the reply message or raises RpcError."""
        req_name, reply_name = METHODS[method]
        assert type(request).__name__ == req_name, f"{method} takes {req_name}"
        result = self.call_raw(method, request.SerializeToString(), timeout_ms, **kw)
        if not result.ok:
            raise result.error
        return self.decode_reply(method, result.payload)

    def decode_reply(self, method: str, payload: bytes):
        reply = getattr(self.pb, METHODS[method][1])()
        reply.ParseFromString(payload)
        return reply

    # convenience wrappers; the fields are the .proto's (the activity requests take the
    # channel ones too: channel_id, input_push_token, channel_only, strict_priority_budget)
    def register_token(self, **fields):
        return self.call("RegisterToken", self.pb.RegisterTokenRequest(**fields))

    def start_activity(self, **fields):
        return self.call("StartActivity", self.pb.StartActivityRequest(**fields))

    def update_activity(self, **fields):
        return self.call("UpdateActivity", self.pb.UpdateActivityRequest(**fields))

    def end_activity(self, **fields):
        return self.call("EndActivity", self.pb.EndActivityRequest(**fields))

    def ping_rpc(self, payload: bytes = b""):
        return self.call("Ping", self.pb.PingRequest(payload=payload))

    def create_channel(self, app_id: str, environment, storage_policy, **kw):
        """A broadcast channel (section 16). `environment` and `storage_policy` are the enums'
        numbers or names ("ENVIRONMENT_PRODUCTION", "CHANNEL_STORAGE_POLICY_NO_STORAGE")."""
        return self.call("CreateChannel", self.pb.CreateChannelRequest(
            app_id=app_id, environment=environment, storage_policy=storage_policy), **kw)

    def list_channels(self, app_id: str, environment=0, page_size: int = 0, page_token: str = "", **kw):
        """One page of the app's channels; environment 0 (UNSPECIFIED) lists both."""
        return self.call("ListChannels", self.pb.ListChannelsRequest(
            app_id=app_id, environment=environment, page_size=page_size, page_token=page_token), **kw)

    def all_channels(self, app_id: str, environment=0, page_size: int = 0) -> list:
        """Every channel, following next_page_token until the last (empty) one."""
        channels, token = [], ""
        while True:
            page = self.list_channels(app_id, environment, page_size, token)
            channels.extend(page.channels)
            token = page.next_page_token
            if not token:
                return channels

    def delete_channel(self, app_id: str, channel_id: str, **kw):
        return self.call("DeleteChannel", self.pb.DeleteChannelRequest(app_id=app_id, channel_id=channel_id), **kw)

    def ping_frame(self, data: bytes, timeout: Optional[float] = None) -> bytes:
        """PING frame; waits for the PONG with the same 8 bytes."""
        self.conn.send(encode_ping(data))
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while data not in self.pongs:
            self.pump(max(0.0, deadline - time.monotonic()))
        self.pongs.remove(data)
        return data

    def close(self, timeout: Optional[float] = None) -> None:
        """Graceful close (section 9): GOAWAY NO_ERROR, wait for outstanding replies, close."""
        if self.closed:
            return
        try:
            self.conn.send(encode_goaway(0, GoAwayCode.NO_ERROR, "client closing"))
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
            while self.outstanding or self.abandoned:
                self.pump(max(0.0, deadline - time.monotonic()))
        except (ConnectionClosed, OSError, ProtocolViolation):
            pass
        finally:
            self.conn.close()
            self.closed = True
