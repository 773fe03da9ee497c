"""Twilio Programmable Messaging (SMS), REST API 2010-04-01.

Twilio takes no idempotency key and cannot find a message by ours, so the
key stays on our side (``supports_lookup_by_key = False``); when a status
callback URL is configured, the key rides in that URL's query string, so
callbacks name the attempt even when the send itself ended Indeterminate.
Status is polled with ``GET .../Messages/{Sid}.json``.

Status callbacks are form posts signed with ``X-Twilio-Signature``: base64
HMAC-SHA1, keyed by the auth token, over the full URL followed by every POST
parameter sorted by name, name then value.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit, urlunsplit

import httpx

from tidings.providers import settings as cfg
from tidings.providers.base import (
    DEFAULT_TIMEOUT,
    HttpProviderAdapter,
    HttpRequest,
    same_digest,
    stable_key,
)
from tidings.providers.errors import (
    InvalidSignature,
    ProviderConfigError,
    ProviderError,
    ProviderUnavailable,
)
from tidings.providers.messages import InboundMessage, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Observation,
    ObservedStatus,
    RejectCode,
    Retryable,
    SendResult,
)
from tidings.providers.registry import register
from tidings.providers.retry_after import response_retry_after

DEFAULT_BASE_URL = "https://api.twilio.com"
API_PATH = "/2010-04-01/Accounts/{sid}"
SIGNATURE_HEADER = "X-Twilio-Signature"
KEY_PARAM = "tidings_attempt"  # our key in the StatusCallback query string
# The list search: messages per page (Twilio allows 1000), and pages at most.
SEARCH_PAGE_SIZE = 100
SEARCH_PAGES = 5
VALIDITY_RANGE = (1, 36_000)  # ValidityPeriod, seconds
RATE_LIMITED = "20429"  # "Too Many Requests": never processed, safe to retry
_DEFAULT_PORTS = {"https": 443, "http": 80}


class TwilioAdapter(HttpProviderAdapter):
    name = "twilio"
    channels = frozenset({"sms"})
    supports_lookup = True
    supports_lookup_by_key = False
    # The Messages list filtered by `To`: what settles a call whose answer was
    # lost (dispatch/lookup.py). Not by `DateSent`: a message still queued
    # has no date_sent yet, and a search missing it would prove a false absence.
    supports_list_search = True
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        "accepted": ObservedStatus.accepted,  # by a Messaging Service, sender not chosen yet
        "scheduled": ObservedStatus.accepted,
        "queued": ObservedStatus.accepted,
        "sending": ObservedStatus.accepted,
        "sent": ObservedStatus.accepted,  # handed to the carrier, no receipt yet
        "delivered": ObservedStatus.delivered,
        "read": ObservedStatus.delivered,
        # Some parts arrived: a resend would duplicate them, so do not invite one.
        "partially_delivered": ObservedStatus.delivered,
        "undelivered": ObservedStatus.undelivered,
        "failed": ObservedStatus.failed,
        "canceled": ObservedStatus.failed,  # a canceled scheduled message never goes
    }
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        "20003": RejectCode.AUTH_FAILED,
        "20429": RejectCode.RATE_LIMITED,
        "21211": RejectCode.INVALID_DESTINATION,  # invalid 'To' number
        "21610": RejectCode.OPTED_OUT,  # recipient replied STOP
        "21612": RejectCode.UNREACHABLE,  # no route from this sender to this number
        "21614": RejectCode.NOT_SMS_CAPABLE,
        "30003": RejectCode.UNREACHABLE,  # handset off or out of coverage
        "30004": RejectCode.CARRIER_FILTERED,  # message blocked
        "30005": RejectCode.INVALID_DESTINATION,  # unknown handset: no such number
        "30006": RejectCode.NOT_SMS_CAPABLE,  # landline or unreachable carrier
        "30007": RejectCode.CARRIER_FILTERED,
        "30008": RejectCode.UNKNOWN,  # Twilio's own "unknown error"
    }

    def __init__(
        self,
        account_sid: str,
        auth_token: str,
        *,
        from_number: str | None = None,
        messaging_service_sid: str | None = None,
        status_callback: str | None = None,
        api_key: tuple[str, str] | None = None,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        client: httpx.Client | None = None,
    ):
        super().__init__(base_url, timeout=timeout, client=client)
        # An API key (SK..., secret) may replace the account pair for REST calls,
        # but callbacks are always signed with the account's auth token.
        user, password = api_key or (account_sid, auth_token)
        self._client.auth = httpx.BasicAuth(user, password)
        self._account_sid = account_sid
        self._webhook_key = auth_token.encode()
        self._from = from_number
        self._service_sid = messaging_service_sid
        self._status_callback = status_callback

    def __repr__(self) -> str:
        return f"TwilioAdapter(account_sid={self._account_sid!r})"

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> HttpRequest:
        data = {"To": message.to, "Body": message.body, **self._sender(message)}
        if self._status_callback:
            data["StatusCallback"] = with_query(self._status_callback, KEY_PARAM, idempotency_key)
        if message.validity_seconds is not None:
            low, high = VALIDITY_RANGE
            data["ValidityPeriod"] = str(min(max(message.validity_seconds, low), high))
        return HttpRequest("POST", f"{self._account_path}/Messages.json", data=data)

    def _sender(self, message: OutboundMessage) -> dict[str, str]:
        if message.sender:
            return {"From": message.sender}
        if self._service_sid:
            return {"MessagingServiceSid": self._service_sid}
        if self._from:
            return {"From": self._from}
        raise ProviderConfigError("twilio needs 'from' or 'messaging_service_sid'")

    @property
    def _account_path(self) -> str:
        return API_PATH.format(sid=quote(self._account_sid, safe=""))

    def parse_response(self, response: httpx.Response) -> SendResult:
        # 20429 means "not processed" whatever the HTTP status that carries it.
        if response.status_code != 429 and self.rejection_code(response) == RATE_LIMITED:
            retry_after = response_retry_after(response)
            detail = f"HTTP {response.status_code}: error {RATE_LIMITED}"
            return Retryable(RejectCode.RATE_LIMITED, retry_after, detail, response.status_code)
        return super().parse_response(response)

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        body = response.json()
        return Accepted(str(body["sid"]), raw_status=str(body.get("status") or ""))

    def rejection_code(self, response: httpx.Response) -> str | None:
        try:
            code = response.json().get("code")
        except (ValueError, AttributeError):
            return None
        return None if code is None else str(code)

    # --- lookups ------------------------------------------------------------

    def build_status_request(self, provider_message_id: str) -> HttpRequest:
        sid = quote(provider_message_id, safe="")
        return HttpRequest("GET", f"{self._account_path}/Messages/{sid}.json")

    def parse_lookup_body(self, response: httpx.Response) -> Observation:
        body = response.json()
        updated = body.get("date_updated")
        # A poll has no event id: the transition itself (message, status, time) names it.
        key = stable_key(self.name, body["sid"], body["status"], updated)
        return self._observation(
            body["sid"], body["status"], body.get("error_code"), body, key, _rfc2822(updated), None
        )

    def build_search_request(
        self, channel: str, destination: str, since: datetime, until: datetime
    ) -> HttpRequest:
        params = {"To": destination, "PageSize": str(SEARCH_PAGE_SIZE)}
        return HttpRequest("GET", f"{self._account_path}/Messages.json", params=params)

    def search(
        self, channel: str, destination: str, since: datetime, until: datetime
    ) -> list[Observation]:
        """Every page of the Messages list for the number, up to SEARCH_PAGES;
        a search that needs more pages than that proves nothing.

        No early stop at a page older than `since`: Twilio orders the list by
        date sent, and a message still queued has none, so it may sort after
        pages wholly older than the call; stopping there proved an absence
        that was not one (issue 37)."""
        self._require(self.can_search(channel), "list search")
        request = self.build_search_request(channel, destination, since, until)
        found: list[Observation] = []
        for _ in range(SEARCH_PAGES):
            response = self._lookup(request)
            page = self.parse_search(response)
            found += [m for m in page if m.created_at and since <= m.created_at <= until]
            following = response.json().get("next_page_uri")
            if not following:
                return found
            request = HttpRequest("GET", str(following))
        raise ProviderUnavailable(f"twilio list search ran past {SEARCH_PAGES} pages")

    def parse_search_body(self, response: httpx.Response) -> list[Observation]:
        return [self._listed(m) for m in response.json()["messages"]]

    def _listed(self, body: Mapping[str, Any]) -> Observation:
        updated = body.get("date_updated")
        key = stable_key(self.name, body["sid"], body["status"], updated)
        found = self._observation(
            body["sid"], body["status"], body.get("error_code"), body, key, _rfc2822(updated), None
        )
        return replace(found, created_at=_rfc2822(body.get("date_created")))

    # --- status callbacks ---------------------------------------------------

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        form = parse_qs(request.body.decode("utf-8", "replace"), keep_blank_values=True)
        self._check_signature(request.url, form, request.headers.get(SIGNATURE_HEADER))
        params = {name: values[0] for name, values in form.items()}
        sid = params.get("MessageSid") or params.get("SmsSid")
        status = params.get("MessageStatus") or params.get("SmsStatus")
        if not sid or not status:
            return []  # an inbound message or another callback: not a status event
        key = stable_key(self.name, sid, status, params.get("ErrorCode"))
        attempt = parse_qs(urlsplit(request.url).query).get(KEY_PARAM, [None])[0]
        return [self._observation(sid, status, params.get("ErrorCode"), params, key, None, attempt)]

    def parse_inbound(self, request: WebhookRequest) -> InboundMessage:
        """Twilio posts inbound SMS to the number's webhook, signed the same way."""
        form = parse_qs(request.body.decode("utf-8", "replace"), keep_blank_values=True)
        self._check_signature(request.url, form, request.headers.get(SIGNATURE_HEADER))
        sender, text = form.get("From", [""])[0], form.get("Body", [""])[0]
        if not sender:
            raise ProviderError("twilio inbound message without From")
        # `To` is the Twilio number the recipient texted, covered by the signature.
        return InboundMessage(sender, text, form.get("To", [""])[0] or None)

    def _check_signature(
        self, url: str, params: Mapping[str, Sequence[str]], given: str | None
    ) -> None:
        if not given:
            raise InvalidSignature(f"missing {SIGNATURE_HEADER}")
        for candidate in url_variants(url):
            if same_digest(signature(self._webhook_key, candidate, params), given):
                return
        raise InvalidSignature("twilio signature mismatch")

    def _observation(
        self,
        sid: str,
        raw_status: str,
        raw_code: object,
        raw: Mapping[str, Any],
        dedupe_key: str,
        occurred_at: datetime | None,
        attempt_key: str | None,
    ) -> Observation:
        code_text = None if raw_code in (None, "", 0, "0") else str(raw_code)
        status, code = self.map_status(raw_status, code_text)
        return Observation(
            provider=self.name,
            provider_message_id=sid,
            attempt_key=attempt_key,
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=occurred_at,
            dedupe_key=dedupe_key,
            raw=raw,
            raw_code=code_text,
        )


