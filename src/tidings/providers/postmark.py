"""Postmark (``POST /email``), with transactional and broadcast mail kept in separate streams.

Postmark keeps a stream's reputation apart from the others', so a message's
``purpose`` metadata (broadcast, marketing, promotional) chooses the
broadcast stream; everything else goes to the transactional one. No
idempotency key exists; our attempt key rides in ``Metadata``, split over
fields of at most 80 characters (Postmark's value limit), and comes back in
webhooks. Status is polled with ``GET /messages/outbound/{id}/details``.

Webhooks carry no signature: Postmark authenticates them with HTTP Basic
credentials written into the webhook URL (``https://user:pass@host/...``),
which arrive as an ``Authorization`` header. Those credentials do not cover
the body: TLS is what keeps it intact.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import quote

import httpx

from tidings.providers import settings as cfg
from tidings.providers.base import DEFAULT_TIMEOUT, HttpProviderAdapter, HttpRequest, stable_key
from tidings.providers.correlation import chunk, unchunk
from tidings.providers.errors import InvalidSignature, ProviderConfigError, ProviderError
from tidings.providers.messages import (
    AttachmentLoader,
    AttachmentRef,
    OutboundMessage,
    WebhookRequest,
)
from tidings.providers.outcomes import Accepted, Observation, ObservedStatus, RejectCode
from tidings.providers.registry import register

DEFAULT_BASE_URL = "https://api.postmarkapp.com"
TOKEN_HEADER = "X-Postmark-Server-Token"
KEY_FIELD = "tidings_key"  # Metadata fields tidings_key_0 .. tidings_key_3
SEARCH_COUNT = 50  # messages per search answer (Postmark allows 500)
METADATA_VALUE_LIMIT = 80
METADATA_KEY_FIELDS = 4  # of Postmark's ten metadata fields
BROADCAST_PURPOSES = frozenset({"broadcast", "marketing", "promotional"})
NOT_FOUND_CODE = "701"  # "message not found" on the details endpoint
# Bounce types after which resending to the address cannot help.
PERMANENT_BOUNCES = frozenset(
    {
        "hardbounce",
        "bademailaddress",
        "manuallydeactivated",
        "unsubscribe",
        "spamcomplaint",
        "spamnotification",
        "virusnotification",
        "blocked",
        "dmarcpolicy",
        "templaterenderingfailed",
    }
)
# Bounce types that are really replies from a delivered message (out-of-office ...).
NOT_BOUNCES = frozenset(
    {"autoresponder", "addresschange", "subscribe", "challengeverification", "openrelaytest"}
)
_TIME_FIELDS = ("DeliveredAt", "BouncedAt", "ReceivedAt", "ChangedAt")


class PostmarkAdapter(HttpProviderAdapter):
    name = "postmark"
    channels = frozenset({"email"})
    supports_lookup = True
    # The outbound messages search by one Metadata field: our key, whole in
    # its first field (keys are far shorter than a field's 80 characters).
    supports_reference_search = True
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        # webhook RecordType
        "delivery": ObservedStatus.delivered,
        "bounce": ObservedStatus.undelivered,  # by Type: see map_status
        "spamcomplaint": ObservedStatus.delivered,  # after delivery; the code says complaint
        "open": ObservedStatus.delivered,
        "click": ObservedStatus.delivered,
        # MessageEvents[].Type on the details endpoint
        "delivered": ObservedStatus.delivered,
        "transient": ObservedStatus.undelivered,
        "bounced": ObservedStatus.failed,
        "opened": ObservedStatus.delivered,
        "linkclicked": ObservedStatus.delivered,
        # Status on the details endpoint, before any event
        "queued": ObservedStatus.accepted,
        "processed": ObservedStatus.accepted,
        "sent": ObservedStatus.accepted,
    }
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        # API ErrorCode
        "10": RejectCode.AUTH_FAILED,  # bad or missing server token
        # "Invalid email request": an empty body, a bad From, more than 50
        # recipients (postmarkapp.com/support/article/1180): about the request.
        "300": RejectCode.REQUEST_INVALID,
        "400": RejectCode.AUTH_FAILED,  # sender signature not found
        "401": RejectCode.AUTH_FAILED,  # sender signature not confirmed
        "405": RejectCode.AUTH_FAILED,  # not allowed to send
        "406": RejectCode.BOUNCED,  # inactive recipient: hard bounce or complaint earlier
        "411": RejectCode.CONTENT_REJECTED,  # forbidden attachment type
        "412": RejectCode.AUTH_FAILED,  # account pending
        "413": RejectCode.AUTH_FAILED,  # account may not send
        # bounce Type (webhook) and event Type (details)
        "hardbounce": RejectCode.BOUNCED,
        "softbounce": RejectCode.BOUNCED,
        "transient": RejectCode.BOUNCED,
        "dnserror": RejectCode.BOUNCED,
        "bounced": RejectCode.BOUNCED,
        # An ISP's block (reputation, content): Postmark deactivates an address
        # only after HardBounce and SpamComplaint (support article 815).
        "blocked": RejectCode.SENDER_REJECTED,
        "bademailaddress": RejectCode.INVALID_DESTINATION,
        "manuallydeactivated": RejectCode.OPTED_OUT,
        "unsubscribe": RejectCode.OPTED_OUT,
        "spamcomplaint": RejectCode.COMPLAINT,
        # SubscriptionChange SuppressionReason (developer/webhooks/
        # subscription-change-webhook): an unsubscribe is ManualSuppression.
        "manualsuppression": RejectCode.OPTED_OUT,
        "spamnotification": RejectCode.CONTENT_REJECTED,
        "virusnotification": RejectCode.CONTENT_REJECTED,
        "dmarcpolicy": RejectCode.CONTENT_REJECTED,
        "templaterenderingfailed": RejectCode.CONTENT_REJECTED,
    }

    def __init__(
        self,
        server_token: str,
        *,
        sender: str | None = None,
        transactional_stream: str = "outbound",
        broadcast_stream: str = "broadcast",
        webhook_credentials: tuple[str, str] | None = None,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        client: httpx.Client | None = None,
        attachment_loader: AttachmentLoader | None = None,
    ):
        super().__init__(
            base_url, timeout=timeout, client=client, attachment_loader=attachment_loader
        )
        self._client.auth = cfg.HeaderAuth(TOKEN_HEADER, server_token)
        self._sender = sender
        self._streams = (transactional_stream, broadcast_stream)
        self._webhook_credentials = webhook_credentials

    def __repr__(self) -> str:
        return f"PostmarkAdapter(streams={self._streams!r})"

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> HttpRequest:
        sender = message.sender or self._sender
        if not sender:
            raise ProviderConfigError("postmark needs a sender: set 'from' or the message sender")
        payload: dict[str, Any] = {
            "From": sender,
            "To": message.to,
            "Subject": message.subject or "",
            "TextBody": message.body,
            "MessageStream": self.stream_for(message),
            "Metadata": chunk(
                idempotency_key, KEY_FIELD, METADATA_VALUE_LIMIT, METADATA_KEY_FIELDS
            ),
        }
        if message.attachments:
            payload["Attachments"] = [self._attachment(ref) for ref in message.attachments]
        return HttpRequest("POST", "/email", json=payload, headers={"Accept": "application/json"})

    def stream_for(self, message: OutboundMessage) -> str:
        purpose = message.metadata.get("purpose", "").lower()
        transactional, broadcast = self._streams
        return broadcast if purpose in BROADCAST_PURPOSES else transactional

    def _attachment(self, ref: AttachmentRef) -> dict[str, str]:
        return {
            "Name": ref.filename,
            "Content": base64.b64encode(self.load_attachment(ref)).decode(),
            "ContentType": ref.content_type,
        }

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        body = response.json()
        if int(body.get("ErrorCode", 0)) != 0:
            raise ValueError("a 2xx answer with a non-zero ErrorCode")
        return Accepted(str(body["MessageID"]), raw_status=str(body.get("Message", "")))

    def rejection_code(self, response: httpx.Response) -> str | None:
        try:
            code = response.json().get("ErrorCode")
        except (ValueError, AttributeError):
            return None
        return None if code is None else str(code)

    # --- lookups ------------------------------------------------------------

    def build_status_request(self, provider_message_id: str) -> HttpRequest:
        path = f"/messages/outbound/{quote(provider_message_id, safe='')}/details"
        return HttpRequest("GET", path, headers={"Accept": "application/json"})

    def parse_lookup(self, response: httpx.Response) -> Observation | None:
        if response.status_code == 422 and self.rejection_code(response) == NOT_FOUND_CODE:
            return None
        return super().parse_lookup(response)

    def parse_lookup_body(self, response: httpx.Response) -> Observation:
        body = response.json()
        events = [e for e in body.get("MessageEvents") or [] if isinstance(e, dict)]
        known = [e for e in events if str(e.get("Type", "")).lower() in self.status_map]
        latest = known[-1] if known else None  # Postmark lists events oldest first
        raw_status = str(latest["Type"]) if latest else str(body["Status"])
        stamp = latest.get("ReceivedAt") if latest else body.get("ReceivedAt")
        key = stable_key(self.name, body["MessageID"], raw_status, stamp)
        raw_code = raw_status if self._is_failure(raw_status) else None
        return self._observation(body["MessageID"], raw_status, raw_code, body, key, stamp)

    def build_reference_request(self, channel: str, reference: str) -> HttpRequest:
        # Postmark searches by one Metadata field: the first part of our key.
        fields = chunk(reference, KEY_FIELD, METADATA_VALUE_LIMIT, METADATA_KEY_FIELDS)
        first = f"{KEY_FIELD}_0"
        params = {"count": str(SEARCH_COUNT), "offset": "0", f"metadata_{first}": fields[first]}
        headers = {"Accept": "application/json"}
        return HttpRequest("GET", "/messages/outbound", params=params, headers=headers)

    def find_by_reference(self, channel: str, reference: str) -> list[Observation]:
        # A key longer than one field matches by its first part: keep the whole ones.
        found = super().find_by_reference(channel, reference)
        return [m for m in found if m.attempt_key == reference]

    def parse_search_body(self, response: httpx.Response) -> list[Observation]:
        return [self._searched(m) for m in response.json()["Messages"]]

    def _searched(self, body: Mapping[str, Any]) -> Observation:
        raw_status = str(body["Status"])
        stamp = body.get("ReceivedAt")
        key = stable_key(self.name, body["MessageID"], raw_status, stamp)
        found = self._observation(body["MessageID"], raw_status, None, body, key, stamp)
        return replace(found, created_at=parse_time(stamp))

    # --- webhooks -----------------------------------------------------------

    @classmethod
    def map_status(cls, raw_status: str, raw_code: str | None) -> tuple[ObservedStatus, str | None]:
        status, code = super().map_status(raw_status, raw_code)
        if raw_status.lower() == "bounce":
            kind = (raw_code or "").lower()
            if kind in PERMANENT_BOUNCES:
                status = ObservedStatus.failed
            elif kind in NOT_BOUNCES:
                status, code = ObservedStatus.delivered, None
        return status, code

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        self._check_credentials(request.headers.get("Authorization"))
        try:
            event = json.loads(request.body)
        except ValueError:
            raise ProviderError("postmark webhook body is not JSON") from None
        if not isinstance(event, dict) or "RecordType" not in event:
            raise ProviderError("postmark webhook lacks a RecordType")
        return [self._event_observation(event)]

    def _check_credentials(self, header: str | None) -> None:
        if self._webhook_credentials is None:
            # Refuse rather than accept anyone's events: Postmark signs nothing.
            raise ProviderConfigError("postmark adapter has no webhook credentials")
        given = basic_credentials(header) if header else None
        if given is None:
            raise InvalidSignature("postmark webhook without Basic credentials")
        pairs = zip(given, self._webhook_credentials, strict=True)
        # Compare both halves whatever the first gives: no early exit to time.
        matches = [hmac.compare_digest(a.encode(), b.encode()) for a, b in pairs]
        if not all(matches):
            raise InvalidSignature("postmark webhook credentials do not match")

    def _event_observation(self, event: dict[str, Any]) -> Observation:
        raw_status = str(event["RecordType"])
        raw_code = _event_code(raw_status, event)
        stamp = next((event[f] for f in _TIME_FIELDS if isinstance(event.get(f), str)), None)
        key = stable_key(self.name, event.get("MessageID"), raw_status, event.get("ID"), stamp)
        return self._observation(event.get("MessageID"), raw_status, raw_code, event, key, stamp)

    def _observation(
        self,
        message_id: str | None,
        raw_status: str,
        raw_code: str | None,
        raw: Mapping[str, Any],
        dedupe_key: str,
        stamp: object,
    ) -> Observation:
        status, code = self.map_status(raw_status, raw_code)
        metadata = raw.get("Metadata")
        return Observation(
            provider=self.name,
            provider_message_id=message_id,
            attempt_key=unchunk(metadata, KEY_FIELD) if isinstance(metadata, dict) else None,
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=parse_time(stamp),
            dedupe_key=dedupe_key,
            raw=raw,
            raw_code=raw_code,
        )

    def _is_failure(self, raw_status: str) -> bool:
        status = self.status_map.get(raw_status.lower())
        return status in (ObservedStatus.undelivered, ObservedStatus.failed)


def _event_code(raw_status: str, event: Mapping[str, Any]) -> str | None:
    kind = raw_status.lower()
    if kind == "bounce":
        return str(event.get("Type") or "Unknown")
    if kind == "spamcomplaint":
        return "SpamComplaint"
    if kind == "subscriptionchange" and event.get("SuppressSending"):
        # HardBounce, SpamComplaint or ManualSuppression; null only on a
        # reactivation, which teaches nothing.
        return str(event.get("SuppressionReason") or "ManualSuppression")
    return None


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.utcoffset() is not None else None


def basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) from a Basic Authorization header; None if it is not one."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (binascii.Error, ValueError):  # ValueError: not even ASCII, or not UTF-8
        return None
    return (user, password) if sep else None


def _from_settings(settings: Mapping[str, Any]) -> PostmarkAdapter:
    user = cfg.optional(settings, "webhook_username")
    password = cfg.optional(settings, "webhook_password")
    return PostmarkAdapter(
        cfg.required(settings, "server_token", "postmark"),
        sender=cfg.optional(settings, "from"),
        transactional_stream=cfg.optional(settings, "message_stream", "outbound") or "outbound",
        broadcast_stream=cfg.optional(settings, "broadcast_stream", "broadcast") or "broadcast",
        webhook_credentials=(user, password) if user and password else None,
        base_url=cfg.optional(settings, "base_url", DEFAULT_BASE_URL) or DEFAULT_BASE_URL,
        timeout=cfg.timeout(settings, "postmark"),
        attachment_loader=cfg.loader(settings),
    )


register("postmark", _from_settings)
