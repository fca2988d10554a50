"""A small pool of pipelined connections to one server, and the retry loop of a call.

Calls go to the least-loaded connection below the server's
MAX_REQUESTS_IN_FLIGHT. With none, they wait in arrival order until a
connection is ready or frees a request slot, or until every connection attempt
under way has failed: then they fail with the connect error (so a caller sees
"certificate verify failed", not a time-out) and the retry policy decides.

Each slot of the pool holds at most one connection. A connection that gets
GOAWAY leaves its slot (it finishes its calls but takes no new ones) and the
slot is connected again when calls need it, after a back-off that grows with
the attempts that failed before WELCOME (TOO_MANY_CONNECTIONS among them).
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Optional, Set, Union

from . import _wire as wire
from ._connection import Connection
from .errors import (
    ClientClosedError,
    ConnectError,
    DeadlineExceededError,
    InvalidArgumentError,
    Processing,
    ResourceExhaustedError,
    RpcError,
    Status,
    UnauthenticatedError,
)
from .options import Backoff, RetryPolicy

log = logging.getLogger("liverelay")

_IDLE, _CONNECTING, _READY = "idle", "connecting", "ready"


@dataclass(frozen=True)
class ClientStats:
    """What the client has done so far, for monitoring and tests."""

    connections_opened: int
    """Connections that reached WELCOME."""
    connect_failures: int
    """Connection attempts that ended before WELCOME (refused, TLS, TOO_MANY_CONNECTIONS...)."""
    goaways_received: int
    requests_sent: int
    """REQUEST frames written, retries included."""
    retries: int
    """Calls sent again by the retry policy."""
    cancels_sent: int
    late_replies_dropped: int
    """Replies that came after their call was given up (deadline, cancel), dropped as section 8 says."""
    keepalive_pings_sent: int
    peak_in_flight: int
    """The most requests one connection had outstanding at once."""
    open_connections: int
    """Connections taking calls now."""
    draining_connections: int
    """Connections that took GOAWAY and still wait for replies."""
    in_flight: int
    waiting_calls: int


@dataclass
class PoolConfig:
    host: str
    port: int
    ssl_context: Optional[ssl.SSLContext]
    server_hostname: Optional[str]
    api_key: bytes = field(repr=False)
    client_name: str
    connections: int
    connect_timeout: float
    reconnect_backoff: Backoff
    retry: RetryPolicy
    keepalive_interval: Optional[float]
    keepalive_timeout: float
    max_pending_calls: int
    max_frame_size: int
    shutdown_grace: float


class _Slot:
    __slots__ = ("index", "state", "connection", "failures", "task")

    def __init__(self, index: int) -> None:
        self.index = index
        self.state = _IDLE
        self.connection: Optional[Connection] = None
        self.failures = 0
        self.task: Optional[asyncio.Task[None]] = None


_Wake = Union[None, RpcError]


class Pool:
    def __init__(self, config: PoolConfig) -> None:
        self.config = config
        self.loop = asyncio.get_running_loop()
        self.label = f"{config.host}:{config.port}"
        self._slots = [_Slot(i) for i in range(max(1, config.connections))]
        self._draining: Set[Connection] = set()
        self._waiters: Deque[asyncio.Future[_Wake]] = deque()
        self._fatal: Optional[RpcError] = None
        self._closed = False
        self._pending = 0
        self._connections_opened = 0
        self._connect_failures = 0
        self._goaways = 0
        self._retries = 0
        self._closed_stats = _Totals()

    # ------------------------------------------------------------ calls

    async def call(self, method: str, message: bytes, *, deadline: Optional[float], idempotent: bool) -> bytes:
        """One call with the retry policy; `deadline` is on the loop's clock (None: none).
        Returns the reply's bytes or raises an RpcError."""
        if self._pending >= self.config.max_pending_calls:
            raise ResourceExhaustedError(
                Status.RESOURCE_EXHAUSTED,
                f"{self._pending} calls already pending in the client (max_pending_calls)",
                processing=Processing.NOT_PROCESSED,
                local=True,
                method=method,
            )
        method_bytes = wire.check_method(method)
        self._pending += 1
        try:
            attempt = 0
            while True:
                attempt += 1
                try:
                    return await self._attempt(method_bytes, message, deadline)
                except RpcError as error:
                    error.attempts = attempt
                    error.method = method
                    delay = self._retry_delay(error, attempt, idempotent)
                    if delay is None:
                        raise
                    if deadline is not None and self.loop.time() + delay >= deadline:
                        raise
                    self._retries += 1
                    log.debug("resending %s (attempt %d) after %.3f s: %s", method, attempt + 1, delay, error)
                    if delay > 0:
                        await asyncio.sleep(delay)
        finally:
            self._pending -= 1

    def _retry_delay(self, error: RpcError, attempt: int, idempotent: bool) -> Optional[float]:
        """None: not resent. Otherwise the wait before the next attempt."""
        policy = self.config.retry
        if attempt >= policy.max_attempts or self._closed:
            return None
        if isinstance(error, (UnauthenticatedError, ClientClosedError)):
            return None
        if error.status is Status.UNAVAILABLE and error.processing is Processing.NOT_PROCESSED:
            if error.local and error.retry_after_ms is None:
                # Moved off a connection that got GOAWAY, or no connection could be opened:
                # the next attempt waits for a connection, whose reopening has its own back-off.
                return 0.0
            return max(error.retry_after or 0.0, policy.backoff.delay(attempt))
        if (
            error.processing is Processing.UNKNOWN
            and idempotent
            and policy.retry_unknown_outcome
            and error.status in (Status.UNAVAILABLE, Status.INTERNAL)
        ):
            return max(error.retry_after or 0.0, policy.backoff.delay(attempt))
        return None

    async def _attempt(self, method: bytes, message: bytes, deadline: Optional[float]) -> bytes:
        connection = await self._acquire(deadline)
        timeout_ms = 0
        if deadline is not None:
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                raise DeadlineExceededError(
                    Status.DEADLINE_EXCEEDED,
                    "the deadline passed before the call was sent",
                    processing=Processing.NOT_PROCESSED,
                    local=True,
                )
            timeout_ms = min(wire.MAX_TIMEOUT_MS, max(1, math.ceil(remaining * 1000)))
        frame_length = 5 + len(method) + len(message)
        if frame_length > connection.server_max_frame_size:
            raise InvalidArgumentError(
                Status.INVALID_ARGUMENT,
                f"the request is {frame_length} bytes, above the server's MAX_FRAME_SIZE "
                f"of {connection.server_max_frame_size}",
                processing=Processing.NOT_PROCESSED,
                local=True,
            )
        request_id, future = connection.send_request(method, message, timeout_ms)
        try:
            if deadline is None:
                return await future
            return await asyncio.wait_for(future, deadline - self.loop.time())
        except asyncio.TimeoutError:
            connection.abandon(request_id)
            raise DeadlineExceededError(
                Status.DEADLINE_EXCEEDED,
                "the deadline passed before the reply came",
                processing=Processing.UNKNOWN,
                local=True,
            ) from None
        except asyncio.CancelledError:
            connection.abandon(request_id)
            raise

    async def _acquire(self, deadline: Optional[float]) -> Connection:
        """A usable connection with a free request slot, waiting in arrival order for one."""
        woken = False
        while True:
            if self._closed:
                raise ClientClosedError(
                    Status.UNAVAILABLE, "the client is closed", processing=Processing.NOT_PROCESSED, local=True
                )
            if self._fatal is not None:
                raise self._fatal._copy()
            if woken or not self._waiters:
                connection = self._pick()
                if connection is not None:
                    return connection
            self._demand()
            now = self.loop.time()
            if deadline is not None and deadline <= now:
                raise self._waited_too_long()
            waiter: asyncio.Future[_Wake] = self.loop.create_future()
            if woken:
                self._waiters.appendleft(waiter)  # keep its place in the queue
            else:
                self._waiters.append(waiter)
            try:
                if deadline is None:
                    wake = await waiter
                else:
                    wake = await asyncio.wait_for(waiter, deadline - now)
            except (asyncio.TimeoutError, asyncio.CancelledError) as error:
                self._forget(waiter)
                if isinstance(error, asyncio.TimeoutError):
                    raise self._waited_too_long() from None
                raise
            if wake is not None:
                raise wake._copy()
            woken = True

    def _forget(self, waiter: "asyncio.Future[_Wake]") -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            # Already woken: pass the wake-up on, or a free slot could go unused.
            if waiter.done() and not waiter.cancelled() and waiter.result() is None:
                self._wake(1)

    def _waited_too_long(self) -> DeadlineExceededError:
        ready = any(s.state == _READY for s in self._slots)
        what = "a free request slot" if ready else "a connection"
        return DeadlineExceededError(
            Status.DEADLINE_EXCEEDED,
            f"the deadline passed while waiting for {what} to {self.label}",
            processing=Processing.NOT_PROCESSED,
            local=True,
        )

    def _pick(self) -> Optional[Connection]:
        best: Optional[Connection] = None
        for slot in self._slots:
            connection = slot.connection
            if connection is not None and connection.has_capacity:
                if best is None or connection.in_flight < best.in_flight:
                    best = connection
        return best

    def _wake(self, count: int) -> None:
        while count > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def _fail_waiters(self, error: RpcError) -> None:
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(error)

    def _free_slots(self) -> int:
        return sum(
            s.connection.max_in_flight - s.connection.in_flight
            for s in self._slots
            if s.connection is not None and s.connection.has_capacity
        )

    # ------------------------------------------------------------ connections

    def _demand(self) -> None:
        """Calls need connections: connect every idle slot."""
        if self._closed or self._fatal is not None:
            return
        for slot in self._slots:
            if slot.state == _IDLE:
                slot.state = _CONNECTING
                slot.task = self.loop.create_task(self._connect(slot))

    async def _connect(self, slot: _Slot) -> None:
        config = self.config
        try:
            delay = config.reconnect_backoff.delay(slot.failures)
            if delay > 0:
                log.debug("slot %d of %s reconnects in %.3f s", slot.index, self.label, delay)
                await asyncio.sleep(delay)
            connection = Connection(
                self,
                api_key=config.api_key,
                client_name=config.client_name,
                max_frame_size=config.max_frame_size,
                keepalive_interval=config.keepalive_interval,
                keepalive_timeout=config.keepalive_timeout,
                label=self.label,
            )
            await connection.open(
                config.host, config.port, config.ssl_context, config.server_hostname, config.connect_timeout
            )
        except asyncio.CancelledError:
            slot.state = _IDLE
            raise
        except Exception as failure:
            error = failure if isinstance(failure, RpcError) else ConnectError(
                Status.UNAVAILABLE,
                f"cannot connect to {self.label}: {failure!r}",
                processing=Processing.NOT_PROCESSED,
                local=True,
            )
            slot.state = _IDLE
            slot.failures += 1
            self._connect_failures += 1
            log.info("connection to %s failed: %s", self.label, error)
            if isinstance(error, UnauthenticatedError):
                self._set_fatal(error)
            elif not any(s.state != _IDLE for s in self._slots):
                # No other attempt can still serve the waiting calls: they fail with
                # this error, and their retry policy decides what comes next.
                self._fail_waiters(error)
            return
        if self._closed:
            connection.abort()
            slot.state = _IDLE
            return
        slot.failures = 0
        slot.connection = connection
        slot.state = _READY
        self._connections_opened += 1
        self._wake(self._free_slots())

    def _set_fatal(self, error: RpcError) -> None:
        if self._fatal is None:
            self._fatal = error
            log.warning("client of %s stops: %s", self.label, error)
        self._fail_waiters(error)

    # ConnectionListener

    def connection_capacity(self, connection: Connection) -> None:
        if self._waiters:
            self._wake(1)

    def connection_leaving(self, connection: Connection, fatal: Optional[RpcError]) -> None:
        if connection.goaway is not None:
            self._goaways += 1
        slot = next((s for s in self._slots if s.connection is connection), None)
        if slot is None:
            # An attempt that failed before WELCOME: _connect has dealt with it already, and
            # reconnecting from here would bypass its judgment of the waiting calls.
            return
        slot.connection = None
        slot.state = _IDLE
        if not connection.closed:
            self._draining.add(connection)
        if fatal is not None:
            self._set_fatal(fatal)
        elif self._waiters:
            self._demand()
            # A waiter may now fit on another connection.
            self._wake(self._free_slots())

    def connection_closed(self, connection: Connection) -> None:
        self._draining.discard(connection)
        self._closed_stats.add(connection)

    # ------------------------------------------------------------ closing and stats

    async def close(self, grace: float) -> None:
        """Fails calls that wait for a connection, lets sent ones finish (at most `grace`),
        and closes every connection."""
        if self._closed:
            return
        self._closed = True
        self._fail_waiters(
            ClientClosedError(Status.UNAVAILABLE, "the client is closed", processing=Processing.NOT_PROCESSED, local=True)
        )
        tasks = [s.task for s in self._slots if s.task is not None and not s.task.done()]
        for task in tasks:
            task.cancel()
        connections = [s.connection for s in self._slots if s.connection is not None] + list(self._draining)
        await asyncio.gather(*tasks, *(c.close(grace) for c in connections), return_exceptions=True)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def fatal(self) -> Optional[RpcError]:
        return self._fatal

    def stats(self) -> ClientStats:
        live = [s.connection for s in self._slots if s.connection is not None] + list(self._draining)
        totals = _Totals()
        totals.merge(self._closed_stats)
        for connection in live:
            totals.add(connection)
        return ClientStats(
            connections_opened=self._connections_opened,
            connect_failures=self._connect_failures,
            goaways_received=self._goaways,
            requests_sent=totals.requests_sent,
            retries=self._retries,
            cancels_sent=totals.cancels_sent,
            late_replies_dropped=totals.late_replies,
            keepalive_pings_sent=totals.pings_sent,
            peak_in_flight=totals.peak_in_flight,
            open_connections=sum(1 for s in self._slots if s.connection is not None and s.connection.usable),
            draining_connections=len(self._draining),
            in_flight=sum(c.in_flight for c in live),
            waiting_calls=len(self._waiters),
        )


class _Totals:
    def __init__(self) -> None:
        self.requests_sent = 0
        self.cancels_sent = 0
        self.late_replies = 0
        self.pings_sent = 0
        self.peak_in_flight = 0

    def add(self, connection: Connection) -> None:
        s = connection.stats
        self.requests_sent += s.requests_sent
        self.cancels_sent += s.cancels_sent
        self.late_replies += s.late_replies
        self.pings_sent += s.pings_sent
        self.peak_in_flight = max(self.peak_in_flight, s.peak_in_flight)

    def merge(self, other: "_Totals") -> None:
        self.requests_sent += other.requests_sent
        self.cancels_sent += other.cancels_sent
        self.late_replies += other.late_replies
        self.pings_sent += other.pings_sent
        self.peak_in_flight = max(self.peak_in_flight, other.peak_in_flight)
