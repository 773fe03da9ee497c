"""Twilio SendGrid Mail Send v3 (``POST /v3/mail/send``) and its signed Event Webhook.

A send is answered 202 with the message id in ``X-Message-Id``; events carry
it as the first dot-separated part of ``sg_message_id``. SendGrid takes no
idempotency key and has no lookup in the base plan; our attempt key rides in
``custom_args``, which every event echoes as a top-level field. A 429 names
the end of the rate-limit window in ``X-RateLimit-Reset`` (epoch seconds).

The Event Webhook is signed with ECDSA P-256 / SHA-256 over the timestamp
header followed by the raw body, base64 DER signature in
``X-Twilio-Email-Event-Webhook-Signature``; the public key is the
"verification key" from the mail settings (base64 DER, or PEM).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any, ClassVar

import httpx
from cryptography.exceptions import InvalidSignature as CryptoInvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tidings.providers import settings as cfg
from tidings.providers.base import (
    DEFAULT_TIMEOUT,
    HttpProviderAdapter,
    HttpRequest,
    stable_key,
)
from tidings.providers.errors import InvalidSignature, ProviderConfigError, ProviderError
from tidings.providers.messages import AttachmentLoader, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Observation,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.providers.registry import register
from tidings.providers.retry_after import provider_time, response_retry_after

DEFAULT_BASE_URL = "https://api.sendgrid.com"
SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
KEY_ARG = "tidings_attempt"  # our key in custom_args
_INDEX = re.compile(r"\.\d+")


class SendGridAdapter(HttpProviderAdapter):
    name = "sendgrid"
    channels = frozenset({"email"})
    # Dynamic templates: `template_id` in the request (build_request).
    provider_template_channels = frozenset({"email"})
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        "processed": ObservedStatus.accepted,
        "deferred": ObservedStatus.accepted,  # the receiver said "later"; SendGrid retries
        "delivered": ObservedStatus.delivered,
        "open": ObservedStatus.delivered,
        "click": ObservedStatus.delivered,
        # Engagement and complaints come after delivery; the code carries the meaning.
        "spamreport": ObservedStatus.delivered,
        "unsubscribe": ObservedStatus.delivered,
        "group_unsubscribe": ObservedStatus.delivered,
        "group_resubscribe": ObservedStatus.delivered,
        "bounce": ObservedStatus.failed,  # type "blocked" is a soft bounce: see map_status
        "dropped": ObservedStatus.failed,
    }
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        # bounce "type"
        "bounce": RejectCode.BOUNCED,
        "blocked": RejectCode.BOUNCED,
        # self-coded events
        "spamreport": RejectCode.COMPLAINT,
        "unsubscribe": RejectCode.OPTED_OUT,
        "group_unsubscribe": RejectCode.OPTED_OUT,
        # dropped "reason"
        "bounced address": RejectCode.BOUNCED,
        "unsubscribed address": RejectCode.OPTED_OUT,
        "spam reporting address": RejectCode.COMPLAINT,
        "invalid": RejectCode.INVALID_DESTINATION,
        "invalid smtpapi header": RejectCode.CONTENT_REJECTED,
        "spam content (if spam checker app is enabled)": RejectCode.CONTENT_REJECTED,
        "recipient list over package quota": RejectCode.RATE_LIMITED,
        # 4xx error "field" of a send, indices removed (Mail Send errors,
        # twilio.com/docs/sendgrid/api-reference/mail-send/errors). Only a
        # malformed address is about the recipient; a missing or malformed
        # `to` array, personalization or subject is about our request (#37).
        "personalizations.to.email": RejectCode.INVALID_DESTINATION,
        "personalizations.to": RejectCode.REQUEST_INVALID,
        "personalizations": RejectCode.REQUEST_INVALID,
        "subject": RejectCode.REQUEST_INVALID,
        # Our From: a malformed one (400) or no verified Sender Identity (403).
        "from.email": RejectCode.SENDER_REJECTED,
        "from": RejectCode.SENDER_REJECTED,
        "content": RejectCode.CONTENT_REJECTED,
        "content.value": RejectCode.CONTENT_REJECTED,
        "attachments.content": RejectCode.CONTENT_REJECTED,
    }

    def __init__(
        self,
        api_key: str,
        *,
        sender: str | None = None,
        webhook_public_key: str | None = None,
        signature_tolerance_s: float | None = None,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        client: httpx.Client | None = None,
        attachment_loader: AttachmentLoader | None = None,
        clock: Callable[[], float] = time.time,
    ):
        super().__init__(
            base_url, timeout=timeout, client=client, attachment_loader=attachment_loader
        )
        self._client.auth = cfg.HeaderAuth("Authorization", f"Bearer {api_key}")
        self._sender = sender
        self._public_key = (
            None if webhook_public_key is None else load_public_key(webhook_public_key)
        )
        self._tolerance_s = signature_tolerance_s
        self._clock = clock

    def __repr__(self) -> str:
        return f"SendGridAdapter(sender={self._sender!r})"

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> HttpRequest:
        payload: dict[str, Any] = {
            "personalizations": [{"to": [{"email": message.to}]}],
            "from": self._from(message),
            "subject": message.subject or "",
            "content": [{"type": "text/plain", "value": message.body}],
            "custom_args": {KEY_ARG: idempotency_key},
        }
        if message.provider_template_id:
            payload["template_id"] = message.provider_template_id
        if message.attachments:
            payload["attachments"] = [self._attachment(ref) for ref in message.attachments]
        return HttpRequest("POST", "/v3/mail/send", json=payload)

    def _from(self, message: OutboundMessage) -> dict[str, str]:
        name, address = parseaddr(message.sender or self._sender or "")
        if not address:
            raise ProviderConfigError("sendgrid needs a sender: set 'from' or the message sender")
        return {"email": address, "name": name} if name else {"email": address}

    def _attachment(self, ref: Any) -> dict[str, str]:
        return {
            "content": base64.b64encode(self.load_attachment(ref)).decode(),
            "type": ref.content_type,
            "filename": ref.filename,
            "disposition": "attachment",
        }

    def parse_response(self, response: httpx.Response) -> SendResult:
        if response.status_code == 429:
            return Retryable(
                RejectCode.RATE_LIMITED,
                self._retry_after(response),
                f"HTTP 429: {response.text[:200]}",
                429,
            )
        return super().parse_response(response)

    def _retry_after(self, response: httpx.Response) -> float | None:
        reset = response.headers.get("x-ratelimit-reset")
        if reset:
            try:
                answered = provider_time(response)
                return max(float(reset) - (self._clock() if answered is None else answered), 0.0)
            except ValueError:
                pass
        return response_retry_after(response)

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        return Accepted(response.headers["x-message-id"])

    def parse_rejection(self, response: httpx.Response) -> Rejected:
        rejected = super().parse_rejection(response)
        if response.status_code == 403 and self.rejection_code(response) in ("from", "from.email"):
            # "The from address does not match a verified Sender Identity": our sender.
            return replace(rejected, code=RejectCode.SENDER_REJECTED)
        return rejected

    def rejection_code(self, response: httpx.Response) -> str | None:
        try:
            field = response.json()["errors"][0].get("field")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return None
        return _INDEX.sub("", field) if isinstance(field, str) else None

    # --- event webhook ------------------------------------------------------

    @classmethod
    def map_status(cls, raw_status: str, raw_code: str | None) -> tuple[ObservedStatus, str | None]:
        status, code = super().map_status(raw_status, raw_code)
        if raw_status.lower() == "bounce" and (raw_code or "").lower() == "blocked":
            status = ObservedStatus.undelivered  # a soft bounce: a later resend may pass
        return status, code

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        self._check_signature(request)
        try:
            events = json.loads(request.body)
        except ValueError:
            raise ProviderError("sendgrid event webhook body is not JSON") from None
        if not isinstance(events, list):
            raise ProviderError("sendgrid event webhook body is not a list of events")
        return [self._observation(event) for event in events if isinstance(event, dict)]

    def _check_signature(self, request: WebhookRequest) -> None:
        if self._public_key is None:
            raise ProviderConfigError("sendgrid adapter has no webhook_public_key")
        given, stamp = request.headers.get(SIGNATURE_HEADER), request.headers.get(TIMESTAMP_HEADER)
        if not given or not stamp:
            raise InvalidSignature("missing SendGrid event webhook signature headers")
        try:
            signature = base64.b64decode(given, validate=True)
            self._public_key.verify(
                signature, stamp.encode() + request.body, ec.ECDSA(hashes.SHA256())
            )
        except (binascii.Error, ValueError, CryptoInvalidSignature):
            raise InvalidSignature("sendgrid signature mismatch") from None
        self._check_fresh(stamp)

    def _check_fresh(self, stamp: str) -> None:
        # Off by default: SendGrid retries failed posts for hours, and the dedupe
        # key (sg_event_id) already makes a replay harmless.
        if self._tolerance_s is None:
            return
        if (
            not (stamp.isascii() and stamp.isdigit())
            or abs(self._clock() - int(stamp)) > self._tolerance_s
        ):
            raise InvalidSignature("sendgrid signature timestamp outside tolerance")

    def _observation(self, event: Mapping[str, Any]) -> Observation:
        raw_status = str(event.get("event", ""))
        raw_code = _raw_code(raw_status, event)
        status, code = self.map_status(raw_status, raw_code)
        event_id = event.get("sg_event_id")
        key = f"{self.name}:event:{event_id}" if event_id else stable_key(self.name, event)
        return Observation(
            provider=self.name,
            provider_message_id=_message_id(event.get("sg_message_id")),
            attempt_key=_text(event.get(KEY_ARG)),
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=_from_epoch(event.get("timestamp")),
            dedupe_key=key,
            raw=event,
            raw_code=raw_code,
        )


def load_public_key(value: str) -> ec.EllipticCurvePublicKey:
    """The verification key as the dashboard shows it (base64 DER), or as PEM."""
    try:
        if "BEGIN PUBLIC KEY" in value:
            key = serialization.load_pem_public_key(value.encode())
        else:
            key = serialization.load_der_public_key(base64.b64decode(value))
    except (ValueError, binascii.Error):
        raise ProviderConfigError("sendgrid webhook_public_key is not a public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ProviderConfigError("sendgrid webhook_public_key is not an EC key")
    return key


def _raw_code(raw_status: str, event: Mapping[str, Any]) -> str | None:
    kind = raw_status.lower()
    if kind == "bounce":
        return str(event.get("type") or "bounce")
    if kind == "dropped":
        return str(event.get("reason") or "dropped")
    return raw_status if kind in ("spamreport", "unsubscribe", "group_unsubscribe") else None


def _message_id(value: object) -> str | None:
    # "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0": X-Message-Id is the first part.
    return value.split(".", 1)[0] if isinstance(value, str) and value else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _from_epoch(value: object) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    return None


def _from_settings(settings: Mapping[str, Any]) -> SendGridAdapter:
    tolerance = settings.get("signature_tolerance_s")
    return SendGridAdapter(
        cfg.required(settings, "api_key", "sendgrid"),
        sender=cfg.optional(settings, "from"),
        webhook_public_key=cfg.optional(settings, "webhook_public_key"),
        signature_tolerance_s=None
        if tolerance in (None, "")
        else cfg.number(settings, "signature_tolerance_s", 0.0, "sendgrid"),
        base_url=cfg.optional(settings, "base_url", DEFAULT_BASE_URL) or DEFAULT_BASE_URL,
        timeout=cfg.timeout(settings, "sendgrid"),
        attachment_loader=cfg.loader(settings),
    )


register("sendgrid", _from_settings)
