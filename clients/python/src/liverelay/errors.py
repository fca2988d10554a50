"""Errors of LiveRelay calls.

Every failed call raises an ``RpcError`` subclass chosen by its status (gRPC's
codes, docs/PROTOCOL.md section 7), with the server's machine-readable
details: ``reason``, ``field_violations`` and ``retry_after``.

Each error also says whether the server acted on the call (``processing``),
because that, not the status alone, decides whether sending the same request
again is safe: a call that never reached the server may always be resent, one
whose connection broke mid-flight only with the same idempotency key.

No message built here ever contains an API key: the key is sent once per
connection, in HELLO, and appears nowhere else.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple, Type


class Status(enum.IntEnum):
    """gRPC's status codes, with gRPC's numbers (docs/PROTOCOL.md section 7)."""

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


class Processing(enum.Enum):
    """Whether the server acted on a failed call, as far as the client can know."""

    NOT_PROCESSED = "not processed"
    """The server did not act on it: sending it again is safe, whatever the method."""
    UNKNOWN = "may have been processed"
    """It may or may not have taken effect: resend only with the same idempotency key."""
    ANSWERED = "answered"
    """The server answered with this status (it did what the status says)."""


OUTCOME_UNKNOWN_REASON = "OutcomeUnknown"


@dataclass(frozen=True)
class FieldViolation:
    """One offending field of a request, by its path (``targets.push_to_start_tokens[3]``)."""

    field: str
    description: str


class LiveRelayError(Exception):
    """The base of every error this package raises."""


class RpcError(LiveRelayError):
    """A call that did not end in a reply: the server's ERROR, or the client's own
    verdict when no answer could come (deadline, connection loss, no server)."""

    def __init__(
        self,
        status: Status,
        message: str,
        *,
        reason: str = "",
        field_violations: Sequence[FieldViolation] = (),
        retry_after_ms: Optional[int] = None,
        processing: Processing = Processing.ANSWERED,
        local: bool = False,
        method: str = "",
    ) -> None:
        super().__init__(status, message)
        self.status: Status = status
        self.message: str = message
        self.reason: str = reason
        self.field_violations: Tuple[FieldViolation, ...] = tuple(field_violations)
        self.retry_after_ms: Optional[int] = retry_after_ms
        self.processing: Processing = processing
        self.local: bool = local
        """True when this client failed the call (no ERROR frame from the server)."""
        self.method: str = method
        """The method path, ``/liverelay.v1.LiveRelay/StartActivity``, once known."""
        self.idempotency_key: Optional[str] = None
        """The key the call carried, so that it can be resent later with the same one."""
        self.attempts: int = 1
        """How many times the client sent (or tried to send) the call."""

    @property
    def retry_after(self) -> Optional[float]:
        """The server's hint, in seconds, of when a retry may succeed (RESOURCE_EXHAUSTED, UNAVAILABLE)."""
        return None if self.retry_after_ms is None else self.retry_after_ms / 1000.0

    @property
    def violations(self) -> Dict[str, str]:
        """The field violations as a mapping of field path to description."""
        return {v.field: v.description for v in self.field_violations}

    @property
    def retryable(self) -> bool:
        """Whether the same request may be sent again as it is, idempotent or not:
        it was certainly not processed, or the server asked for a later retry."""
        if self.processing is Processing.UNKNOWN:
            return False
        return self.status in (Status.UNAVAILABLE, Status.RESOURCE_EXHAUSTED, Status.ABORTED)

    @property
    def retryable_if_idempotent(self) -> bool:
        """Whether a request that is idempotent (the same idempotency key) may be sent again."""
        if self.retryable:
            return True
        return self.processing is Processing.UNKNOWN and self.status in (
            Status.UNAVAILABLE,
            Status.INTERNAL,
            Status.DEADLINE_EXCEEDED,
            Status.CANCELLED,
        )

    def __str__(self) -> str:
        text = f"{self.status.name}: {self.message}"
        extras = []
        if self.reason:
            extras.append(f"reason {self.reason}")
        if self.field_violations:
            extras.append("; ".join(f"{v.field}: {v.description}" for v in self.field_violations))
        if self.retry_after_ms is not None:
            extras.append(f"retry after {self.retry_after_ms} ms")
        if self.processing is Processing.UNKNOWN:
            extras.append("may have been processed")
        return text + (f" ({', '.join(extras)})" if extras else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status.name}, {self.message!r}, reason={self.reason!r})"

    def __reduce__(self) -> Tuple[Callable[[Type["RpcError"], Dict[str, object]], "RpcError"], Tuple[Type["RpcError"], Dict[str, object]]]:
        # Exceptions are pickled (and copied) through their args by default, which would
        # lose every attribute but the status and the message.
        return (_rebuild, (type(self), self.__dict__.copy()))

    def _copy(self) -> "RpcError":
        """A distinct instance, so that one shared failure can be raised to several callers."""
        return copy.copy(self)


def _rebuild(cls: Type[RpcError], state: Dict[str, object]) -> RpcError:
    error = cls.__new__(cls)
    Exception.__init__(error, state.get("status"), state.get("message"))
    error.__dict__.update(state)
    return error


class CallCancelledError(RpcError):
    """CANCELLED: the call was cancelled (the server answered it so after a CANCEL).

    Cancelling an asyncio task raises ``asyncio.CancelledError`` as usual; this one
    is for a CANCELLED answer seen by a caller that is still waiting."""


class UnknownError(RpcError):
    """UNKNOWN."""


