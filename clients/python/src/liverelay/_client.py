"""The asyncio client: typed methods for every RPC of liverelay.v1 and liverelay.admin.v1."""

from __future__ import annotations

import asyncio
import json
import math
import ssl
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Mapping, Optional, Sequence, Type, TypeVar, Union

from google.protobuf.message import DecodeError, Message

from . import _wire as wire
from ._pool import ClientStats, Pool, PoolConfig
from ._proto.liverelay.admin.v1 import admin_pb2
from ._proto.liverelay.v1 import activity_pb2, liverelay_pb2
from .errors import ClientClosedError, InternalError, Processing, RpcError, Status
from .options import Backoff, RetryPolicy, TLSConfig
from .version import __version__

M = TypeVar("M", bound=Message)

JSONObject = Union[str, Mapping[str, Any]]
"""A JSON object, as text or as a mapping that ``json.dumps`` can encode."""

_V1 = "/liverelay.v1.LiveRelay/"
_ADMIN = "/liverelay.admin.v1.Admin/"


@dataclass(frozen=True)
class CreatedAPIKey:
    """A new API key. ``secret`` is the whole key, shown this once and stored nowhere:
    it is left out of ``repr`` so that logging the result does not leak it."""

    key: admin_pb2.APIKey
    secret: str = field(repr=False)


@dataclass(frozen=True)
class PutWebhookResult:
    """An app's webhook as ``put_webhook`` left it. ``signing_secret`` is set when one was
    minted (a new webhook, or ``rotate_secret``): shown this once, so it is left out of
    ``repr`` as well."""

    webhook: admin_pb2.Webhook
    signing_secret: Optional[str] = field(default=None, repr=False)


