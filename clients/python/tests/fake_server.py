"""A scripted LiveRelay server over plain TCP, for the races a real server cannot be made
to produce on demand: a GOAWAY between chosen requests, a connection dropped with calls
outstanding, OutcomeUnknown, TOO_MANY_CONNECTIONS, a peer that stops answering PINGs.

Each test gives a handler coroutine that plays one connection; frames are read and
written with the package's own codec (the codec itself is checked against the
document's hex dumps in test_wire.py)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Awaitable, Callable, Deque, Dict, List, Optional

from liverelay import _wire as wire

DEFAULT_SETTINGS: Dict[int, int] = {1: 1048576, 2: 100, 3: 300000}


@dataclass
class Request:
    request_id: int
    timeout_ms: int
    method: str
    message: bytes


class FakeConnection:
    def __init__(self, server: "FakeServer", reader: asyncio.StreamReader, writer: asyncio.StreamWriter, index: int):
        self.server = server
        self.reader = reader
        self.writer = writer
        self.index = index
        self.api_key = b""
        self.requests: List[Request] = []
        self.cancels: List[int] = []
        self.pings: List[bytes] = []
        self.goaways: List[wire.GoAway] = []
        self._queued: Deque[Request] = deque()

    async def read_frame(self) -> Optional[wire.Frame]:
        try:
            header = await self.reader.readexactly(wire.HEADER_SIZE)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length, kind, flags, request_id = wire.HEADER.unpack(header)
        wire.check_header(length, kind, request_id, 1 << 24, from_server=False)
        payload = await self.reader.readexactly(length)
        return wire.Frame(kind, flags, request_id, payload)

    async def hello(self) -> bytes:
        magic = await self.reader.readexactly(8)
        assert magic == wire.MAGIC
        frame = await self.read_frame()
        assert frame is not None and frame.type == wire.FrameType.HELLO
        _, _, self.api_key, _, _ = wire.decode_hello(frame.payload)
        return self.api_key

    async def handshake(self, settings: Optional[Dict[int, int]] = None) -> None:
        await self.hello()
        self.send(wire.encode_welcome(settings or DEFAULT_SETTINGS))

    async def next(self) -> Optional[Request]:
        """The next REQUEST; CANCEL, PING and GOAWAY on the way are recorded (PINGs are
        answered unless the server is told not to). None once the client closed."""
        if self._queued:
            return self._queued.popleft()
        while True:
            frame = await self.read_frame()
            if frame is None:
                return None
            request = self._record(frame)
            if request is not None:
                return request

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Reads (and records) frames until `predicate()` holds; REQUESTs read meanwhile are
        kept for `next()`."""
        while not predicate():
            frame = await self.read_frame()
            if frame is None:
                raise ConnectionError("the client closed the connection")
            request = self._record(frame)
            if request is not None:
                self._queued.append(request)

    def _record(self, frame: wire.Frame) -> Optional[Request]:
        request: Optional[Request] = None
        if frame.type == wire.FrameType.REQUEST:
            timeout_ms, method, message = wire.decode_request(frame.payload)
            request = Request(frame.request_id, timeout_ms, method, message)
            self.requests.append(request)
            self.server.requests.append((self.index, request))
        elif frame.type == wire.FrameType.CANCEL:
            self.cancels.append(frame.request_id)
        elif frame.type == wire.FrameType.PING:
            self.pings.append(frame.payload)
            if self.server.answer_pings:
                self.send(wire.encode_pong(frame.payload))
        elif frame.type == wire.FrameType.GOAWAY:
            self.goaways.append(wire.decode_goaway(frame.payload))
        self.server.changed()
        return request

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def reply(self, request_id: int, payload: bytes) -> None:
        self.send(wire.encode_frame(wire.FrameType.RESPONSE, request_id, payload))

    def error(self, request_id: int, status: int, message: str, details: bytes = b"") -> None:
        self.send(wire.encode_frame(wire.FrameType.ERROR, request_id, wire.encode_error_payload(status, message, details)))

    def goaway(self, last_request_id: int, code: int, reason: str) -> None:
        self.send(wire.encode_goaway(last_request_id, code, reason))

    async def close(self) -> None:
        try:
            await self.writer.drain()
        except ConnectionError:
            pass
        self.writer.close()


Handler = Callable[[FakeConnection], Awaitable[None]]


class FakeServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections: List[FakeConnection] = []
        self.requests: List[tuple] = []  # (connection index, Request)
        self.answer_pings = True
        self._server: Optional[asyncio.AbstractServer] = None
        self._changed = asyncio.Condition()
        self._tasks: List[asyncio.Task[None]] = []
        self.port = 0

    async def __aenter__(self) -> "FakeServer":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for connection in self.connections:
            connection.writer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = FakeConnection(self, reader, writer, len(self.connections))
        self.connections.append(connection)
        self.changed()
        task = asyncio.current_task()
        assert task is not None
        self._tasks.append(task)
        try:
            await self.handler(connection)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def changed(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(notify())

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Waits (bounded) for the server's state to satisfy `predicate`, woken by each frame."""

        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(wait(), timeout)