def signature(auth_token: bytes, url: str, params: Mapping[str, str | Sequence[str]]) -> str:
    """Twilio's X-Twilio-Signature for a form post to `url` with `params`.

    Names sorted; a repeated name contributes each distinct value, sorted, as
    Twilio's own validators do.
    """
    payload = url
    for name in sorted(params):
        values = params[name]
        for value in sorted(set([values] if isinstance(values, str) else values)):
            payload += name + value
    return base64.b64encode(hmac.new(auth_token, payload.encode(), hashlib.sha1).digest()).decode()


def url_variants(url: str) -> list[str]:
    """The URL as received, without its port, and with its (default) port.

    Proxies add or strip ports; Twilio's own validators accept a signature
    over either form.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    variants = [url, urlunsplit(parts._replace(netloc=host))]
    if port is not None:
        variants.append(urlunsplit(parts._replace(netloc=f"{host}:{port}")))
    return list(dict.fromkeys(variants))


def with_query(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), (name, value)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _rfc2822(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.utcoffset() is not None else None


def _from_settings(settings: Mapping[str, Any]) -> TwilioAdapter:
    key_sid, key_secret = (
        cfg.optional(settings, "api_key_sid"),
        cfg.optional(settings, "api_key_secret"),
    )
    return TwilioAdapter(
        cfg.required(settings, "account_sid", "twilio"),
        cfg.required(settings, "auth_token", "twilio"),
        from_number=cfg.optional(settings, "from"),
        messaging_service_sid=cfg.optional(settings, "messaging_service_sid"),
        status_callback=cfg.optional(settings, "status_callback"),
        api_key=(key_sid, key_secret) if key_sid and key_secret else None,
        base_url=cfg.optional(settings, "base_url", DEFAULT_BASE_URL) or DEFAULT_BASE_URL,
        timeout=cfg.timeout(settings, "twilio"),
    )


register("twilio", _from_settings)
