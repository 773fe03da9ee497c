"""The narrow provider adapter contract.

Every adapter (Twilio, SES, SendGrid, the simulator, ...) is a subclass of
`ProviderAdapter` and fills in only its own steps of one flow, as in
django-anymail: `build_request` -> `transmit` -> `parse_response`. The base
owns the flow, the default timeout, and the single place where transport
errors become outcomes, so no adapter can classify a read timeout as "safe to
retry" by accident.

Send outcomes (`SendResult`)::

    Accepted       the provider took it; here is its message id
    Retryable      the provider certainly did NOT process it (429, refused)
    Rejected       permanent; never retry this message as is
    Indeterminate  it may have reached the provider: reconcile by lookup
                   (status / find_by_key) before any new attempt

Exceptions::

    ProviderError               root of this layer
    ├── InvalidSignature        webhook unsigned, badly signed or stale
    ├── ProviderConfigError     misconfigured, or asked for what it cannot do
    └── ProviderUnavailable     a lookup could not get an answer; this is NOT
                                "no such message" (that is a None result)
"""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import importlib
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import httpx

DEFAULT_TIMEOUT = 10.0
# How long an idle connection is kept for reuse: under the 5 s after which
# common servers (uvicorn, Node) close an idle one. At httpx's own 5 s a
# request could go out on a connection the server was closing, and come
# back as a disconnect: an unknown outcome to reconcile, for nothing.
KEEPALIVE_SECONDS = 4.0
Channel = Literal["sms", "email"]


class ObservedStatus(StrEnum):
    accepted = "accepted"  # queued, sending or sent at the provider
    delivered = "delivered"
    undelivered = "undelivered"  # non-delivery that a resend may fix
    failed = "failed"  # permanent
    unknown = "unknown"


class RejectCode(StrEnum):
    INVALID_DESTINATION = "INVALID_DESTINATION"
    OPTED_OUT = "OPTED_OUT"
    NOT_SMS_CAPABLE = "NOT_SMS_CAPABLE"
    UNREACHABLE = "UNREACHABLE"
    CARRIER_FILTERED = "CARRIER_FILTERED"
    BOUNCED = "BOUNCED"
    COMPLAINT = "COMPLAINT"
    CONTENT_REJECTED = "CONTENT_REJECTED"
    ATTACHMENT_TOO_LARGE = "ATTACHMENT_TOO_LARGE"
    AUTH_FAILED = "AUTH_FAILED"
    RATE_LIMITED = "RATE_LIMITED"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    TIMEOUT = "TIMEOUT"
    NOT_FOUND = "NOT_FOUND"
    UNKNOWN = "UNKNOWN"


class ProviderError(Exception):
    """Root of the provider layer; carries the HTTP status and body when known."""

    def __init__(self, message: str, *, status_code: int | None = None, body: str | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class InvalidSignature(ProviderError):
    pass


class ProviderConfigError(ProviderError):
    pass


class ProviderUnavailable(ProviderError):
    pass


class AttachmentTooLarge(ProviderError):
    """An attachment past TIDINGS_MAX_ATTACHMENT_BYTES: raised before any
    request, so certainly not sent, and no retry will make it smaller."""


# --- messages, results, observations --------------------------------------


@dataclass(frozen=True)
class AttachmentRef:
    id: str
    revision: int
    filename: str
    content_type: str
    url_or_path: str


AttachmentLoader = Callable[[AttachmentRef], bytes]


@dataclass(frozen=True)
class OutboundMessage:
    channel: Channel
    # Destination and rendered body stay out of repr so they never reach a log.
    to: str = field(repr=False)
    body: str = field(repr=False)
    subject: str | None = field(default=None, repr=False)
    sender: str | None = None
    attachments: tuple[AttachmentRef, ...] = ()
    provider_template_id: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    validity_seconds: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))


@dataclass(frozen=True)
class Accepted:
    provider_message_id: str
    status: ObservedStatus = ObservedStatus.accepted
    raw_status: str = ""


@dataclass(frozen=True)
class Retryable:
    code: RejectCode
    retry_after_seconds: float | None = None
    detail: str = ""
    http_status: int | None = None


