"""How a client reaches its server and decides, without asking the caller,
when a failed call may be sent again."""

from __future__ import annotations

import random
import ssl
from dataclasses import dataclass, field
from typing import Callable, Optional


@dataclass(frozen=True)
class TLSConfig:
    """How the client checks the server's certificate, and the certificate it
    presents to a server that requires one (mTLS).

    With neither ``ca_file`` nor ``ca_data`` the system's trust store is used.
    A development server's ``cert.pem`` is trusted with ``ca_file``.
    """

    ca_file: Optional[str] = None
    """A PEM file of the CAs (or the self-signed certificate) to trust instead of the system's."""
    ca_data: Optional[str] = None
    """The same as PEM text."""
    client_certificate_file: Optional[str] = None
    """A PEM certificate chain presented to the server (with ``client_key_file``)."""
    client_key_file: Optional[str] = None
    client_key_password: Optional[str] = field(default=None, repr=False)
    server_name: Optional[str] = None
    """The name checked against the certificate and sent as SNI; default: the host."""
    check_hostname: bool = True

    def build_context(self) -> ssl.SSLContext:
        """An SSL context with TLS 1.2 as the minimum (docs/PROTOCOL.md section 1)."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca_file, cadata=self.ca_data)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        if self.client_certificate_file is not None:
            context.load_cert_chain(
                self.client_certificate_file, self.client_key_file, password=self.client_key_password
            )
        elif self.client_key_file is not None:
            raise ValueError("client_key_file needs client_certificate_file")
        return context


@dataclass(frozen=True)
class Backoff:
    """Capped exponential back-off with jitter: the n-th wait (n >= 1) is
    ``initial * multiplier ** (n - 1)``, at most ``maximum``, shortened by up to
    ``jitter`` (a share, 0 to 1) at random, so that a fleet of clients that lost
    the same server do not come back in lock step."""

    initial: float = 0.1
    maximum: float = 10.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < 0 or self.multiplier < 1 or not 0 <= self.jitter <= 1:
            raise ValueError("Backoff needs initial >= 0, maximum >= 0, multiplier >= 1 and 0 <= jitter <= 1")

    def delay(self, failures: int, rand: Callable[[], float] = random.random) -> float:
        """The wait after `failures` failures in a row (0 for none)."""
        if failures <= 0:
            return 0.0
        base = min(self.maximum, self.initial * self.multiplier ** min(failures - 1, 64))
        return base * (1.0 - self.jitter * rand())


@dataclass(frozen=True)
class RetryPolicy:
    """Which failed calls the client sends again on its own, within the call's deadline.

    A call the server certainly did not process (above a GOAWAY's last id, an
    ERROR ``UNAVAILABLE``, no connection could be opened, ``TOO_MANY_CONNECTIONS``)
    is always safe to send again, and is, up to ``max_attempts`` in all.

    A call whose outcome is unknown (its connection broke while it was
    outstanding, or ``UNAVAILABLE`` with reason ``OutcomeUnknown``) is resent
    only when ``retry_unknown_outcome`` is set *and* the call is idempotent:
    StartActivity, UpdateActivity and EndActivity (which always carry an
    idempotency key, so the server replays the first reply), RegisterToken
    (idempotent by nature), and reads (Ping, ListChannels, ListEvents, the admin reads).

    Calls failed by their own deadline or by cancellation are never resent:
    the caller gave up on them. Nor is anything refused for the API key
    (``UNAUTHENTICATED``), which would be refused again.
    """

    max_attempts: int = 5
    """Attempts in all, the first included; 1 disables retries."""
    retry_unknown_outcome: bool = True
    backoff: Backoff = Backoff(initial=0.05, maximum=2.0)
    """The wait before resending a call the server answered UNAVAILABLE (at least its
    ``retry_after``) or whose outcome is unknown. Calls moved off a connection that got
    GOAWAY go at once; a connection being reopened waits out the client's ``reconnect_backoff``."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