class InvalidArgumentError(RpcError):
    """INVALID_ARGUMENT: the request failed validation; ``field_violations`` name the fields."""


class DeadlineExceededError(RpcError):
    """DEADLINE_EXCEEDED: the call's deadline passed, on the client (``local``) or the server.

    A mutating call may have taken effect: resend it with the same idempotency
    key (``idempotency_key``) to learn its outcome."""


class NotFoundError(RpcError):
    """NOT_FOUND: an unknown activity, app or channel."""


class AlreadyExistsError(RpcError):
    """ALREADY_EXISTS: an activity id (or an admin app or key id) already used."""


class PermissionDeniedError(RpcError):
    """PERMISSION_DENIED: the API key may not call this RPC, or not for this app."""


class ResourceExhaustedError(RpcError):
    """RESOURCE_EXHAUSTED: a queue, quota or admission limit; wait ``retry_after`` and send less."""


class FailedPreconditionError(RpcError):
    """FAILED_PRECONDITION: the activity has ended, the key was reused, the app is disabled..."""


class AbortedError(RpcError):
    """ABORTED (not returned by LiveRelay v1)."""


class OutOfRangeError(RpcError):
    """OUT_OF_RANGE (not returned by LiveRelay v1)."""


class UnimplementedError(RpcError):
    """UNIMPLEMENTED: an unknown method, or channels on a server without them."""


class InternalError(RpcError):
    """INTERNAL: a server bug, or the server broke the protocol (then ``local``)."""


class ProtocolError(InternalError):
    """The server broke docs/PROTOCOL.md; the connection was closed and its calls failed."""


class UnavailableError(RpcError):
    """UNAVAILABLE: the call was not processed (``processing`` says so) and may be sent again,
    except with reason ``OutcomeUnknown`` (see ``OutcomeUnknownError``)."""


class OutcomeUnknownError(UnavailableError):
    """UNAVAILABLE with reason ``OutcomeUnknown``: the server's store lost track of the
    commit, so the call may or may not have taken effect. Resend it only with the same
    idempotency key; the client does so itself for idempotent calls."""


class TooManyConnectionsError(UnavailableError):
    """The server refused a connection with GOAWAY ``TOO_MANY_CONNECTIONS``: this API key
    is at the server's limit of connections per key. Not final: the client retries after a
    back-off, and raises this once its attempts or the deadline ran out."""


class ConnectError(UnavailableError):
    """The client could not open a connection (refused, TLS failure, timeout before WELCOME)."""


class ClientClosedError(UnavailableError):
    """The client was closed: calls not yet sent fail with this."""


class DataLossError(RpcError):
    """DATA_LOSS (unused by LiveRelay)."""


class UnauthenticatedError(RpcError):
    """UNAUTHENTICATED: the API key was refused. Final for the key: the client fails every
    later call with the same error instead of connecting again."""


class ApiKeyRefusedError(UnauthenticatedError):
    """The server refused the API key at HELLO (unknown, malformed or revoked)."""


class ApiKeyRevokedError(UnauthenticatedError):
    """The API key was revoked (or its rights changed) while the connection was open:
    GOAWAY ``UNAUTHENTICATED``. Calls the server had accepted were answered; the others
    fail with this error."""


_BY_STATUS: Dict[Status, Type[RpcError]] = {
    Status.CANCELLED: CallCancelledError,
    Status.UNKNOWN: UnknownError,
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.DEADLINE_EXCEEDED: DeadlineExceededError,
    Status.NOT_FOUND: NotFoundError,
    Status.ALREADY_EXISTS: AlreadyExistsError,
    Status.PERMISSION_DENIED: PermissionDeniedError,
    Status.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    Status.FAILED_PRECONDITION: FailedPreconditionError,
    Status.ABORTED: AbortedError,
    Status.OUT_OF_RANGE: OutOfRangeError,
    Status.UNIMPLEMENTED: UnimplementedError,
    Status.INTERNAL: InternalError,
    Status.UNAVAILABLE: UnavailableError,
    Status.DATA_LOSS: DataLossError,
    Status.UNAUTHENTICATED: UnauthenticatedError,
}


def error_for_status(
    status: int,
    message: str,
    *,
    reason: str = "",
    field_violations: Sequence[FieldViolation] = (),
    retry_after_ms: Optional[int] = None,
    processing: Processing = Processing.ANSWERED,
    local: bool = False,
    method: str = "",
) -> RpcError:
    """The error of the right class for a status (an unknown number is UNKNOWN)."""
    try:
        code = Status(status)
    except ValueError:
        code = Status.UNKNOWN
        message = f"status {status}: {message}"
    cls: Type[RpcError] = _BY_STATUS.get(code, UnknownError)
    if code is Status.UNAVAILABLE and reason == OUTCOME_UNKNOWN_REASON:
        cls = OutcomeUnknownError
        processing = Processing.UNKNOWN
    return cls(
        code,
        message,
        reason=reason,
        field_violations=field_violations,
        retry_after_ms=retry_after_ms,
        processing=processing,
        local=local,
        method=method,
    )


__all__ = [
    "Status",
    "Processing",
    "FieldViolation",
    "LiveRelayError",
    "RpcError",
    "CallCancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "ProtocolError",
    "UnavailableError",
    "OutcomeUnknownError",
    "TooManyConnectionsError",
    "ConnectError",
    "ClientClosedError",
    "DataLossError",
    "UnauthenticatedError",
    "ApiKeyRefusedError",
    "ApiKeyRevokedError",
    "error_for_status",
    "OUTCOME_UNKNOWN_REASON",
]
