"""LiveRelay's Python client: Live Activity pushes through a LiveRelay server.

    import liverelay
    from liverelay import pb

    with liverelay.Client("localhost", 7443, api_key=key,
                          tls=liverelay.TLSConfig(ca_file=".liverelay-dev/cert.pem")) as client:
        client.ping(b"hello")

``AsyncClient`` is the same for asyncio. Both speak docs/PROTOCOL.md over a
small pool of pipelined TLS connections; see the package's README.md.
"""

from . import admin_pb, errors, pb
from ._client import AsyncClient, CreatedAPIKey, JSONObject, PutWebhookResult
from ._pool import ClientStats
from ._sync import Client
from .errors import (
    AbortedError,
    AlreadyExistsError,
    ApiKeyRefusedError,
    ApiKeyRevokedError,
    CallCancelledError,
    ClientClosedError,
    ConnectError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    FieldViolation,
    InternalError,
    InvalidArgumentError,
    LiveRelayError,
    NotFoundError,
    OutcomeUnknownError,
    OutOfRangeError,
    PermissionDeniedError,
    Processing,
    ProtocolError,
    ResourceExhaustedError,
    RpcError,
    Status,
    TooManyConnectionsError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from .options import Backoff, RetryPolicy, TLSConfig
from .version import __version__

__all__ = [
    "__version__",
    "AsyncClient",
    "Client",
    "ClientStats",
    "CreatedAPIKey",
    "PutWebhookResult",
    "JSONObject",
    "TLSConfig",
    "RetryPolicy",
    "Backoff",
    "pb",
    "admin_pb",
    "errors",
    "Status",
    "Processing",
    "FieldViolation",
    "LiveRelayError",
    "RpcError",
    "AbortedError",
    "AlreadyExistsError",
    "ApiKeyRefusedError",
    "ApiKeyRevokedError",
    "CallCancelledError",
    "ClientClosedError",
    "ConnectError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutcomeUnknownError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ProtocolError",
    "ResourceExhaustedError",
    "TooManyConnectionsError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
]
