"""The frame codec against the byte dumps of docs/PROTOCOL.md section 12 (no server)."""

from __future__ import annotations

import pytest

from liverelay import _wire as wire
from liverelay import pb
from liverelay.errors import (
    ApiKeyRevokedError,
    OutcomeUnknownError,
    Processing,
    RpcError,
    Status,
    UnavailableError,
    error_for_status,
)


def unhex(text: str) -> bytes:
    """The leading hex pairs of each line of a dump; the comments after them are ignored."""
    out = bytearray()
    for line in text.strip().splitlines():
        for word in line.split():
            if len(word) == 2 and all(c in "0123456789ABCDEFabcdef" for c in word):
                out.append(int(word, 16))
            else:
                break
    return bytes(out)


CLIENT_TO_SERVER = """
4C 52 50 43 0D 0A 1A 0A                            preface
00 00 00 1C 01 00 00 00 00 00                      HELLO header
00 01 00 01                                        min_version 1, max_version 1
00 0B 6C 72 5F 64 65 6D 6F 5F 6B 65 79             api_key
04 64 65 6D 6F                                     client_name "demo"
00 01 00 10 00 00                                  MAX_FRAME_SIZE = 1048576
00 00 00 25 03 00 00 00 00 01                      REQUEST header
00 00 13 88                                        timeout_ms 5000
1C 2F 6C 69 76 65 72 65 6C 61 79 2E 76 31 2E 4C    method
69 76 65 52 65 6C 61 79 2F 50 69 6E 67             method
0A 02 68 69                                        PingRequest
"""

SERVER_TO_CLIENT = """
00 00 00 14 02 00 00 00 00 00                      WELCOME header
00 01                                              version 1
00 01 00 10 00 00                                  MAX_FRAME_SIZE = 1048576
00 02 00 00 00 64                                  MAX_REQUESTS_IN_FLIGHT = 100
00 03 00 04 93 E0                                  IDLE_TIMEOUT_MS = 300000
00 00 00 10 04 00 00 00 00 01                      RESPONSE header
0A 02 68 69                                        PingReply payload
10 80 D0 95 FF BC 31                               server_time_ms
1A 03 31 2E 30                                     server_version
"""

ERROR_EXAMPLE = """
00 00 00 16 05 00 00 00 00 01                      ERROR header
05                                                 NOT_FOUND
00 10 6E 6F 20 73 75 63 68 20 61 63 74 69 76 69    message
74 79                                              message
1A 01 78                                           ErrorDetails reason "x"
"""


def frames(data: bytes) -> list:
    reader = wire.FrameReader(wire.DEFAULT_MAX_FRAME_SIZE)
    reader.feed(data)
    out = []
    while True:
        frame = reader.next_frame()
        if frame is None:
            break
        out.append(frame)
    assert reader.buffered == 0
    return out


def test_client_bytes_match_the_document() -> None:
    ping = pb.PingRequest(payload=b"hi").SerializeToString()
    got = (
        wire.MAGIC
        + wire.encode_hello(b"lr_demo_key", "demo", {wire.Setting.MAX_FRAME_SIZE: 1048576})
        + wire.encode_request(1, "/liverelay.v1.LiveRelay/Ping", ping, 5000)
    )
    assert got.hex() == unhex(CLIENT_TO_SERVER).hex()


def test_server_bytes_decode() -> None:
    welcome_frame, response = frames(unhex(SERVER_TO_CLIENT))
    assert welcome_frame.type == wire.FrameType.WELCOME
    welcome = wire.decode_welcome(welcome_frame.payload)
    assert (welcome.version, welcome.max_frame_size, welcome.max_requests_in_flight, welcome.idle_timeout_ms) == (
        1, 1048576, 100, 300000,
    )
    assert (response.type, response.request_id) == (wire.FrameType.RESPONSE, 1)
    reply = pb.PingReply.FromString(response.payload)
    assert (reply.payload, reply.server_time_ms, reply.server_version) == (b"hi", 1700000000000, "1.0")
    assert wire.encode_welcome({1: 1048576, 2: 100, 3: 300000}) == unhex(SERVER_TO_CLIENT)[:30]
    made = wire.encode_frame(
        wire.FrameType.RESPONSE, 1,
        pb.PingReply(payload=b"hi", server_time_ms=1700000000000, server_version="1.0").SerializeToString(),
    )
    assert made == unhex(SERVER_TO_CLIENT)[30:]


def test_error_frame_decodes_with_details() -> None:
    (frame,) = frames(unhex(ERROR_EXAMPLE))
    error = wire.decode_error(frame.payload)
    assert (error.status, error.message) == (Status.NOT_FOUND, "no such activity")
    assert pb.ErrorDetails.FromString(error.details).reason == "x"
    made = wire.encode_frame(
        wire.FrameType.ERROR, 1,
        wire.encode_error_payload(5, "no such activity", pb.ErrorDetails(reason="x").SerializeToString()),
    )
    assert made == unhex(ERROR_EXAMPLE)