@dataclass(frozen=True)
class Rejected:
    code: RejectCode
    detail: str = ""
    http_status: int | None = None


@dataclass(frozen=True)
class Indeterminate:
    code: RejectCode
    detail: str = ""
    http_status: int | None = None


SendResult = Accepted | Retryable | Rejected | Indeterminate


@dataclass(frozen=True)
class Observation:
    provider: str
    provider_message_id: str | None
    attempt_key: str | None
    status: ObservedStatus
    code: str | None
    raw_status: str
    occurred_at: datetime | None
    dedupe_key: str
    raw: Mapping[str, Any] = field(default_factory=dict, hash=False)
    raw_code: str | None = None

    def __post_init__(self) -> None:
        if self.occurred_at is not None and self.occurred_at.utcoffset() is None:
            raise ValueError("Observation.occurred_at must be timezone-aware")
        # Redacting here, not in each adapter, means no adapter can forget.
        object.__setattr__(self, "raw", redact(dict(self.raw)))


class Headers(Mapping[str, str]):
    """Read-only header mapping with case-insensitive names, as HTTP defines them."""

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()):
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items = {name.lower(): value for name, value in pairs}

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


@dataclass(frozen=True)
class InboundMessage:
    """A message a recipient sent us (a STOP, a START), verified."""

    sender: str = field(repr=False)
    text: str = field(repr=False)


@dataclass(frozen=True)
class WebhookRequest:
    method: str
    url: str  # the full URL as received: some signatures cover it (Twilio)
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    body: bytes = field(default=b"", repr=False)
    query: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", Headers(self.headers))
        object.__setattr__(self, "query", MappingProxyType(dict(self.query)))


# --- helpers shared by adapters --------------------------------------------

