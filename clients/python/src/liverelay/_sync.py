"""The synchronous client: the asyncio core on a background event-loop thread.

One protocol implementation serves both clients. The blocking methods hand
their call to the loop thread and wait for it, so any number of threads may
share one ``Client``: their calls are pipelined on its connections like
tasks' calls on an ``AsyncClient``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import ssl
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Iterator, Optional, Type, TypeVar, Union

from google.protobuf.message import Message

from . import _wire as wire
from ._client import AsyncClient
from ._pool import ClientStats
from ._proto.liverelay.admin.v1 import admin_pb2
from ._proto.liverelay.v1 import liverelay_pb2
from .errors import ClientClosedError, Processing, RpcError, Status
from .options import Backoff, RetryPolicy, TLSConfig
from .version import __version__

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec

    P = ParamSpec("P")

R = TypeVar("R")
M = TypeVar("M", bound=Message)


def _blocking(
    method: "Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]",
) -> "Callable[Concatenate[Client, P], R]":
    """The blocking twin of an AsyncClient method, with the same parameters."""

    def call(self: "Client", /, *args: "P.args", **kwargs: "P.kwargs") -> R:
        return self._run(method(self._async, *args, **kwargs))

    functools.update_wrapper(call, method)  # the docstring, and the signature for help()
    call.__qualname__ = f"Client.{method.__name__}"
    return call


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_closed():
        return
    try:
        loop.call_soon_threadsafe(loop.stop)
    except RuntimeError:  # closed meanwhile
        return
    if threading.current_thread() is not thread:
        thread.join()
        loop.close()


class Client:
    """A thread-safe, blocking LiveRelay client.

    It takes the same arguments as ``AsyncClient`` and has the same methods,
    blocking until the reply (or raising the same errors). Close it with
    ``close()`` or a ``with`` block: outstanding calls may finish within
    ``shutdown_grace`` and the connections close with GOAWAY.
    """

    def __init__(
        self,
        host: str = "localhost",
        port: int = 7443,
        *,
        api_key: str,
        tls: Union[TLSConfig, ssl.SSLContext, None] = None,
        insecure_plaintext: bool = False,
        client_name: str = f"liverelay-python/{__version__}",
        connections: int = 2,
        default_timeout: Optional[float] = 10.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        reconnect_backoff: Backoff = Backoff(),
        keepalive_interval: Optional[float] = 30.0,
        keepalive_timeout: float = 10.0,
        max_pending_calls: int = 10_000,
        max_frame_size: int = wire.DEFAULT_MAX_FRAME_SIZE,
        shutdown_grace: float = 10.0,
    ) -> None:
        self._async = AsyncClient(
            host,
            port,
            api_key=api_key,
            tls=tls,
            insecure_plaintext=insecure_plaintext,
            client_name=client_name,
            connections=connections,
            default_timeout=default_timeout,
            connect_timeout=connect_timeout,
            retry=retry,
            reconnect_backoff=reconnect_backoff,
            keepalive_interval=keepalive_interval,
            keepalive_timeout=keepalive_timeout,
            max_pending_calls=max_pending_calls,
            max_frame_size=max_frame_size,
            shutdown_grace=shutdown_grace,
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"liverelay-client {host}:{port}", daemon=True
        )
        self._thread.start()
        self._close_lock = threading.Lock()
        self._closed = False
        # Stops the loop thread if the client is dropped without close() (or at exit).
        self._finalizer = weakref.finalize(self, _stop_loop, self._loop, self._thread)

    def __repr__(self) -> str:
        return f"Client({self._async._config.host!r}, {self._async._config.port})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Fails calls waiting for a connection, lets sent ones finish (at most
        ``shutdown_grace``), closes the connections and stops the loop thread."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a Client cannot be closed from its own event loop thread")
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._async.close(), self._loop).result()
        finally:
            self._finalizer()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def default_timeout(self) -> Optional[float]:
        return self._async.default_timeout

    def stats(self) -> ClientStats:
        return self._in_loop(self._async.stats)

    @property
    def fatal_error(self) -> Optional[RpcError]:
        """Set once the server refused the API key; see ``AsyncClient.fatal_error``."""
        return self._in_loop(lambda: self._async.fatal_error)

    def _in_loop(self, function: Callable[[], R]) -> R:
        async def run() -> R:
            return function()

        return self._run(run())

    def _run(self, coroutine: Coroutine[Any, Any, R]) -> R:
        if self._closed:
            coroutine.close()
            raise ClientClosedError(
                Status.UNAVAILABLE, "the client is closed", processing=Processing.NOT_PROCESSED, local=True
            )
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a Client cannot be called from its own event loop thread; use an AsyncClient there")
        future: concurrent.futures.Future[R] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            # KeyboardInterrupt and the like: cancel the call, which sends CANCEL.
            future.cancel()
            raise

    def call(
        self,
        method: str,
        request: Message,
        reply_type: Type[M],
        *,
        timeout: Optional[float] = None,
        idempotent: bool = False,
    ) -> M:
        """Any unary call by its method path; see ``AsyncClient.call``."""
        return self._run(self._async.call(method, request, reply_type, timeout=timeout, idempotent=idempotent))

    register_token = _blocking(AsyncClient.register_token)
    start_activity = _blocking(AsyncClient.start_activity)
    update_activity = _blocking(AsyncClient.update_activity)
    end_activity = _blocking(AsyncClient.end_activity)
    ping = _blocking(AsyncClient.ping)
    create_channel = _blocking(AsyncClient.create_channel)
    list_channels = _blocking(AsyncClient.list_channels)
    delete_channel = _blocking(AsyncClient.delete_channel)
    list_events = _blocking(AsyncClient.list_events)

    create_app = _blocking(AsyncClient.create_app)
    update_app = _blocking(AsyncClient.update_app)
    get_app = _blocking(AsyncClient.get_app)
    list_apps = _blocking(AsyncClient.list_apps)
    disable_app = _blocking(AsyncClient.disable_app)
    put_apns_credentials = _blocking(AsyncClient.put_apns_credentials)
    create_api_key = _blocking(AsyncClient.create_api_key)
    list_api_keys = _blocking(AsyncClient.list_api_keys)
    revoke_api_key = _blocking(AsyncClient.revoke_api_key)
    get_app_stats = _blocking(AsyncClient.get_app_stats)
    put_webhook = _blocking(AsyncClient.put_webhook)
    get_webhook = _blocking(AsyncClient.get_webhook)
    delete_webhook = _blocking(AsyncClient.delete_webhook)
    reset_webhook = _blocking(AsyncClient.reset_webhook)

    def iter_channels(
        self,
        *,
        app_id: str,
        environment: Union[liverelay_pb2.Environment, str, None] = None,
        page_size: int = 0,
        timeout: Optional[float] = None,
    ) -> Iterator[liverelay_pb2.Channel]:
        """Every channel of the app, page after page (``timeout`` is per page)."""
        token = ""
        while True:
            page = self.list_channels(
                app_id=app_id, environment=environment, page_size=page_size, page_token=token, timeout=timeout
            )
            yield from page.channels
            token = page.next_page_token
            if not token:
                return

    def tail_events(
        self, app_id: str, after_cursor: int = 0, wait_ms: int = 30_000, max_events: int = 0
    ) -> Iterator[liverelay_pb2.Event]:
        """Every event of the app after ``after_cursor``, in cursor order, forever (long polls
        of ``wait_ms`` in a loop); see ``AsyncClient.tail_events``. Each poll blocks the
        calling thread for up to its wait."""
        cursor = after_cursor
        while True:
            page = self.list_events(app_id, after_cursor=cursor, max_events=max_events, wait_ms=wait_ms)
            yield from page.events
            cursor = page.next_cursor

    def iter_apps(
        self, *, include_disabled: Optional[bool] = None, page_size: Optional[int] = None, timeout: Optional[float] = None
    ) -> Iterator[admin_pb2.App]:
        """Every app, page after page (``timeout`` is per page)."""
        token: Optional[str] = None
        while True:
            page = self.list_apps(page_size=page_size, page_token=token, include_disabled=include_disabled, timeout=timeout)
            yield from page.apps
            if not page.HasField("next_page_token") or not page.next_page_token:
                return
            token = page.next_page_token

    def iter_api_keys(
        self,
        *,
        app_id: Optional[str] = None,
        include_revoked: Optional[bool] = None,
        page_size: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> Iterator[admin_pb2.APIKey]:
        """Every API key, page after page (``timeout`` is per page)."""
        token: Optional[str] = None
        while True:
            page = self.list_api_keys(
                app_id=app_id, include_revoked=include_revoked, page_size=page_size, page_token=token, timeout=timeout
            )
            yield from page.keys
            if not page.HasField("next_page_token") or not page.next_page_token:
                return
            token = page.next_page_token
