"""One LiveRelay connection: a TLS (or plain TCP) stream speaking frames.

It carries out docs/PROTOCOL.md for one connection: the preface and HELLO,
WELCOME and its settings, request ids that only grow, replies matched by id,
CANCEL for calls given up locally (their ids stay taken until the server's
one reply, which is then dropped), PING answered with PONG, a keepalive PING
while calls are outstanding and nothing arrives, and GOAWAY: calls above its
last id fail as not processed, the others are still awaited.

It is an ``asyncio.Protocol`` rather than a pair of streams so that frames
from many calls are coalesced into one write per turn of the event loop and
replies are completed straight from ``data_received``, without a task per
connection or per call.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import ssl
from typing import Dict, List, Optional, Protocol, Set, Tuple

from . import _wire as wire
from ._proto.liverelay.v1 import liverelay_pb2
from .errors import (
    ApiKeyRefusedError,
    ApiKeyRevokedError,
    ConnectError,
    FieldViolation,
    Processing,
    ProtocolError,
    RpcError,
    Status,
    TooManyConnectionsError,
    UnavailableError,
    error_for_status,
)

log = logging.getLogger("liverelay")

_connection_ids = itertools.count(1)


class ConnectionListener(Protocol):
    """What a connection reports to its pool."""

    def connection_capacity(self, connection: "Connection") -> None:
        """A request slot was freed (a reply arrived)."""

    def connection_leaving(self, connection: "Connection", fatal: Optional[RpcError]) -> None:
        """The connection takes no new calls (GOAWAY, ids used up, broken); `fatal` is set
        when the API key was refused, which no other connection can fix."""

    def connection_closed(self, connection: "Connection") -> None:
        """The transport is closed; nothing is outstanding any more."""


class ConnectionStats:
    __slots__ = ("requests_sent", "cancels_sent", "late_replies", "pings_sent", "peak_in_flight")

    def __init__(self) -> None:
        self.requests_sent = 0
        self.cancels_sent = 0
        self.late_replies = 0
        self.pings_sent = 0
        self.peak_in_flight = 0


class Connection(asyncio.Protocol):
    def __init__(
        self,
        listener: ConnectionListener,
        *,
        api_key: bytes,
        client_name: str,
        max_frame_size: int,
        keepalive_interval: Optional[float],
        keepalive_timeout: float,
        label: str,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._listener = listener
        self._api_key = api_key
        self._client_name = client_name
        self._max_frame_size = max_frame_size
        self._keepalive_interval = keepalive_interval
        self._keepalive_timeout = keepalive_timeout
        self.label = label
        self.id = next(_connection_ids)
        self.stats = ConnectionStats()

        self._transport: Optional[asyncio.Transport] = None
        self._reader = wire.FrameReader(max_frame_size, from_server=True)
        self._out: List[bytes] = []
        self._flush_scheduled = False

        self.welcome: Optional[wire.Welcome] = None
        self._welcome_future: asyncio.Future[wire.Welcome] = self._loop.create_future()
        self.max_in_flight = wire.DEFAULT_MAX_REQUESTS_IN_FLIGHT
        self.server_max_frame_size = wire.DEFAULT_MAX_FRAME_SIZE

        self._next_id = 1
        self._outstanding: Dict[int, asyncio.Future[bytes]] = {}
        self._abandoned: Set[int] = set()
        self.goaway: Optional[wire.GoAway] = None
        self._going_away = False  # no new requests on this connection
        self._left = False  # the pool was told
        self._sent_goaway = False
        self._stopped_reading = False
        self.closed = False
        self._closed_future: asyncio.Future[None] = self._loop.create_future()
        self._drained = asyncio.Event()

        self._last_received = self._loop.time()
        self._quiet_since = self._last_received
        self._ping_data: Optional[bytes] = None
        self._ping_sent_at = 0.0
        self._keepalive_handle: Optional[asyncio.TimerHandle] = None

    # ------------------------------------------------------------ state

    @property
    def in_flight(self) -> int:
        """Ids taken: calls waiting for their reply, and calls given up locally whose reply
        has not come yet (the protocol frees an id only when its reply arrives)."""
        return len(self._outstanding) + len(self._abandoned)

    @property
    def usable(self) -> bool:
        return self.welcome is not None and not self._going_away and not self.closed

    @property
    def has_capacity(self) -> bool:
        return self.usable and self.in_flight < self.max_in_flight

    # ------------------------------------------------------------ opening

    async def open(
        self,
        host: str,
        port: int,
        ssl_context: Optional[ssl.SSLContext],
        server_hostname: Optional[str],
        timeout: float,
    ) -> None:
        """TCP, TLS, preface and HELLO, then WELCOME. Raises an RpcError subclass:
        ConnectError, TooManyConnectionsError, ApiKeyRefusedError, UnavailableError or
        ProtocolError, all NOT_PROCESSED (nothing is sent before WELCOME)."""
        loop = self._loop
        deadline = loop.time() + timeout
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: self,
                    host,
                    port,
                    ssl=ssl_context,
                    server_hostname=(server_hostname or host) if ssl_context is not None else None,
                ),
                timeout,
            )
        except asyncio.TimeoutError:
            raise self._connect_error(f"cannot connect to {self.label}: no connection within {timeout:g} s") from None
        except ssl.SSLCertVerificationError as error:
            raise self._connect_error(
                f"cannot connect to {self.label}: TLS certificate verification failed: {error.verify_message}"
            ) from None
        except (OSError, ssl.SSLError) as error:
            detail = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise self._connect_error(f"cannot connect to {self.label}: {detail}") from None
        try:
            await asyncio.wait_for(asyncio.shield(self._welcome_future), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            self.abort()
            raise self._connect_error(f"no WELCOME from {self.label} within {timeout:g} s") from None
        except asyncio.CancelledError:
            self.abort()
            raise

    def _connect_error(self, message: str) -> ConnectError:
        return ConnectError(Status.UNAVAILABLE, message, processing=Processing.NOT_PROCESSED, local=True)

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        hello = wire.encode_hello(
            self._api_key, self._client_name, {wire.Setting.MAX_FRAME_SIZE: self._max_frame_size}
        )
        self._write(wire.MAGIC + hello)

    def data_received(self, data: bytes) -> None:
        if self._stopped_reading:
            return
        self._last_received = self._loop.time()
        self._reader.feed(data)
        try:
            while not self._stopped_reading:
                frame = self._reader.next_frame()
                if frame is None:
                    break
                self._on_frame(frame)
        except wire.FrameError as error:
            self._violation(str(error))

    def eof_received(self) -> Optional[bool]:
        return None  # close the transport

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        self._cancel_keepalive()
        if not self._welcome_future.done():
            why = f": {exc}" if exc else ""
            self._welcome_future.set_exception(
                self._connect_error(f"{self.label} closed the connection before WELCOME{why}")
            )
            self._welcome_future.exception()  # retrieved: open() may have given up already
        if self._outstanding:
            error = UnavailableError(
                Status.UNAVAILABLE,
                "the connection was lost before the reply came" + (f" ({exc})" if exc else ""),
                processing=Processing.UNKNOWN,
                local=True,
            )
            self._fail_all(error)
        self._abandoned.clear()
        self._drained.set()
        self._leave(None)
        if not self._closed_future.done():
            self._closed_future.set_result(None)
        self._listener.connection_closed(self)

    # ------------------------------------------------------------ frames in

    def _on_frame(self, frame: wire.Frame) -> None:
        kind = frame.type
        if self.welcome is None:
            if kind == wire.FrameType.WELCOME:
                self._on_welcome(frame.payload)
            elif kind == wire.FrameType.GOAWAY:
                self._on_goaway(frame.payload)
            elif kind == wire.FrameType.PING:
                self._on_ping(frame.payload)
            else:
                self._violation(f"{wire.FrameType(kind).name} frame before WELCOME")
            return
        if kind == wire.FrameType.RESPONSE or kind == wire.FrameType.ERROR:
            self._on_reply(frame)
        elif kind == wire.FrameType.PING:
            self._on_ping(frame.payload)
        elif kind == wire.FrameType.PONG:
            if len(frame.payload) != 8:
                self._violation("malformed PONG frame: the payload is not 8 bytes")
            elif frame.payload == self._ping_data:
                self._ping_data = None
        elif kind == wire.FrameType.GOAWAY:
            self._on_goaway(frame.payload)
        else:
            self._violation(f"a second {wire.FrameType(kind).name} frame")

    def _on_welcome(self, payload: bytes) -> None:
        welcome = wire.decode_welcome(payload)
        if welcome.version != wire.PROTOCOL_VERSION:
            self._write(wire.encode_goaway(0, wire.GoAwayCode.UNSUPPORTED_VERSION, "version 1 only"))
            self._sent_goaway = True
            self._stop(
                ProtocolError(
                    Status.INTERNAL,
                    f"{self.label} chose protocol version {welcome.version}; this client speaks version 1",
                    processing=Processing.NOT_PROCESSED,
                    local=True,
                )
            )
            return
        self.welcome = welcome
        self.max_in_flight = welcome.max_requests_in_flight
        self.server_max_frame_size = welcome.max_frame_size
        self._welcome_future.set_result(welcome)
        self._arm_keepalive()
        log.debug("connection %d to %s established (max %d in flight)", self.id, self.label, self.max_in_flight)

    def _on_ping(self, payload: bytes) -> None:
        if len(payload) != 8:
            self._violation("malformed PING frame: the payload is not 8 bytes")
            return
        self._write(wire.encode_pong(payload))

    def _on_goaway(self, payload: bytes) -> None:
        goaway = wire.decode_goaway(payload)
        if self.goaway is not None and goaway.last_request_id > self.goaway.last_request_id:
            self._violation("GOAWAY last_request_id increased")
            return
        self.goaway = goaway
        code_name = wire.goaway_code_name(goaway.code)
        log.info(
            "connection %d to %s: GOAWAY %s, last request id %d: %s",
            self.id, self.label, code_name, goaway.last_request_id, goaway.reason,
        )
        if self.welcome is None:
            error = _refusal_at_hello(goaway, self.label)
            self._going_away = True
            self._welcome_future.set_exception(error)
            self._welcome_future.exception()
            self._close_transport()
            return
        self._going_away = True
        fatal: Optional[RpcError] = None
        unprocessed: RpcError
        if goaway.code == wire.GoAwayCode.UNAUTHENTICATED:
            fatal = ApiKeyRevokedError(
                Status.UNAUTHENTICATED,
                f"the server refused the API key on an open connection (revoked or changed): {goaway.reason}",
                processing=Processing.NOT_PROCESSED,
                local=True,
            )
            unprocessed = fatal
        else:
            unprocessed = UnavailableError(
                Status.UNAVAILABLE,
                f"not processed: the server is going away ({code_name}: {goaway.reason})",
                processing=Processing.NOT_PROCESSED,
                local=True,
            )
        for request_id in [r for r in self._outstanding if r > goaway.last_request_id]:
            future = self._outstanding.pop(request_id)
            if not future.done():
                future.set_exception(unprocessed._copy())
        self._abandoned = {r for r in self._abandoned if r <= goaway.last_request_id}
        self._leave(fatal)
        if self.in_flight == 0:
            self._drained.set()
            self._close_transport()

    def _on_reply(self, frame: wire.Frame) -> None:
        request_id = frame.request_id
        if request_id in self._abandoned:
            # The reply to a call given up locally (deadline, cancel): dropped, its id freed.
            self._abandoned.discard(request_id)
            self.stats.late_replies += 1
            self._freed()
            return
        future = self._outstanding.pop(request_id, None)
        if future is None:
            self._violation(
                f"{wire.FrameType(frame.type).name} for request id {request_id}, which is not outstanding"
            )
            return
        if frame.type == wire.FrameType.RESPONSE:
            if not future.done():
                future.set_result(frame.payload)
        else:
            try:
                error = self._error_from(wire.decode_error(frame.payload))
            except wire.FrameError as bad:
                if not future.done():
                    future.set_exception(self._violation_error(str(bad)))
                self._violation(str(bad))
                return
            if not future.done():
                future.set_exception(error)
        self._freed()

    @staticmethod
    def _error_from(frame: wire.ErrorFrame) -> RpcError:
        reason = ""
        violations: Tuple[FieldViolation, ...] = ()
        retry_after_ms: Optional[int] = None
        message = frame.message
        if frame.details:
            details = liverelay_pb2.ErrorDetails()
            try:
                details.ParseFromString(frame.details)
            except Exception:  # the details are an extra: a bad one must not hide the status
                message += " (undecodable ErrorDetails)"
            else:
                reason = details.reason
                violations = tuple(FieldViolation(v.field, v.description) for v in details.field_violations)
                retry_after_ms = details.retry_after_ms or None
        # UNAVAILABLE means "not processed" (docs/PROTOCOL.md section 7), except OutcomeUnknown,
        # which error_for_status turns into Processing.UNKNOWN. A call stopped at its deadline
        # or by CANCEL may have been stored all the same (sections 6 and 8).
        if frame.status == Status.UNAVAILABLE:
            processing = Processing.NOT_PROCESSED
        elif frame.status in (Status.DEADLINE_EXCEEDED, Status.CANCELLED):
            processing = Processing.UNKNOWN
        else:
            processing = Processing.ANSWERED
        return error_for_status(
            frame.status,
            message,
            reason=reason,
            field_violations=violations,
            retry_after_ms=retry_after_ms,
            processing=processing,
        )

    def _freed(self) -> None:
        if self.in_flight == 0:
            self._quiet_since = self._loop.time()
            if self._going_away:
                # Nothing more will come that anyone waits for: after a GOAWAY the server
                # closes too (section 9), and a connection that left its pool for another
                # reason (ids used up, the client closing) has no use left.
                self._drained.set()
                self._close_transport()
                return
        if self.usable:
            self._listener.connection_capacity(self)

    # ------------------------------------------------------------ calls

    def send_request(self, method: bytes, message: bytes, timeout_ms: int) -> Tuple[int, "asyncio.Future[bytes]"]:
        """Writes one REQUEST; the caller checked `has_capacity`."""
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[bytes] = self._loop.create_future()
        if self.in_flight == 0:
            self._quiet_since = self._loop.time()
        self._outstanding[request_id] = future
        self.stats.requests_sent += 1
        if self.in_flight > self.stats.peak_in_flight:
            self.stats.peak_in_flight = self.in_flight
        self._out.append(wire.encode_request_header(request_id, method, timeout_ms, len(message)))
        self._out.append(message)
        self._schedule_flush()
        if self._next_id > wire.MAX_REQUEST_ID:
            # Ids never repeat on a connection: a new one takes the next calls.
            self._going_away = True
            self._leave(None)
        return request_id, future

    def abandon(self, request_id: int) -> None:
        """The caller gave up (deadline, cancellation): CANCEL the call; its id stays
        taken until the server's reply, which is then dropped (section 8)."""
        future = self._outstanding.pop(request_id, None)
        if future is None:
            return
        if not future.done():
            future.cancel()
        if self.closed or (self.goaway is not None and request_id > self.goaway.last_request_id):
            return
        self._abandoned.add(request_id)
        self.stats.cancels_sent += 1
        self._write(wire.encode_cancel(request_id))

    # ------------------------------------------------------------ closing

    async def close(self, grace: float) -> None:
        """Graceful: GOAWAY NO_ERROR, wait (at most `grace`) for outstanding replies, close."""
        if self.closed:
            return
        if self.welcome is not None and not self._sent_goaway and self._transport is not None:
            self._write(wire.encode_goaway(0, wire.GoAwayCode.NO_ERROR, "client closing"))
            self._sent_goaway = True
        self._going_away = True
        self._leave(None)
        if self.in_flight == 0:
            self._drained.set()
        try:
            await asyncio.wait_for(self._drained.wait(), grace)
        except asyncio.TimeoutError:
            pass
        self._close_transport()
        try:
            await asyncio.wait_for(asyncio.shield(self._closed_future), max(1.0, grace))
        except asyncio.TimeoutError:
            self.abort()

    def abort(self) -> None:
        if self._transport is not None and not self.closed:
            self._transport.abort()

    def _close_transport(self) -> None:
        self._flush()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def _leave(self, fatal: Optional[RpcError]) -> None:
        if not self._left:
            self._left = True
            self._going_away = True
            self._listener.connection_leaving(self, fatal)

    def _fail_all(self, error: RpcError) -> None:
        outstanding, self._outstanding = self._outstanding, {}
        for future in outstanding.values():
            if not future.done():
                future.set_exception(error._copy())

    def _violation_error(self, why: str) -> ProtocolError:
        return ProtocolError(
            Status.INTERNAL,
            f"{self.label} broke the protocol ({why}); the call may have been processed",
            processing=Processing.UNKNOWN,
            local=True,
        )

    def _violation(self, why: str) -> None:
        """The server broke the protocol: GOAWAY PROTOCOL_ERROR, fail everything, close (section 5)."""
        if self._stopped_reading or self.closed:
            return
        log.warning("connection %d to %s: protocol violation: %s", self.id, self.label, why)
        if self._transport is not None and not self._sent_goaway:
            self._write(wire.encode_goaway(0, wire.GoAwayCode.PROTOCOL_ERROR, why[:200]))
            self._sent_goaway = True
        self._stop(self._violation_error(why))

    def _stop(self, error: RpcError) -> None:
        self._stopped_reading = True
        if not self._welcome_future.done():
            error_at_hello = ProtocolError(
                error.status, error.message, processing=Processing.NOT_PROCESSED, local=True
            )
            self._welcome_future.set_exception(error_at_hello)
            self._welcome_future.exception()
        self._fail_all(error)
        self._abandoned.clear()
        self._leave(None)
        self._close_transport()

    # ------------------------------------------------------------ writing

    def _write(self, data: bytes) -> None:
        self._out.append(data)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out:
            return
        data = b"".join(self._out)
        self._out.clear()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    # ------------------------------------------------------------ keepalive

    def _arm_keepalive(self) -> None:
        if self._keepalive_interval is None or self.closed:
            return
        now = self._loop.time()
        if self._ping_data is not None:
            when = self._ping_sent_at + self._keepalive_timeout
        elif self.in_flight > 0:
            when = max(self._last_received, self._quiet_since) + self._keepalive_interval
        else:
            when = now + self._keepalive_interval
        self._keepalive_handle = self._loop.call_at(max(when, now + 0.001), self._keepalive_tick)

    def _cancel_keepalive(self) -> None:
        if self._keepalive_handle is not None:
            self._keepalive_handle.cancel()
            self._keepalive_handle = None

    def _keepalive_tick(self) -> None:
        self._keepalive_handle = None
        if self.closed or self._stopped_reading or self._keepalive_interval is None:
            return
        now = self._loop.time()
        if self._ping_data is not None:
            if now - self._ping_sent_at >= self._keepalive_timeout:
                self._dead(f"no PONG within {self._keepalive_timeout:g} s")
                return
        elif self.in_flight > 0 and now - max(self._last_received, self._quiet_since) >= self._keepalive_interval:
            self._ping_data = os.urandom(8)
            self._ping_sent_at = now
            self.stats.pings_sent += 1
            self._write(wire.encode_ping(self._ping_data))
        self._arm_keepalive()

    def _dead(self, why: str) -> None:
        log.warning("connection %d to %s is dead: %s", self.id, self.label, why)
        self._stopped_reading = True
        self._fail_all(
            UnavailableError(
                Status.UNAVAILABLE,
                f"the connection is dead ({why}); the call may have been processed",
                processing=Processing.UNKNOWN,
                local=True,
            )
        )
        self._abandoned.clear()
        self._leave(None)
        self.abort()