REDACTED = "[redacted]"
_DESTINATION_KEYS = frozenset(
    {"to", "destination", "recipient", "phone", "phone_number", "email", "email_address"}
    | {"destinationphonenumber", "phonenumber", "address"}
)
# RFC 5322 atext in the local part; over-redacting a neighbouring quote is fine.
_EMAIL = re.compile(r"[\w!#$%&'*+/=?^`{|}~.-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"\+\d[\d \-]{6,18}\d")


def redact(value: Any) -> Any:
    """Copy `value` with destinations masked: by key name, and by shape inside strings."""
    if isinstance(value, Mapping):
        return {k: REDACTED if _is_destination_key(k) else redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return _PHONE.sub(REDACTED, _EMAIL.sub(REDACTED, value))
    return value


def _is_destination_key(key: object) -> bool:
    return isinstance(key, str) and key.lower().replace("-", "_") in _DESTINATION_KEYS


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent/bad."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def stable_key(provider: str, *parts: object) -> str:
    """Dedupe key from the parts that identify one provider event across replays."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return f"{provider}:{digest[:40]}"


def same_digest(expected: str, given: str) -> bool:
    """Constant-time comparison of a computed signature with the one received.

    As bytes: `hmac.compare_digest` raises TypeError on a str holding
    anything but ASCII, and a header is whatever the sender put in it, so a
    non-ASCII signature would have been a server error instead of a refusal.
    """
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogateescape"))


# --- the adapter contract ---------------------------------------------------


class ProviderAdapter(ABC):
    name: ClassVar[str]
    channels: ClassVar[frozenset[str]]
    supports_lookup: ClassVar[bool] = False
    supports_lookup_by_key: ClassVar[bool] = False
    # Plain dicts, as in anymail: keys are lower-cased raw statuses / raw codes.
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {}
    code_map: ClassVar[Mapping[str, RejectCode]] = {}
    # The request certainly never reached the provider: safe to retry.
    not_sent_errors: ClassVar[tuple[type[BaseException], ...]] = (
        httpx.ConnectError,
        httpx.ConnectTimeout,
        httpx.PoolTimeout,
        httpx.ProxyError,
        httpx.LocalProtocolError,
        ConnectionRefusedError,
    )
    # Anything else from the transport may have happened after the provider read it.
    maybe_sent_errors: ClassVar[tuple[type[BaseException], ...]] = (httpx.TransportError, OSError)

    def __init__(
        self, *, timeout: float = DEFAULT_TIMEOUT, attachment_loader: AttachmentLoader | None = None
    ):
        self.timeout = timeout
        self._attachment_loader = attachment_loader

    # The template methods.

    def send(self, message: OutboundMessage, idempotency_key: str) -> SendResult:
        if message.channel not in self.channels:
            raise ProviderConfigError(f"{self.name} does not send {message.channel}")
        request = self.build_request(message, idempotency_key)
        try:
            response = self.transmit(request)
        except httpx.UnsupportedProtocol as exc:
            raise ProviderConfigError(f"{self.name}: {exc}") from exc
        except self.not_sent_errors as exc:
            return Retryable(RejectCode.PROVIDER_ERROR, None, f"not sent: {exc!r}")
        except self.maybe_sent_errors as exc:
            return Indeterminate(_transport_code(exc), f"outcome unknown: {exc!r}")
        return self.parse_response(response)

    def status(self, provider_message_id: str) -> Observation | None:
        self._require(self.supports_lookup, "status lookup")
        return self.parse_lookup(self._lookup(self.build_status_request(provider_message_id)))

    def find_by_key(self, idempotency_key: str) -> Observation | None:
        """None means the provider has no message with this key: it never went out."""
        self._require(self.supports_lookup_by_key, "lookup by idempotency key")
        return self.parse_lookup(self._lookup(self.build_key_request(idempotency_key)))

    def map_status(
        self, raw_status: str, raw_code: str | None
    ) -> tuple[ObservedStatus, str | None]:
        status = self.status_map.get(raw_status.lower(), ObservedStatus.unknown)
        return status, None if raw_code is None else self.map_code(raw_code).value

    def map_code(self, raw_code: str) -> RejectCode:
        return self.code_map.get(raw_code.lower(), RejectCode.UNKNOWN)

    def load_attachment(self, ref: AttachmentRef) -> bytes:
        if self._attachment_loader is None:
            # The default reads the report's stored location (a path or URL).
            from tidings.providers.attachments import load_attachment

            return load_attachment(ref)
        return self._attachment_loader(ref)

    def close(self) -> None:  # noqa: B027 - an optional hook: most adapters hold nothing
        """Release connections; adapters without any keep the default."""

    def __enter__(self) -> ProviderAdapter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # The steps each adapter fills in.

    @abstractmethod
    def build_request(self, message: OutboundMessage, idempotency_key: str) -> Any: ...

    @abstractmethod
    def transmit(self, request: Any) -> Any:
        """The one network call; must apply `self.timeout`."""

    @abstractmethod
    def parse_response(self, response: Any) -> SendResult: ...

    @abstractmethod
    def verify_webhook(self, request: WebhookRequest) -> list[Observation]: ...

    def parse_inbound(self, request: WebhookRequest) -> InboundMessage:
        """Verify and read an inbound message webhook (STOP/START keywords)."""
        raise ProviderConfigError(f"{self.name} does not receive inbound messages")

    def build_status_request(self, provider_message_id: str) -> Any:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no build_status_request step")

    def build_key_request(self, idempotency_key: str) -> Any:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no build_key_request step")

    def parse_lookup(self, response: Any) -> Observation | None:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no parse_lookup step")

    def _lookup(self, request: Any) -> Any:
        # A lookup that fails must never read as "not found": that would
        # license a resend of a message that may have gone out.
        try:
            return self.transmit(request)
        except (*self.not_sent_errors, *self.maybe_sent_errors) as exc:
            raise ProviderUnavailable(f"{self.name} lookup failed: {exc!r}") from exc

    def _require(self, supported: bool, what: str) -> None:
        if not supported:
            raise ProviderConfigError(f"{self.name} does not support {what}")


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str  # joined to the adapter's base_url
    json: Any = None
    data: Mapping[str, str] | None = None
    params: Mapping[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)


class HttpProviderAdapter(ProviderAdapter):
    """Adapters over an HTTP API: one httpx.Client (thread-safe), shared status rules."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        client: httpx.Client | None = None,
        attachment_loader: AttachmentLoader | None = None,
    ):
        super().__init__(timeout=timeout, attachment_loader=attachment_loader)
        self._client = client or httpx.Client(
            base_url=base_url,
            timeout=timeout,
            # httpx's own limits otherwise (100 connections, 20 kept).
            limits=httpx.Limits(
                max_connections=100,
                max_keepalive_connections=20,
                keepalive_expiry=KEEPALIVE_SECONDS,
            ),
        )

    def transmit(self, request: HttpRequest) -> httpx.Response:
        return self._client.request(
            request.method,
            request.path,
            json=request.json,
            data=request.data,
            params=request.params,
            headers=dict(request.headers),
            timeout=self.timeout,
        )

    def parse_response(self, response: httpx.Response) -> SendResult:
        code = response.status_code
        if 200 <= code < 300:
            return self._accepted(response)
        if code == 429:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            return Retryable(RejectCode.RATE_LIMITED, retry_after, _detail(response), code)
        if code == 408:  # the server gave up reading our request: it did not act on it
            return Retryable(RejectCode.TIMEOUT, None, _detail(response), code)
        if code >= 500:  # it may have acted before failing: reconcile, never resend blind
            return Indeterminate(RejectCode.PROVIDER_ERROR, _detail(response), code)
        return self.parse_rejection(response)

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no parse_accepted step")

    def rejection_code(self, response: httpx.Response) -> str | None:
        """The provider's own error code in a 4xx answer, if any."""
        return None

    def parse_rejection(self, response: httpx.Response) -> Rejected:
        if response.status_code in (401, 403):
            return Rejected(RejectCode.AUTH_FAILED, _detail(response), response.status_code)
        raw = self.rejection_code(response)
        code = RejectCode.UNKNOWN if raw is None else self.map_code(raw)
        return Rejected(code, _detail(response), response.status_code)

    def parse_lookup(self, response: httpx.Response) -> Observation | None:
        if response.status_code == 404:
            return None
        if response.status_code in (401, 403):
            raise ProviderConfigError("lookup refused", **_error_info(response))
        if not 200 <= response.status_code < 300:
            raise ProviderUnavailable("lookup failed", **_error_info(response))
        try:
            return self.parse_lookup_body(response)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderUnavailable("unreadable lookup", **_error_info(response)) from exc

    def parse_lookup_body(self, response: httpx.Response) -> Observation:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no parse_lookup_body step")

    def close(self) -> None:
        self._client.close()

    def _accepted(self, response: httpx.Response) -> SendResult:
        try:
            return self.parse_accepted(response)
        except (ValueError, KeyError, TypeError):
            # A 2xx we cannot read still means the provider probably took it.
            return Indeterminate(RejectCode.PROVIDER_ERROR, _detail(response), response.status_code)


def _transport_code(exc: BaseException) -> RejectCode:
    timed_out = isinstance(exc, httpx.TimeoutException | TimeoutError)
    return RejectCode.TIMEOUT if timed_out else RejectCode.PROVIDER_ERROR


def _detail(response: httpx.Response) -> str:
    return f"HTTP {response.status_code}: {redact(response.text[:500])}"


def _error_info(response: httpx.Response) -> dict[str, Any]:
    return {"status_code": response.status_code, "body": redact(response.text[:500])}


# --- registry ---------------------------------------------------------------

AdapterFactory = Callable[[Mapping[str, Any]], ProviderAdapter]
_FACTORIES: dict[str, AdapterFactory] = {}
# Built-in adapters register themselves on import; this lets `create` find
# them without every caller importing every adapter module first.
_BUILTIN_MODULES = {"simulator": "tidings.providers.simulator_adapter"}


def register(name: str, factory: AdapterFactory) -> None:
    _FACTORIES[name] = factory


def registered() -> frozenset[str]:
    return frozenset(_FACTORIES) | frozenset(_BUILTIN_MODULES)


def create(name: str, settings: Mapping[str, Any]) -> ProviderAdapter:
    if name not in _FACTORIES and name in _BUILTIN_MODULES:
        importlib.import_module(_BUILTIN_MODULES[name])
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ProviderConfigError(f"no provider adapter named {name!r}") from None
    return factory(settings)
