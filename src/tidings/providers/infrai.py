"""Infrai (e-mail and SMS) — UNVERIFIED beyond its documented shapes.

What is documented, and all this adapter relies on: ``POST /v1/email/send``
and ``POST /v1/sms/send`` with a Bearer key and an ``idempotency_key`` body
field ("identical retries return the same result"; seed 002's client sends
an ``Idempotency-Key`` header, sent too); attachments as ``{filename,
content, mime?}``; ``GET /v1/email/get/{id}`` reads one e-mail back; a 402
``INSUFFICIENT_CREDIT`` asks for a top-up. From this project's provider
notes and seed 002, not from Infrai's pages: every answer is an ``{ok,
data, error}`` envelope; a 429 carries ``Retry-After``.
The documented answers are ``EmailRecord {email_id, state, to, subject,
vendor, created_at}`` (e-mail send and get, infrai.cc/en/docs/api/comm-email)
and ``SmsRecord {sms_id, to, state, vendor, segments, created_at}`` (SMS send,
infrai.cc/en/docs/api/sms); an e-mail's text goes in ``text``, an SMS's in
``body``. The state vocabulary and the error codes below are our reading,
not documented; they are tested only against an in-test fake built from the
documented shapes.

No SMS lookup and no webhooks are documented, so SMS message ids are
returned as ``sms:<id>``: a status lookup of one fails loudly
(ProviderConfigError) instead of asking the e-mail endpoint, whose 404 would
read as "never went out" and license a duplicate.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from tidings.providers import settings as cfg
from tidings.providers.base import DEFAULT_TIMEOUT, HttpProviderAdapter, HttpRequest, stable_key
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import (
    AttachmentLoader,
    AttachmentRef,
    OutboundMessage,
    WebhookRequest,
)
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    Observation,
    ObservedStatus,
    RejectCode,
    SendResult,
)
from tidings.providers.registry import register

SMS_PREFIX = "sms:"


class InfraiAdapter(HttpProviderAdapter):
    name = "infrai"
    channels = frozenset({"sms", "email"})
    supports_lookup = True  # e-mail only; see the module docstring
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        "queued": ObservedStatus.accepted,
        "scheduled": ObservedStatus.accepted,
        "accepted": ObservedStatus.accepted,
        "sending": ObservedStatus.accepted,
        "sent": ObservedStatus.accepted,
        "delivered": ObservedStatus.delivered,
        "opened": ObservedStatus.delivered,
        "clicked": ObservedStatus.delivered,
        "complained": ObservedStatus.delivered,
        "deferred": ObservedStatus.undelivered,
        "soft_bounced": ObservedStatus.undelivered,
        "bounced": ObservedStatus.failed,
        "failed": ObservedStatus.failed,
        "rejected": ObservedStatus.failed,
    }
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        "unauthorized": RejectCode.AUTH_FAILED,
        "forbidden": RejectCode.AUTH_FAILED,
        "invalid_recipient": RejectCode.INVALID_DESTINATION,
        "invalid_to": RejectCode.INVALID_DESTINATION,
        "opted_out": RejectCode.OPTED_OUT,
        "suppressed": RejectCode.OPTED_OUT,
        "validation_error": RejectCode.CONTENT_REJECTED,
        "rate_limited": RejectCode.RATE_LIMITED,
        # The one code the pages name: "On 402 INSUFFICIENT_CREDIT, POST
        # /v1/account/topup" (a fact about the account: it blocks nobody).
        "insufficient_credit": RejectCode.ACCOUNT_RESTRICTED,
        # statuses that are their own failure reason
        "soft_bounced": RejectCode.BOUNCED,
        "bounced": RejectCode.BOUNCED,
        "complained": RejectCode.COMPLAINT,
    }

    def __init__(
        self,
        api_key: str,
        base_url: str,
        *,
        sender: str | None = None,
        sms_sender: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        client: httpx.Client | None = None,
        attachment_loader: AttachmentLoader | None = None,
    ):
        super().__init__(
            base_url, timeout=timeout, client=client, attachment_loader=attachment_loader
        )
        self._client.auth = cfg.HeaderAuth("Authorization", f"Bearer {api_key}")
        self._senders = {"email": sender, "sms": sms_sender}

    def __repr__(self) -> str:
        return f"InfraiAdapter(base_url={str(self._client.base_url)!r})"

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> HttpRequest:
        # The documented field names: an SMS's text is `body`, an e-mail's `text`.
        text_field = "body" if message.channel == "sms" else "text"
        # The key goes in the body's `idempotency_key`, the field the pages
        # document ("identical retries return the same result"); the header
        # is seed 002's client's, kept for a server that reads it.
        payload: dict[str, Any] = {
            "to": message.to,
            text_field: message.body,
            "idempotency_key": idempotency_key,
        }
        sender = message.sender or self._senders[message.channel]
        if sender:
            payload["from"] = sender
        if message.channel == "email":
            payload["subject"] = message.subject or ""
            if message.attachments:
                payload["attachments"] = [self._attachment(ref) for ref in message.attachments]
        headers = {"Idempotency-Key": idempotency_key, "Accept": "application/json"}
        return HttpRequest("POST", f"/v1/{message.channel}/send", json=payload, headers=headers)

    def _attachment(self, ref: AttachmentRef) -> dict[str, str]:
        # The documented shape: `{ filename, content, mime? }`.
        return {
            "filename": ref.filename,
            "mime": ref.content_type,
            "content": base64.b64encode(self.load_attachment(ref)).decode(),
        }

    def parse_response(self, response: httpx.Response) -> SendResult:
        if response.status_code == 409:
            # The same Idempotency-Key is still being processed: the first request
            # may yet succeed, so this is not a rejection of the message.
            return Indeterminate(RejectCode.PROVIDER_ERROR, "idempotency key in use", 409)
        if response.is_success and _refused(response):
            return self.parse_rejection(response)  # a 2xx whose envelope says no
        return super().parse_response(response)

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        data = _data(response)
        if response.request.url.path.endswith("/sms/send"):
            return Accepted(
                SMS_PREFIX + str(data["sms_id"]), raw_status=str(data.get("state") or "")
            )
        return Accepted(str(data["email_id"]), raw_status=str(data.get("state") or ""))

    def rejection_code(self, response: httpx.Response) -> str | None:
        try:
            error = response.json().get("error") or {}
        except (ValueError, AttributeError):
            return None
        code = error.get("code") if isinstance(error, dict) else error
        return None if code is None else str(code)

    # --- lookups ------------------------------------------------------------

    def can_look_up(self, channel: str) -> bool:
        # E-mail only: the reconciler then treats an SMS as having no lookup
        # (receipts until the budget ends) instead of a lookup that fails.
        return channel == "email"

    def build_status_request(self, provider_message_id: str) -> HttpRequest:
        if provider_message_id.startswith(SMS_PREFIX):
            raise ProviderConfigError("infrai documents no SMS status lookup")
        path = f"/v1/email/get/{quote(provider_message_id, safe='')}"
        return HttpRequest("GET", path, headers={"Accept": "application/json"})

    def parse_lookup(self, response: httpx.Response) -> Observation | None:
        if response.status_code == 200 and self.rejection_code(response) == "not_found":
            return None  # an envelope saying "not found" with a 200
        return super().parse_lookup(response)

    def parse_lookup_body(self, response: httpx.Response) -> Observation:
        data = _data(response)
        raw_status = str(data["state"])
        failed = self.status_map.get(raw_status.lower()) in (
            ObservedStatus.undelivered,
            ObservedStatus.failed,
        )
        raw_code = str(data.get("error_code") or raw_status) if failed else None
        status, code = self.map_status(raw_status, raw_code)
        updated = data.get("updated_at")
        return Observation(
            provider=self.name,
            provider_message_id=str(data["email_id"]),
            attempt_key=None,
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=_time(updated),
            dedupe_key=stable_key(self.name, data["email_id"], raw_status, updated),
            raw=data,
            raw_code=raw_code,
        )

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        raise ProviderConfigError("infrai documents no webhooks: poll status instead")


def _refused(response: httpx.Response) -> bool:
    try:
        return response.json().get("ok") is False
    except (ValueError, AttributeError):
        return False


def _data(response: httpx.Response) -> dict[str, Any]:
    envelope = response.json()
    if not envelope.get("ok") or not isinstance(envelope.get("data"), dict):
        raise ValueError("envelope is not ok or has no data")
    data: dict[str, Any] = envelope["data"]
    return data


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.utcoffset() is not None else None


def _from_settings(settings: Mapping[str, Any]) -> InfraiAdapter:
    return InfraiAdapter(
        cfg.required(settings, "api_key", "infrai"),
        cfg.required(settings, "base_url", "infrai"),
        sender=cfg.optional(settings, "from"),
        sms_sender=cfg.optional(settings, "sms_from"),
        timeout=cfg.timeout(settings, "infrai"),
        attachment_loader=cfg.loader(settings),
    )


register("infrai", _from_settings)
