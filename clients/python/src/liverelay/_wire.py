"""The frame codec of the LiveRelay wire protocol, version 1 (docs/PROTOCOL.md, sections 2-5).

Pure functions over bytes, with no I/O, so that every layout rule can be
tested against the hex dumps of the document without a server. A payload
that breaks a rule raises ``FrameError``, whose message names the frame and
the field, because the connection turns it into a GOAWAY ``PROTOCOL_ERROR``
and a person reading the log needs to know what was wrong.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

MAGIC = b"LRPC\r\n\x1a\n"
"""The 8-byte connection preface: makes the usual mix-ups (HTTP, TLS to a
plaintext port, line-ending translation) fail on the first byte."""

HEADER = struct.Struct(">IBBI")  # length u32, type u8, flags u8, request_id u32
HEADER_SIZE = HEADER.size

PROTOCOL_VERSION = 1
MAX_HELLO_PAYLOAD = 4096
MAX_REQUEST_ID = 0xFFFFFFFF
MAX_TIMEOUT_MS = 0xFFFFFFFF
MIN_MAX_FRAME_SIZE = 16_384
MAX_MAX_FRAME_SIZE = 16_777_215
DEFAULT_MAX_FRAME_SIZE = 1_048_576
DEFAULT_MAX_REQUESTS_IN_FLIGHT = 100


class FrameType(enum.IntEnum):
    HELLO = 0x01
    WELCOME = 0x02
    REQUEST = 0x03
    RESPONSE = 0x04
    ERROR = 0x05
    CANCEL = 0x06
    PING = 0x07
    PONG = 0x08
    GOAWAY = 0x09


_CONNECTION_LEVEL = frozenset(
    {FrameType.HELLO, FrameType.WELCOME, FrameType.PING, FrameType.PONG, FrameType.GOAWAY}
)
_CLIENT_ONLY = frozenset({FrameType.HELLO, FrameType.REQUEST, FrameType.CANCEL})
_SERVER_ONLY = frozenset({FrameType.WELCOME, FrameType.RESPONSE, FrameType.ERROR})


class GoAwayCode(enum.IntEnum):
    """Why a connection ends (section 3.10). Unknown codes are treated like INTERNAL_ERROR."""

    NO_ERROR = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2
    FRAME_SIZE_ERROR = 3
    UNSUPPORTED_VERSION = 4
    UNAUTHENTICATED = 5
    IDLE_TIMEOUT = 6
    HELLO_TIMEOUT = 7
    ENHANCE_YOUR_CALM = 8
    TOO_MANY_CONNECTIONS = 9


def goaway_code_name(code: int) -> str:
    try:
        return GoAwayCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


class Setting(enum.IntEnum):
    MAX_FRAME_SIZE = 0x0001
    MAX_REQUESTS_IN_FLIGHT = 0x0002
    IDLE_TIMEOUT_MS = 0x0003


class FrameError(Exception):
    """A frame that breaks a rule of docs/PROTOCOL.md (the peer's fault)."""


@dataclass(frozen=True)
class Frame:
    type: int
    flags: int
    request_id: int
    payload: bytes


@dataclass(frozen=True)
class GoAway:
    last_request_id: int
    code: int
    reason: str


@dataclass(frozen=True)
class ErrorFrame:
    status: int
    message: str
    details: bytes


@dataclass(frozen=True)
class Welcome:
    version: int
    settings: Dict[int, int]

    @property
    def max_frame_size(self) -> int:
        return self.settings.get(Setting.MAX_FRAME_SIZE, DEFAULT_MAX_FRAME_SIZE)

    @property
    def max_requests_in_flight(self) -> int:
        return self.settings.get(Setting.MAX_REQUESTS_IN_FLIGHT, DEFAULT_MAX_REQUESTS_IN_FLIGHT)

    @property
    def idle_timeout_ms(self) -> int:
        return self.settings.get(Setting.IDLE_TIMEOUT_MS, 0)


# ---------------------------------------------------------------- encoding


def encode_frame(frame_type: int, request_id: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(len(payload), frame_type, 0, request_id) + payload


def encode_settings(settings: Mapping[int, int]) -> bytes:
    return b"".join(struct.pack(">HI", int(k), int(v)) for k, v in settings.items())


def encode_hello(
    api_key: bytes,
    client_name: str,
    settings: Mapping[int, int],
    min_version: int = PROTOCOL_VERSION,
    max_version: int = PROTOCOL_VERSION,
) -> bytes:
    """A whole HELLO frame. Raises ValueError for an argument the format cannot carry."""
    name = client_name.encode("utf-8")
    if not 1 <= len(api_key) <= 512:
        # The length only: the key itself must never reach a message.
        raise ValueError(f"the API key must be 1 to 512 bytes, it is {len(api_key)}")
    if len(name) > 255:
        raise ValueError(f"the client name must be at most 255 bytes of UTF-8, it is {len(name)}")
    if not 0 <= min_version <= max_version <= 0xFFFF:
        raise ValueError("min_version must be at most max_version")
    payload = (
        struct.pack(">HHH", min_version, max_version, len(api_key))
        + api_key
        + struct.pack(">B", len(name))
        + name
        + encode_settings(settings)
    )
    if len(payload) > MAX_HELLO_PAYLOAD:
        raise ValueError("the HELLO payload is above 4096 bytes")
    return encode_frame(FrameType.HELLO, 0, payload)


def encode_request_header(request_id: int, method: bytes, timeout_ms: int, message_length: int) -> bytes:
    """The header and the fixed fields of a REQUEST, without its message, so the
    message's bytes need not be copied into a new buffer."""
    return HEADER.pack(
        5 + len(method) + message_length, FrameType.REQUEST, 0, request_id
    ) + struct.pack(">IB", timeout_ms, len(method)) + method


def encode_request(request_id: int, method: str, message: bytes, timeout_ms: int = 0) -> bytes:
    m = check_method(method)
    if not 0 <= timeout_ms <= MAX_TIMEOUT_MS:
        raise ValueError(f"timeout_ms {timeout_ms} is not in 0...{MAX_TIMEOUT_MS}")
    return encode_request_header(request_id, m, timeout_ms, len(message)) + message


def check_method(method: str) -> bytes:
    m = method.encode("ascii", errors="replace")
    if not 1 <= len(m) <= 255 or any(not 0x21 <= c <= 0x7E for c in m):
        raise ValueError(f"method {method!r} is not 1 to 255 bytes of printable ASCII")
    return m


def encode_cancel(request_id: int) -> bytes:
    return encode_frame(FrameType.CANCEL, request_id)


def encode_ping(data: bytes) -> bytes:
    if len(data) != 8:
        raise ValueError("PING data is exactly 8 bytes")
    return encode_frame(FrameType.PING, 0, data)


def encode_pong(data: bytes) -> bytes:
    if len(data) != 8:
        raise ValueError("PONG data is exactly 8 bytes")
    return encode_frame(FrameType.PONG, 0, data)


def encode_goaway(last_request_id: int, code: int, reason: str = "") -> bytes:
    r = _cut_utf8(reason, 0xFFFF)
    return encode_frame(FrameType.GOAWAY, 0, struct.pack(">IIH", last_request_id, code, len(r)) + r)


def encode_error_payload(status: int, message: str, details: bytes = b"") -> bytes:
    """An ERROR payload (the server's frame; the tests' fake server sends it)."""
    m = _cut_utf8(message, 0xFFFF)
    return struct.pack(">BH", status, len(m)) + m + details


def encode_welcome(settings: Mapping[int, int], version: int = PROTOCOL_VERSION) -> bytes:
    """A WELCOME frame (the server's frame; the tests' fake server sends it)."""
    return encode_frame(FrameType.WELCOME, 0, struct.pack(">H", version) + encode_settings(settings))


def _cut_utf8(text: str, limit: int) -> bytes:
    """At most `limit` bytes, cut at a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return data
    return data[:limit].decode("utf-8", errors="ignore").encode("utf-8")


# ---------------------------------------------------------------- decoding


def check_header(length: int, frame_type: int, request_id: int, max_frame_size: int, from_server: bool = True) -> FrameType:
    """The checks a receiver makes from the header alone, before it reads the
    payload (section 3.1), so an oversized frame is refused without buffering it."""
    try:
        kind = FrameType(frame_type)
    except ValueError:
        raise FrameError(f"unknown frame type 0x{frame_type:02X}") from None
    if length > max_frame_size:
        raise FrameError(f"{kind.name} frame of {length} bytes is above MAX_FRAME_SIZE {max_frame_size}")
    if kind in _CONNECTION_LEVEL:
        if request_id != 0:
            raise FrameError(f"{kind.name} frame with request id {request_id}, not 0")
    elif request_id == 0:
        raise FrameError(f"{kind.name} frame with request id 0")
    if from_server and kind in _CLIENT_ONLY:
        raise FrameError(f"{kind.name} frame from the server")
    if not from_server and kind in _SERVER_ONLY:
        raise FrameError(f"{kind.name} frame from the client")
    return kind


class FrameReader:
    """Splits a byte stream into frames, checking each header before its payload is buffered."""

    def __init__(self, max_frame_size: int, from_server: bool = True) -> None:
        self.max_frame_size = max_frame_size
        self.from_server = from_server
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_frame(self) -> Optional[Frame]:
        """The next whole frame, or None until more bytes arrive. Raises FrameError."""
        buf = self._buffer
        if len(buf) < HEADER_SIZE:
            return None
        length, frame_type, flags, request_id = HEADER.unpack_from(buf, 0)
        check_header(length, frame_type, request_id, self.max_frame_size, self.from_server)
        end = HEADER_SIZE + length
        if len(buf) < end:
            return None
        payload = bytes(buf[HEADER_SIZE:end])
        del buf[:end]
        return Frame(frame_type, flags, request_id, payload)

    @property
    def buffered(self) -> int:
        return len(self._buffer)


def decode_settings(data: bytes, frame_name: str) -> Dict[int, int]:
    if len(data) % 6:
        raise FrameError(f"malformed {frame_name} frame: settings of {len(data)} bytes are not pairs of 6")
    out: Dict[int, int] = {}
    for offset in range(0, len(data), 6):
        ident, value = struct.unpack_from(">HI", data, offset)
        out[ident] = value
    return out


def decode_welcome(payload: bytes) -> Welcome:
    if len(payload) < 2:
        raise FrameError("malformed WELCOME frame: the version is missing")
    (version,) = struct.unpack_from(">H", payload, 0)
    settings = decode_settings(payload[2:], "WELCOME")
    mfs = settings.get(Setting.MAX_FRAME_SIZE)
    if mfs is not None and not MIN_MAX_FRAME_SIZE <= mfs <= MAX_MAX_FRAME_SIZE:
        raise FrameError(f"malformed WELCOME frame: MAX_FRAME_SIZE {mfs} is not in 16384...16777215")
    mrif = settings.get(Setting.MAX_REQUESTS_IN_FLIGHT)
    if mrif is not None and mrif < 1:
        raise FrameError("malformed WELCOME frame: MAX_REQUESTS_IN_FLIGHT is 0")
    return Welcome(version, settings)


def decode_hello(payload: bytes) -> Tuple[int, int, bytes, str, Dict[int, int]]:
    """-> (min_version, max_version, api_key, client_name, settings); for the tests' fake server."""
    if len(payload) < 6:
        raise FrameError("malformed HELLO frame: shorter than its fixed fields")
    min_v, max_v, key_len = struct.unpack_from(">HHH", payload, 0)
    offset = 6 + key_len
    if offset + 1 > len(payload):
        raise FrameError("malformed HELLO frame: the API key runs past the payload")
    key = payload[6:offset]
    name_len = payload[offset]
    name = payload[offset + 1 : offset + 1 + name_len].decode("utf-8")
    settings = decode_settings(payload[offset + 1 + name_len :], "HELLO")
    return min_v, max_v, bytes(key), name, settings


def decode_request(payload: bytes) -> Tuple[int, str, bytes]:
    """-> (timeout_ms, method, message); for the tests' fake server."""
    if len(payload) < 5:
        raise FrameError("malformed REQUEST frame: shorter than its fixed fields")
    timeout_ms, method_len = struct.unpack_from(">IB", payload, 0)
    method = payload[5 : 5 + method_len].decode("ascii")
    return timeout_ms, method, bytes(payload[5 + method_len :])


def decode_error(payload: bytes) -> ErrorFrame:
    if len(payload) < 3:
        raise FrameError("malformed ERROR frame: shorter than the status and the message length")
    status, message_length = struct.unpack_from(">BH", payload, 0)
    if not 1 <= status <= 16:
        raise FrameError(f"malformed ERROR frame: status code {status} is not in 1...16")
    end = 3 + message_length
    if end > len(payload):
        raise FrameError("malformed ERROR frame: the message runs past the payload")
    try:
        message = payload[3:end].decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("malformed ERROR frame: the message is not valid UTF-8") from None
    return ErrorFrame(status, message, bytes(payload[end:]))


def decode_goaway(payload: bytes) -> GoAway:
    if len(payload) < 10:
        raise FrameError("malformed GOAWAY frame: shorter than 10 bytes")
    last, code, reason_length = struct.unpack_from(">IIH", payload, 0)
    if 10 + reason_length != len(payload):
        raise FrameError(f"malformed GOAWAY frame: reason length {reason_length} does not match the payload")
    try:
        reason = payload[10:].decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("malformed GOAWAY frame: the reason is not valid UTF-8") from None
    return GoAway(last, code, reason)