def _refusal_at_hello(goaway: wire.GoAway, label: str) -> RpcError:
    """What a GOAWAY instead of WELCOME means for the calls: nothing was processed (section 2)."""
    code = goaway.code
    name = wire.goaway_code_name(code)
    if code == wire.GoAwayCode.UNAUTHENTICATED:
        return ApiKeyRefusedError(
            Status.UNAUTHENTICATED,
            f"{label} refused the API key: {goaway.reason}",
            processing=Processing.NOT_PROCESSED,
            local=True,
        )
    if code == wire.GoAwayCode.TOO_MANY_CONNECTIONS:
        return TooManyConnectionsError(
            Status.UNAVAILABLE,
            f"{label} refused the connection: too many connections for this API key ({goaway.reason})",
            processing=Processing.NOT_PROCESSED,
            local=True,
        )
    if code in (
        wire.GoAwayCode.NO_ERROR,
        wire.GoAwayCode.HELLO_TIMEOUT,
        wire.GoAwayCode.INTERNAL_ERROR,
        wire.GoAwayCode.ENHANCE_YOUR_CALM,
        wire.GoAwayCode.IDLE_TIMEOUT,
    ) or name.startswith("UNKNOWN_"):
        return ConnectError(
            Status.UNAVAILABLE,
            f"{label} refused the connection: GOAWAY {name}: {goaway.reason}",
            processing=Processing.NOT_PROCESSED,
            local=True,
        )
    return ProtocolError(
        Status.INTERNAL,
        f"{label} refused the connection: GOAWAY {name}: {goaway.reason}",
        processing=Processing.NOT_PROCESSED,
        local=True,
    )