def _json(value: Optional[JSONObject]) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(dict(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _present(**fields: Any) -> dict[str, Any]:
    """The fields that were given: proto2's optional fields tell absent from zero."""
    return {k: v for k, v in fields.items() if v is not None}


def _new_key() -> str:
    return uuid.uuid4().hex


class AsyncClient:
    """A LiveRelay client for asyncio: a small pool of pipelined TLS connections to one server.

    Create it anywhere, use it from one event loop (the first call binds it), and
    close it (``await client.close()`` or ``async with``). Calls from any number of
    tasks share its connections; each connection carries up to the server's
    MAX_REQUESTS_IN_FLIGHT calls at once and the rest wait their turn.

    Every method takes ``timeout`` in seconds: the call's deadline, sent to the
    server and enforced here too (at the deadline the call fails with
    ``DeadlineExceededError`` and a CANCEL goes to the server). ``None`` applies
    ``default_timeout``; ``math.inf`` means no deadline. Cancelling the task of a
    call sends CANCEL as well.

    Failures raise ``liverelay.RpcError`` subclasses (``liverelay.errors``).
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
        """
        :param api_key: sent once per connection, in HELLO, and nowhere else (never logged).
        :param tls: a ``TLSConfig`` (default: the system's trust store) or a ready ``ssl.SSLContext``.
        :param insecure_plaintext: speak the protocol over plain TCP, for tests only: the API
            key would cross the network in the clear.
        :param connections: connections kept open; one pipelined connection carries thousands
            of calls per second, more spread the work over the server's event loops.
        :param connect_timeout: from the TCP connect to WELCOME.
        :param retry: which failed calls are sent again without the caller's involvement.
        :param reconnect_backoff: the wait before reopening a connection after failed attempts.
        :param keepalive_interval: a PING after this long with calls outstanding and nothing
            received (None: never); keep it at 10 s or more, servers refuse PING floods.
        :param keepalive_timeout: the connection is declared dead if no PONG comes within this.
        :param max_pending_calls: calls held at once, sent or waiting; beyond it calls fail at
            once with RESOURCE_EXHAUSTED, so a stalled server cannot grow the client's memory.
        :param shutdown_grace: how long ``close`` lets outstanding calls finish.
        """
        if not api_key:
            raise ValueError("api_key is required")
        if connections < 1:
            raise ValueError("connections must be at least 1")
        if not wire.MIN_MAX_FRAME_SIZE <= max_frame_size <= wire.MAX_MAX_FRAME_SIZE:
            raise ValueError("max_frame_size must be in 16384...16777215")
        if insecure_plaintext and tls is not None:
            raise ValueError("tls and insecure_plaintext exclude each other")
        if insecure_plaintext:
            context: Optional[ssl.SSLContext] = None
            server_hostname: Optional[str] = None
        elif isinstance(tls, ssl.SSLContext):
            context, server_hostname = tls, None
        else:
            config = tls if tls is not None else TLSConfig()
            context, server_hostname = config.build_context(), config.server_name
        self._config = PoolConfig(
            host=host,
            port=port,
            ssl_context=context,
            server_hostname=server_hostname,
            api_key=api_key.encode("utf-8"),
            client_name=client_name,
            connections=connections,
            connect_timeout=connect_timeout,
            reconnect_backoff=reconnect_backoff,
            retry=retry,
            keepalive_interval=keepalive_interval,
            keepalive_timeout=keepalive_timeout,
            max_pending_calls=max_pending_calls,
            max_frame_size=max_frame_size,
            shutdown_grace=shutdown_grace,
        )
        wire.encode_hello(self._config.api_key, client_name, {})  # checks the key's and name's lengths now
        self.default_timeout = default_timeout
        self._pool: Optional[Pool] = None
        self._closed = False

    def __repr__(self) -> str:
        return f"AsyncClient({self._config.host!r}, {self._config.port})"

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stops taking calls, fails the ones waiting for a connection, lets sent ones
        finish (at most ``shutdown_grace``), and closes every connection (GOAWAY NO_ERROR)."""
        self._closed = True
        if self._pool is not None:
            await self._pool.close(self._config.shutdown_grace)

    @property
    def closed(self) -> bool:
        return self._closed

    def stats(self) -> ClientStats:
        if self._pool is None:
            return ClientStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        return self._pool.stats()

    @property
    def fatal_error(self) -> Optional[RpcError]:
        """Set once the server refused the API key (``UnauthenticatedError``): every call
        fails with it from then on, since any new connection would be refused too."""
        return None if self._pool is None else self._pool.fatal

    def _get_pool(self) -> Pool:
        if self._closed:
            raise ClientClosedError(
                Status.UNAVAILABLE, "the client is closed", processing=Processing.NOT_PROCESSED, local=True
            )
        loop = asyncio.get_running_loop()
        if self._pool is None:
            self._pool = Pool(self._config)
        elif self._pool.loop is not loop:
            raise RuntimeError("an AsyncClient is bound to the event loop of its first call; use one per loop")
        return self._pool

    # ------------------------------------------------------------ the generic call

    async def call(
        self,
        method: str,
        request: Message,
        reply_type: Type[M],
        *,
        timeout: Optional[float] = None,
        idempotent: bool = False,
    ) -> M:
        """Any unary call by its method path (``/liverelay.v1.LiveRelay/Ping``).

        ``idempotent`` says whether resending after an unknown outcome is harmless;
        only then may the retry policy resend it after a lost connection."""
        return await self._unary(method, request, reply_type, timeout=timeout, idempotent=idempotent)

    async def _unary(
        self,
        method: str,
        request: Message,
        reply_type: Type[M],
        *,
        timeout: Optional[float],
        idempotent: bool,
        idempotency_key: Optional[str] = None,
    ) -> M:
        pool = self._get_pool()
        seconds = self.default_timeout if timeout is None else timeout
        deadline = None if seconds is None or math.isinf(seconds) else pool.loop.time() + max(0.0, seconds)
        payload = request.SerializeToString()
        try:
            data = await pool.call(method, payload, deadline=deadline, idempotent=idempotent)
        except RpcError as error:
            error.method = method
            error.idempotency_key = idempotency_key
            raise
        try:
            return reply_type.FromString(data)
        except DecodeError as error:
            raise InternalError(
                Status.INTERNAL,
                f"malformed {reply_type.DESCRIPTOR.name} from the server: {error}",
                processing=Processing.ANSWERED,
                local=True,
                method=method,
            ) from None

    # ------------------------------------------------------------ liverelay.v1

    async def register_token(
        self,
        *,
        app_id: str,
        kind: Union[liverelay_pb2.TokenKind, str],
        token: str,
        environment: Union[liverelay_pb2.Environment, str, None] = None,
        attributes_type: str = "",
        activity_id: str = "",
        external_user_id: str = "",
        device_id: str = "",
        expires_at: int = 0,
        remove: bool = False,
        timeout: Optional[float] = None,
    ) -> liverelay_pb2.RegisterTokenReply:
        """Registers, rotates or removes one APNs token (idempotent by nature, so resent
        after a lost connection). ``environment`` is required unless ``remove``."""
        request = liverelay_pb2.RegisterTokenRequest(
            **_present(
                app_id=app_id,
                kind=kind,
                token=token,
                environment=environment,
                attributes_type=attributes_type,
                activity_id=activity_id,
                external_user_id=external_user_id,
                device_id=device_id,
                expires_at=expires_at,
                remove=remove,
            )
        )
        return await self._unary(
            _V1 + "RegisterToken", request, liverelay_pb2.RegisterTokenReply, timeout=timeout, idempotent=True
        )

    async def start_activity(
        self,
        *,
        app_id: str,
        activity_id: str,
        attributes_type: str,
        attributes_json: JSONObject,
        content_state_json: JSONObject,
        targets: activity_pb2.Targets,
        alert: Optional[activity_pb2.Alert] = None,
        stale_date: Optional[int] = None,
        dismissal_date: Optional[int] = None,
        relevance_score: Optional[float] = None,
        priority: Union[activity_pb2.Priority, str, None] = None,
        idempotency_key: Optional[str] = None,
        wait_for_delivery: Optional[bool] = None,
        channel_id: Optional[str] = None,
        input_push_token: Optional[bool] = None,
        strict_priority_budget: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> liverelay_pb2.StartActivityReply:
        """Starts an activity through push-to-start tokens.

        A fresh idempotency key is sent unless one is given, so the call is resent
        safely (the server replays the first reply, ``replayed``) after a lost
        connection or an ``OutcomeUnknown`` answer. A failed call's error carries the
        key (``error.idempotency_key``) to resend it later and learn its outcome."""
        key = idempotency_key or _new_key()
        request = activity_pb2.StartActivityRequest(
            **_present(
                app_id=app_id,
                activity_id=activity_id,
                attributes_type=attributes_type,
                attributes_json=_json(attributes_json),
                content_state_json=_json(content_state_json),
                alert=alert,
                stale_date=stale_date,
                dismissal_date=dismissal_date,
                relevance_score=relevance_score,
                priority=priority,
                targets=targets,
                idempotency_key=key,
                wait_for_delivery=wait_for_delivery,
                channel_id=channel_id,
                input_push_token=input_push_token,
                strict_priority_budget=strict_priority_budget,
            )
        )
        return await self._unary(
            _V1 + "StartActivity",
            request,
            liverelay_pb2.StartActivityReply,
            timeout=timeout,
            idempotent=True,
            idempotency_key=key,
        )

    async def update_activity(
        self,
        *,
        app_id: str,
        activity_id: str,
        content_state_json: Optional[JSONObject] = None,
        alert: Optional[activity_pb2.Alert] = None,
        stale_date: Optional[int] = None,
        dismissal_date: Optional[int] = None,
        relevance_score: Optional[float] = None,
        priority: Union[activity_pb2.Priority, str, None] = None,
        end_activity: Optional[bool] = None,
        idempotency_key: Optional[str] = None,
        wait_for_delivery: Optional[bool] = None,
        channel_id: Optional[str] = None,
        channel_only: Optional[bool] = None,
        strict_priority_budget: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> liverelay_pb2.UpdateActivityReply:
        """Sends a new content state to every update token of the activity (and to
        ``channel_id``). Idempotency as for ``start_activity``."""
        key = idempotency_key or _new_key()
        request = activity_pb2.UpdateActivityRequest(
            **_present(
                app_id=app_id,
                activity_id=activity_id,
                content_state_json=_json(content_state_json),
                alert=alert,
                stale_date=stale_date,
                dismissal_date=dismissal_date,
                relevance_score=relevance_score,
                priority=priority,
                end_activity=end_activity,
                idempotency_key=key,
                wait_for_delivery=wait_for_delivery,
                channel_id=channel_id,
                channel_only=channel_only,
                strict_priority_budget=strict_priority_budget,
            )
        )
        return await self._unary(
            _V1 + "UpdateActivity",
            request,
            liverelay_pb2.UpdateActivityReply,
            timeout=timeout,
            idempotent=True,
            idempotency_key=key,
        )

    async def end_activity(
        self,
        *,
        app_id: str,
        activity_id: str,
        content_state_json: Optional[JSONObject] = None,
        dismissal_date: Optional[int] = None,
        alert: Optional[activity_pb2.Alert] = None,
        priority: Union[activity_pb2.Priority, str, None] = None,
        stale_date: Optional[int] = None,
        relevance_score: Optional[float] = None,
        idempotency_key: Optional[str] = None,
        wait_for_delivery: Optional[bool] = None,
        channel_id: Optional[str] = None,
        channel_only: Optional[bool] = None,
        strict_priority_budget: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> liverelay_pb2.EndActivityReply:
        """Ends the activity on every device that runs it (an absent content state keeps
        the last one). Idempotency as for ``start_activity``."""
        key = idempotency_key or _new_key()
        request = activity_pb2.EndActivityRequest(
            **_present(
                app_id=app_id,
                activity_id=activity_id,
                content_state_json=_json(content_state_json),
                dismissal_date=dismissal_date,
                idempotency_key=key,
                wait_for_delivery=wait_for_delivery,
                alert=alert,
                priority=priority,
                stale_date=stale_date,
                relevance_score=relevance_score,
                channel_id=channel_id,
                channel_only=channel_only,
                strict_priority_budget=strict_priority_budget,
            )
        )
        return await self._unary(
            _V1 + "EndActivity",
            request,
            liverelay_pb2.EndActivityReply,
            timeout=timeout,
            idempotent=True,
            idempotency_key=key,
        )

    async def ping(self, payload: bytes = b"", *, timeout: Optional[float] = None) -> liverelay_pb2.PingReply:
        """A health check through authentication and the service (unlike the PING frame)."""
        return await self._unary(
            _V1 + "Ping",
            liverelay_pb2.PingRequest(payload=payload),
            liverelay_pb2.PingReply,
            timeout=timeout,
            idempotent=True,
        )

    async def create_channel(
        self,
        *,
        app_id: str,
        environment: Union[liverelay_pb2.Environment, str],
        storage_policy: Union[liverelay_pb2.ChannelStoragePolicy, str],
        timeout: Optional[float] = None,
    ) -> liverelay_pb2.Channel:
        """Creates a broadcast channel with APNs. Not resent after an unknown outcome (it
        carries no idempotency key): list the channels to find out whether it was made."""
        reply = await self._unary(
            _V1 + "CreateChannel",
            liverelay_pb2.CreateChannelRequest(app_id=app_id, environment=environment, storage_policy=storage_policy),
            liverelay_pb2.CreateChannelReply,
            timeout=timeout,
            idempotent=False,
        )
        return reply.channel

    async def list_channels(
        self,
        *,
        app_id: str,
        environment: Union[liverelay_pb2.Environment, str, None] = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: Optional[float] = None,
    ) -> liverelay_pb2.ListChannelsReply:
        """One page of the app's channels (both environments unless one is given)."""
        return await self._unary(
            _V1 + "ListChannels",
            liverelay_pb2.ListChannelsRequest(
                **_present(app_id=app_id, environment=environment, page_size=page_size, page_token=page_token)
            ),
            liverelay_pb2.ListChannelsReply,
            timeout=timeout,
            idempotent=True,
        )

    async def iter_channels(
        self,
        *,
        app_id: str,
        environment: Union[liverelay_pb2.Environment, str, None] = None,
        page_size: int = 0,
        timeout: Optional[float] = None,
    ) -> AsyncIterator[liverelay_pb2.Channel]:
        """Every channel of the app, page after page (``timeout`` is per page)."""
        token = ""
        while True:
            page = await self.list_channels(
                app_id=app_id, environment=environment, page_size=page_size, page_token=token, timeout=timeout
            )
            for channel in page.channels:
                yield channel
            token = page.next_page_token
            if not token:
                return

    async def delete_channel(
        self, *, app_id: str, channel_id: str, timeout: Optional[float] = None
    ) -> liverelay_pb2.DeleteChannelReply:
        """Deletes a channel at APNs and in the store. Not resent after an unknown outcome:
        a repeat of a delete that took effect answers NOT_FOUND, which would hide the success."""
        return await self._unary(
            _V1 + "DeleteChannel",
            liverelay_pb2.DeleteChannelRequest(app_id=app_id, channel_id=channel_id),
            liverelay_pb2.DeleteChannelReply,
            timeout=timeout,
            idempotent=False,
        )

    async def list_events(
        self,
        app_id: str,
        after_cursor: int = 0,
        max_events: int = 0,
        wait_ms: int = 0,
        timeout: Optional[float] = None,
    ) -> liverelay_pb2.ListEventsReply:
        """The app's events after ``after_cursor`` (0: from the oldest the feed keeps), in
        cursor order: what became of its calls after their replies. Read-only, so resent
        after an unknown outcome.

        With ``wait_ms`` (at most 60000) and nothing after the cursor, the server holds the
        call until an event comes or the wait ends (then the reply is empty and
        ``next_cursor`` is ``after_cursor``). Without a ``timeout`` the deadline is
        ``default_timeout`` plus the wait, so the default does not cut the long poll; a
        given ``timeout`` must leave room for the wait itself. ``max_events``: 0 for the
        server's 100, at most 1000; ``more`` says a full page left events behind.

        A cursor older than the feed keeps fails with ``FailedPreconditionError`` (reason
        ``CursorExpired``): read again from 0."""
        request = liverelay_pb2.ListEventsRequest(
            app_id=app_id, after_cursor=after_cursor, max_events=max_events, wait_ms=wait_ms
        )
        if timeout is None and self.default_timeout is not None and not math.isinf(self.default_timeout):
            timeout = self.default_timeout + max(0, wait_ms) / 1000.0
        return await self._unary(
            _V1 + "ListEvents", request, liverelay_pb2.ListEventsReply, timeout=timeout, idempotent=True
        )

    async def tail_events(
        self, app_id: str, after_cursor: int = 0, wait_ms: int = 30_000, max_events: int = 0
    ) -> AsyncIterator[liverelay_pb2.Event]:
        """Every event of the app after ``after_cursor``, in cursor order, forever: long polls
        of ``wait_ms`` in a loop, each after the last event yielded (``next_cursor``). Each
        poll's deadline is ``default_timeout`` plus the wait. It ends only with an error
        (``CursorExpired`` when the feed deleted events before they were read) or when the
        caller stops iterating; keep ``event.cursor`` to go on from there later."""
        cursor = after_cursor
        while True:
            page = await self.list_events(app_id, after_cursor=cursor, max_events=max_events, wait_ms=wait_ms)
            for event in page.events:
                yield event
            cursor = page.next_cursor

    # ------------------------------------------------------------ liverelay.admin.v1 (admin keys only)

    async def create_app(
        self,
        *,
        app_id: str,
        bundle_id: str,
        queue_capacity: Optional[int] = None,
        weight: Optional[int] = None,
        max_push_lifetime_s: Optional[int] = None,
        quotas: Optional[admin_pb2.Quotas] = None,
        timeout: Optional[float] = None,
    ) -> admin_pb2.App:
        """Creates an app (ALREADY_EXISTS if the id is taken). Not resent after an unknown outcome."""
        request = admin_pb2.CreateAppRequest(
            **_present(
                app_id=app_id,
                bundle_id=bundle_id,
                queue_capacity=queue_capacity,
                weight=weight,
                max_push_lifetime_s=max_push_lifetime_s,
                quotas=quotas,
            )
        )
        reply = await self._unary(_ADMIN + "CreateApp", request, admin_pb2.AppReply, timeout=timeout, idempotent=False)
        return reply.app

    async def update_app(
        self,
        *,
        app_id: str,
        bundle_id: Optional[str] = None,
        queue_capacity: Optional[int] = None,
        weight: Optional[int] = None,
        max_push_lifetime_s: Optional[int] = None,
        quotas: Optional[admin_pb2.Quotas] = None,
        enabled: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> admin_pb2.App:
        """Changes the fields given and leaves the others (``quotas`` replaces them as a whole)."""
        request = admin_pb2.UpdateAppRequest(
            **_present(
                app_id=app_id,
                bundle_id=bundle_id,
                queue_capacity=queue_capacity,
                weight=weight,
                max_push_lifetime_s=max_push_lifetime_s,
                quotas=quotas,
                enabled=enabled,
            )
        )
        reply = await self._unary(_ADMIN + "UpdateApp", request, admin_pb2.AppReply, timeout=timeout, idempotent=False)
        return reply.app

    async def get_app(self, *, app_id: str, timeout: Optional[float] = None) -> admin_pb2.App:
        reply = await self._unary(
            _ADMIN + "GetApp", admin_pb2.GetAppRequest(app_id=app_id), admin_pb2.AppReply, timeout=timeout, idempotent=True
        )
        return reply.app

    async def list_apps(
        self,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        include_disabled: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> admin_pb2.ListAppsReply:
        """One page of the apps, in id order."""
        request = admin_pb2.ListAppsRequest(
            **_present(page_size=page_size, page_token=page_token, include_disabled=include_disabled)
        )
        return await self._unary(_ADMIN + "ListApps", request, admin_pb2.ListAppsReply, timeout=timeout, idempotent=True)

    async def iter_apps(
        self, *, include_disabled: Optional[bool] = None, page_size: Optional[int] = None, timeout: Optional[float] = None
    ) -> AsyncIterator[admin_pb2.App]:
        """Every app, page after page (``timeout`` is per page)."""
        token: Optional[str] = None
        while True:
            page = await self.list_apps(
                page_size=page_size, page_token=token, include_disabled=include_disabled, timeout=timeout
            )
            for app in page.apps:
                yield app
            if not page.HasField("next_page_token") or not page.next_page_token:
                return
            token = page.next_page_token

    async def disable_app(self, *, app_id: str, timeout: Optional[float] = None) -> admin_pb2.App:
        """The app's calls are refused (FAILED_PRECONDITION, reason AppDisabled); its data is kept."""
        reply = await self._unary(
            _ADMIN + "DisableApp",
            admin_pb2.DisableAppRequest(app_id=app_id),
            admin_pb2.AppReply,
            timeout=timeout,
            idempotent=False,
        )
        return reply.app

    async def put_apns_credentials(
        self,
        *,
        app_id: str,
        team_id: str,
        key_id: str,
        private_key_pem: Union[bytes, str, None] = None,
        private_key_file: Optional[str] = None,
        private_key_env: Optional[str] = None,
        endpoint: Optional[str] = None,
        trust_certificate_pem: Union[bytes, str, None] = None,
        timeout: Optional[float] = None,
    ) -> admin_pb2.App:
        """Sets the app's APNs signing key (exactly one of the three sources) and endpoint."""
        request = admin_pb2.PutAPNsCredentialsRequest(
            **_present(
                app_id=app_id,
                team_id=team_id,
                key_id=key_id,
                private_key_pem=private_key_pem.encode() if isinstance(private_key_pem, str) else private_key_pem,
                private_key_file=private_key_file,
                private_key_env=private_key_env,
                endpoint=endpoint,
                trust_certificate_pem=(
                    trust_certificate_pem.encode() if isinstance(trust_certificate_pem, str) else trust_certificate_pem
                ),
            )
        )
        reply = await self._unary(
            _ADMIN + "PutAPNsCredentials", request, admin_pb2.AppReply, timeout=timeout, idempotent=False
        )
        return reply.app

    async def create_api_key(
        self,
        *,
        app_ids: Sequence[str] = (),
        all_apps: Optional[bool] = None,
        allowed_methods: Sequence[str] = (),
        admin: Optional[bool] = None,
        label: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> CreatedAPIKey:
        """Mints an API key: a tenant key (``app_ids`` or ``all_apps``, and ``allowed_methods``)
        or an admin key (``admin=True``). Never resent: a repeat would mint a second key."""
        request = admin_pb2.CreateAPIKeyRequest(
            **_present(
                app_ids=list(app_ids),
                all_apps=all_apps,
                allowed_methods=list(allowed_methods),
                admin=admin,
                label=label,
            )
        )
        reply = await self._unary(
            _ADMIN + "CreateAPIKey", request, admin_pb2.CreateAPIKeyReply, timeout=timeout, idempotent=False
        )
        return CreatedAPIKey(key=reply.key, secret=reply.secret)

    async def list_api_keys(
        self,
        *,
        app_id: Optional[str] = None,
        include_revoked: Optional[bool] = None,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> admin_pb2.ListAPIKeysReply:
        """One page of the API keys (never their secrets), in id order."""
        request = admin_pb2.ListAPIKeysRequest(
            **_present(app_id=app_id, include_revoked=include_revoked, page_size=page_size, page_token=page_token)
        )
        return await self._unary(
            _ADMIN + "ListAPIKeys", request, admin_pb2.ListAPIKeysReply, timeout=timeout, idempotent=True
        )

    async def iter_api_keys(
        self,
        *,
        app_id: Optional[str] = None,
        include_revoked: Optional[bool] = None,
        page_size: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> AsyncIterator[admin_pb2.APIKey]:
        """Every API key, page after page (``timeout`` is per page)."""
        token: Optional[str] = None
        while True:
            page = await self.list_api_keys(
                app_id=app_id, include_revoked=include_revoked, page_size=page_size, page_token=token, timeout=timeout
            )
            for key in page.keys:
                yield key
            if not page.HasField("next_page_token") or not page.next_page_token:
                return
            token = page.next_page_token

    async def revoke_api_key(self, *, key_id: str, timeout: Optional[float] = None) -> admin_pb2.APIKey:
        """Revokes a key on every node: refused at its next HELLO, its open connections get
        GOAWAY UNAUTHENTICATED (their calls in flight are answered)."""
        reply = await self._unary(
            _ADMIN + "RevokeAPIKey",
            admin_pb2.RevokeAPIKeyRequest(key_id=key_id),
            admin_pb2.APIKeyReply,
            timeout=timeout,
            idempotent=False,
        )
        return reply.key

    async def get_app_stats(self, *, app_id: str, timeout: Optional[float] = None) -> admin_pb2.AppStats:
        """What the app uses now, as the node that answers sees it."""
        return await self._unary(
            _ADMIN + "GetAppStats",
            admin_pb2.GetAppStatsRequest(app_id=app_id),
            admin_pb2.AppStats,
            timeout=timeout,
            idempotent=True,
        )

    async def put_webhook(
        self,
        *,
        app_id: str,
        url: str,
        event_kinds: Sequence[Union[liverelay_pb2.EventKind, str]] = (),
        rotate_secret: Optional[bool] = None,
        timeout: Optional[float] = None,
    ) -> PutWebhookResult:
        """Sets the app's webhook: the https:// ``url`` its event feed is delivered to, the
        ``event_kinds`` delivered (values or names; none: every kind). A new webhook, or
        ``rotate_secret``, mints a signing secret, returned this once. Not resent after an
        unknown outcome."""
        request = admin_pb2.PutWebhookRequest(
            **_present(
                app_id=app_id,
                url=url,
                event_kinds=[k if isinstance(k, str) else liverelay_pb2.EventKind.Name(k) for k in event_kinds],
                rotate_secret=rotate_secret,
            )
        )
        reply = await self._unary(
            _ADMIN + "PutWebhook", request, admin_pb2.PutWebhookReply, timeout=timeout, idempotent=False
        )
        secret = reply.signing_secret if reply.HasField("signing_secret") else None
        return PutWebhookResult(webhook=reply.webhook, signing_secret=secret)

    async def get_webhook(self, *, app_id: str, timeout: Optional[float] = None) -> admin_pb2.Webhook:
        """The app's webhook and its delivery state (NOT_FOUND when it has none)."""
        reply = await self._unary(
            _ADMIN + "GetWebhook",
            admin_pb2.GetWebhookRequest(app_id=app_id),
            admin_pb2.WebhookReply,
            timeout=timeout,
            idempotent=True,
        )
        return reply.webhook

    async def delete_webhook(self, *, app_id: str, timeout: Optional[float] = None) -> admin_pb2.Webhook:
        """Stops the app's deliveries (its event feed keeps its events); returns the webhook removed."""
        reply = await self._unary(
            _ADMIN + "DeleteWebhook",
            admin_pb2.DeleteWebhookRequest(app_id=app_id),
            admin_pb2.WebhookReply,
            timeout=timeout,
            idempotent=False,
        )
        return reply.webhook

    async def reset_webhook(self, *, app_id: str, timeout: Optional[float] = None) -> admin_pb2.Webhook:
        """Ends a failing or retrying webhook's wait: the next delivery is tried at once, with a
        fresh retry window."""
        reply = await self._unary(
            _ADMIN + "ResetWebhook",
            admin_pb2.ResetWebhookRequest(app_id=app_id),
            admin_pb2.WebhookReply,
            timeout=timeout,
            idempotent=False,
        )
        return reply.webhook
