"""The narrow provider adapter contract.

Every adapter (Twilio, SES, SendGrid, the simulator, ...) is a subclass of
`ProviderAdapter` and fills in only its own steps of one flow, as in
django-anymail: `build_request` -> `transmit` -> `parse_response`. The base
owns the flow, the default timeout, and the single place where transport
errors become outcomes, so no adapter can classify a read timeout as "safe to
retry" by accident. What the steps take and return lives in
`tidings.providers.messages` and `tidings.providers.outcomes`, what they
raise in `tidings.providers.errors`, a provider's Retry-After is read by
`tidings.providers.retry_after`; adapters are found by name through
`tidings.providers.registry`, from the list in `tidings.providers.catalog`.
"""

from __future__ import annotations

import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import httpx

from tidings.domain.redaction import redact_text
from tidings.providers.errors import ProviderConfigError, ProviderUnavailable
from tidings.providers.messages import (
    AttachmentLoader,
    AttachmentRef,
    InboundMessage,
    OutboundMessage,
    WebhookRequest,
)
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    Observation,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.providers.response_body import with_body
from tidings.providers.retry_after import response_retry_after

DEFAULT_TIMEOUT = 10.0
# How long an idle connection is kept for reuse: under the 5 s after which
# common servers (uvicorn, Node) close an idle one. At httpx's own 5 s a
# request could go out on a connection the server was closing, and come
# back as a disconnect: an unknown outcome to reconcile, for nothing.
KEEPALIVE_SECONDS = 4.0


# --- helpers shared by adapters --------------------------------------------


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
    # How an outcome can be learned when the send's answer was lost
    # (dispatch/reconcile.py): by the provider's message id, by our key
    # (the simulator's `ideal` profile only: no real provider), by a
    # reference of ours the provider stores (Postmark's metadata search),
    # or by its list search of messages to one destination in a time range
    # (Twilio's Messages list). Per channel: see the `can_*` methods.
    supports_lookup: ClassVar[bool] = False
    supports_lookup_by_key: ClassVar[bool] = False
    supports_reference_search: ClassVar[bool] = False
    supports_list_search: ClassVar[bool] = False
    # A repeated idempotency key returns the first message, nothing new sent.
    honours_idempotency: ClassVar[bool] = False
    # The channels this adapter can send by a provider-side template of its
    # own (`OutboundMessage.provider_template_id`). Whether a deployment does
    # is `TIDINGS_<PROVIDER>_REQUIRE_TEMPLATE_ID` (providers/template_ids.py).
    provider_template_channels: ClassVar[frozenset[str]] = frozenset()
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
    # The maybe-sent errors that are a timeout: the answer did not come in
    # time (TIMEOUT), as opposed to a broken connection (PROVIDER_ERROR).
    timeout_errors: ClassVar[tuple[type[BaseException], ...]] = (
        httpx.TimeoutException,
        TimeoutError,
    )

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
            timed_out = isinstance(exc, self.timeout_errors)
            code = RejectCode.TIMEOUT if timed_out else RejectCode.PROVIDER_ERROR
            return Indeterminate(code, f"outcome unknown: {exc!r}")
        # Kept here, once for every adapter, whatever its parse_response does.
        return with_body(self.parse_response(response), response)

    @property
    def account(self) -> str:
        """The provider account this adapter sends through, as attempts
        record it (`attempts.provider`): receipts and lookups for an attempt
        go to the adapter of its own account, whatever the channel uses now."""
        return self.name

    def can_look_up(self, channel: str) -> bool:
        return self.supports_lookup and channel in self.channels

    def can_find_by_key(self, channel: str) -> bool:
        return self.supports_lookup_by_key and channel in self.channels

    def can_find_by_reference(self, channel: str) -> bool:
        return self.supports_reference_search and channel in self.channels

    def can_search(self, channel: str) -> bool:
        return self.supports_list_search and channel in self.channels

    def status(self, provider_message_id: str) -> Observation | None:
        self._require(self.supports_lookup, "status lookup")
        return self.parse_lookup(self._lookup(self.build_status_request(provider_message_id)))

    def find_by_key(self, idempotency_key: str) -> Observation | None:
        """None means the provider has no message with this key: it never went out."""
        self._require(self.supports_lookup_by_key, "lookup by idempotency key")
        return self.parse_lookup(self._lookup(self.build_key_request(idempotency_key)))

    def find_by_reference(self, channel: str, reference: str) -> list[Observation]:
        """Every message the provider stores with this reference of ours."""
        self._require(self.can_find_by_reference(channel), "search by reference")
        return self.parse_search(self._lookup(self.build_reference_request(channel, reference)))

    def search(
        self, channel: str, destination: str, since: datetime, until: datetime
    ) -> list[Observation]:
        """The messages to `destination` the provider took between `since` and
        `until` (each observation's `created_at`), as its list search finds them."""
        self._require(self.can_search(channel), "list search")
        request = self.build_search_request(channel, destination, since, until)
        return [
            found
            for found in self.parse_search(self._lookup(request))
            if found.created_at is None or since <= found.created_at <= until
        ]

    @classmethod
    def map_status(cls, raw_status: str, raw_code: str | None) -> tuple[ObservedStatus, str | None]:
        status = cls.status_map.get(raw_status.lower(), ObservedStatus.unknown)
        return status, None if raw_code is None else cls.map_code(raw_code).value

    @classmethod
    def map_code(cls, raw_code: str) -> RejectCode:
        return cls.code_map.get(raw_code.lower(), RejectCode.UNKNOWN)

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

    def build_reference_request(self, channel: str, reference: str) -> Any:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no build_reference_request step")

    def build_search_request(
        self, channel: str, destination: str, since: datetime, until: datetime
    ) -> Any:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no build_search_request step")

    def parse_search(self, response: Any) -> list[Observation]:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no parse_search step")

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
            retry_after = response_retry_after(response)
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
        return Rejected(code, _detail(response), response.status_code, provider_code=raw)

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

    def parse_search(self, response: httpx.Response) -> list[Observation]:
        if response.status_code in (401, 403):
            raise ProviderConfigError("search refused", **_error_info(response))
        if not 200 <= response.status_code < 300:
            raise ProviderUnavailable("search failed", **_error_info(response))
        try:
            return self.parse_search_body(response)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderUnavailable("unreadable search", **_error_info(response)) from exc

    def parse_search_body(self, response: httpx.Response) -> list[Observation]:
        # Only reached by an adapter that claims the capability without its step.
        raise ProviderConfigError(f"{self.name} has no parse_search_body step")

    def close(self) -> None:
        self._client.close()

    def _accepted(self, response: httpx.Response) -> SendResult:
        try:
            return self.parse_accepted(response)
        except (ValueError, KeyError, TypeError):
            # A 2xx we cannot read still means the provider probably took it.
            return Indeterminate(RejectCode.PROVIDER_ERROR, _detail(response), response.status_code)


def _detail(response: httpx.Response) -> str:
    return f"HTTP {response.status_code}: {redact_text(response.text[:500])}"


def _error_info(response: httpx.Response) -> dict[str, Any]:
    return {"status_code": response.status_code, "body": redact_text(response.text[:500])}