def test_control_frames() -> None:
    assert wire.encode_cancel(9) == unhex("00 00 00 00 06 00 00 00 00 09")
    data = bytes(range(1, 9))
    assert wire.encode_ping(data) == unhex("00 00 00 08 07 00 00 00 00 00 01 02 03 04 05 06 07 08")
    assert wire.encode_pong(data) == unhex("00 00 00 08 08 00 00 00 00 00 01 02 03 04 05 06 07 08")
    goaway = unhex("00 00 00 0D 09 00 00 00 00 00 00 00 00 05 00 00 00 00 00 03 62 79 65")
    assert wire.encode_goaway(5, wire.GoAwayCode.NO_ERROR, "bye") == goaway
    (frame,) = frames(goaway)
    assert wire.decode_goaway(frame.payload) == wire.GoAway(5, 0, "bye")


def test_goaway_code_names() -> None:
    assert wire.goaway_code_name(9) == "TOO_MANY_CONNECTIONS"
    assert wire.goaway_code_name(99) == "UNKNOWN_99"


def test_frames_split_anywhere_are_reassembled() -> None:
    data = unhex(SERVER_TO_CLIENT)
    reader = wire.FrameReader(wire.DEFAULT_MAX_FRAME_SIZE)
    got = []
    for byte in data:
        reader.feed(bytes([byte]))
        frame = reader.next_frame()
        if frame is not None:
            got.append(frame.type)
    assert got == [wire.FrameType.WELCOME, wire.FrameType.RESPONSE]


@pytest.mark.parametrize(
    "data, message",
    [
        (wire.HEADER.pack(0, 0x0A, 0, 0), "unknown frame type 0x0A"),
        (wire.HEADER.pack(1048577, wire.FrameType.RESPONSE, 0, 1), "above MAX_FRAME_SIZE"),
        (wire.HEADER.pack(0, wire.FrameType.RESPONSE, 0, 0), "request id 0"),
        (wire.HEADER.pack(8, wire.FrameType.PING, 0, 3), "request id 3"),
        (wire.HEADER.pack(0, wire.FrameType.REQUEST, 0, 1), "from the server"),
    ],
)
def test_headers_are_checked_before_the_payload(data: bytes, message: str) -> None:
    reader = wire.FrameReader(wire.DEFAULT_MAX_FRAME_SIZE)
    reader.feed(data)
    with pytest.raises(wire.FrameError, match=message):
        reader.next_frame()


def test_malformed_payloads() -> None:
    with pytest.raises(wire.FrameError, match="status code 0 is not in 1...16"):
        wire.decode_error(b"\x00\x00\x00")
    with pytest.raises(wire.FrameError, match="GOAWAY"):
        wire.decode_goaway(unhex("00 00 00 01 00 00 00 00 00 01 78 21"))
    with pytest.raises(wire.FrameError, match="MAX_FRAME_SIZE"):
        wire.decode_welcome(b"\x00\x01" + wire.encode_settings({1: 100}))
    with pytest.raises(wire.FrameError, match="MAX_REQUESTS_IN_FLIGHT"):
        wire.decode_welcome(b"\x00\x01" + wire.encode_settings({2: 0}))


def test_hello_refuses_what_the_format_cannot_carry_without_showing_the_key() -> None:
    secret = "lrk_abcdefghijkl_" + "9" * 600
    with pytest.raises(ValueError) as info:
        wire.encode_hello(secret.encode(), "x", {})
    assert secret not in str(info.value)
    assert "9" * 20 not in str(info.value)
    with pytest.raises(ValueError):
        wire.encode_hello(b"k", "n" * 256, {})


def test_errors_by_status_and_reason() -> None:
    error = error_for_status(14, "store lost the commit", reason="OutcomeUnknown", processing=Processing.NOT_PROCESSED)
    assert isinstance(error, OutcomeUnknownError) and isinstance(error, UnavailableError)
    assert error.processing is Processing.UNKNOWN
    assert not error.retryable and error.retryable_if_idempotent
    plain = error_for_status(14, "going away", processing=Processing.NOT_PROCESSED, retry_after_ms=250)
    assert type(plain) is UnavailableError and plain.retryable and plain.retry_after == 0.25
    assert "retry after 250 ms" in str(plain)
    unknown = error_for_status(99, "what")
    assert unknown.status is Status.UNKNOWN
    revoked = ApiKeyRevokedError(Status.UNAUTHENTICATED, "revoked")
    assert isinstance(revoked, RpcError) and not revoked.retryable


def test_errors_survive_pickling() -> None:
    import pickle

    error = error_for_status(3, "bad", reason="InvalidField", field_violations=[])
    error.idempotency_key = "k1"
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert (again.status, again.message, again.reason, again.idempotency_key) == (
        Status.INVALID_ARGUMENT, "bad", "InvalidField", "k1",
    )
