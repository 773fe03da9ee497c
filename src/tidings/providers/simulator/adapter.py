"""The simulator adapter: the simulator's protocol over HTTP, read as the
provider it plays. Its in-process twin, over the core with no network, is
`in_process.py`."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

import httpx

from tidings.providers.base import (
    DEFAULT_TIMEOUT,
    HttpProviderAdapter,
    HttpRequest,
    ProviderAdapter,
    same_digest,
    stable_key,
)
from tidings.providers.errors import (
    InvalidSignature,
    ProviderConfigError,
    ProviderError,
    ProviderUnavailable,
)
from tidings.providers.messages import (
    AttachmentLoader,
    AttachmentRef,
    InboundMessage,
    OutboundMessage,
    WebhookRequest,
)
from tidings.providers.outcomes import Accepted, Observation, ObservedStatus, RejectCode
from tidings.providers.registry import register
from tidings.providers.simulator.profiles import Echo, Profile, by_channel, profile
from tidings.providers.simulator.receipts import PROFILE_HEADER, signed_part
from tidings.providers.simulator.views import KEY_NAME, echoed_reference

SIGNATURE_HEADER = "X-Simulator-Signature"


class SimulatorAdapter(HttpProviderAdapter):
    """The simulator's protocol, read as the provider it plays (`profile`):
    only the lookups that provider offers, its receipts in its own words
    (through the real adapter's mapping), our reference where it echoes it."""

    name = "simulator"
    channels = frozenset({"sms", "email"})
    supports_lookup = True
    supports_lookup_by_key = True
    supports_reference_search = True
    supports_list_search = True
    # It forwards `template_id` as the provider it plays would.
    provider_template_channels = frozenset({"sms", "email"})
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        "queued": ObservedStatus.accepted,
        "sent": ObservedStatus.accepted,
        "delivered": ObservedStatus.delivered,
        "undelivered": ObservedStatus.undelivered,
        "failed": ObservedStatus.failed,
    }
    # The simulator speaks the normalized codes natively; anything else is UNKNOWN.
    code_map: ClassVar[Mapping[str, RejectCode]] = {c.value.lower(): c for c in RejectCode}

    def __init__(
        self,
        base_url: str,
        # None refuses every webhook (ProviderConfigError: "not configured"):
        # the simulator's well-known default is never assumed here.
        webhook_secret: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        client: httpx.Client | None = None,
        attachment_loader: AttachmentLoader | None = None,
        signature_tolerance_s: float | None = 300.0,
        clock: Callable[[], float] = time.time,
        # None: ask the simulator which provider it plays (`GET /_config`)
        # rather than assume `ideal`, whose lookup by our key no real
        # provider offers.
        profile: str | None = None,
    ):
        super().__init__(
            base_url, timeout=timeout, client=client, attachment_loader=attachment_loader
        )
        self._webhook_secret = webhook_secret
        self._tolerance_s = signature_tolerance_s
        self._clock = clock
        self._learned: dict[str, Profile] | None = None if profile is None else by_channel(profile)

    # --- what the profile's provider offers ---------------------------------

    @property
    def profiles(self) -> dict[str, Profile]:
        """The profile each channel plays: as told, or as the simulator says."""
        if self._learned is None:
            self._learned = by_channel(self._ask_profile())
        return self._learned

    def _ask_profile(self) -> str:
        try:
            response = self.transmit(HttpRequest("GET", "/_config"))
            spec = response.json()["profile"] if response.status_code == 200 else None
        except (*self.not_sent_errors, *self.maybe_sent_errors) as exc:
            raise ProviderUnavailable(f"simulator profile unknown: {exc!r}") from exc
        except (ValueError, KeyError, TypeError):
            spec = None
        if not isinstance(spec, str):
            raise ProviderUnavailable("simulator did not say which profile it plays")
        return spec

    def parse_lookup(self, response: httpx.Response) -> Observation | None:
        self._unlearn_on_not_supported(response)
        return super().parse_lookup(response)

    def parse_search(self, response: httpx.Response) -> list[Observation]:
        self._unlearn_on_not_supported(response)
        return super().parse_search(response)

    def _unlearn_on_not_supported(self, response: httpx.Response) -> None:
        """A 501 says the simulator plays another provider than we believe
        (told wrong, or its `/_config` changed): ask it again before the
        next way is tried (dispatch/lookup.py moves on after a 501)."""
        if response.status_code == 501:
            self._learned = None

    def can_look_up(self, channel: str) -> bool:
        played = self.profiles.get(channel)
        return played is not None and channel in played.lookup_by_id

    def can_find_by_key(self, channel: str) -> bool:
        played = self.profiles.get(channel)
        return played is not None and played.lookup_by_key

    def can_find_by_reference(self, channel: str) -> bool:
        played = self.profiles.get(channel)
        return played is not None and played.reference_search

    def can_search(self, channel: str) -> bool:
        played = self.profiles.get(channel)
        return played is not None and played.list_search

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> HttpRequest:
        payload = {
            "to": message.to,
            "body": message.body,
            "subject": message.subject,
            "sender": message.sender,
            "idempotency_key": idempotency_key,
            "metadata": dict(message.metadata),
            "template_id": message.provider_template_id,
            "validity_seconds": message.validity_seconds,
            "attachments": [self._attachment(ref) for ref in message.attachments],
        }
        return HttpRequest("POST", f"/{message.channel}/send", json=payload)

    def _attachment(self, ref: AttachmentRef) -> dict[str, Any]:
        # Fetched at send time, never stored with the attempt; the simulator
        # only needs proof of content, so send its digest rather than the bytes.
        data = self.load_attachment(ref)
        return {
            "id": ref.id,
            "revision": ref.revision,
            "filename": ref.filename,
            "content_type": ref.content_type,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }

    def parse_accepted(self, response: httpx.Response) -> Accepted:
        body = response.json()
        return Accepted(str(body["message_id"]), raw_status=str(body.get("status", "")))

    def rejection_code(self, response: httpx.Response) -> str | None:
        try:
            return str(response.json()["code"])
        except (ValueError, KeyError, TypeError):
            return None

    # --- lookups ------------------------------------------------------------

    def build_status_request(self, provider_message_id: str) -> HttpRequest:
        return HttpRequest("GET", f"/messages/{quote(provider_message_id, safe='')}")

    def build_key_request(self, idempotency_key: str) -> HttpRequest:
        return HttpRequest("GET", "/messages", params={"idempotency_key": idempotency_key})

    def build_reference_request(self, channel: str, reference: str) -> HttpRequest:
        return HttpRequest("GET", f"/{channel}/messages", params={"reference": reference})

    def build_search_request(
        self, channel: str, destination: str, since: datetime, until: datetime
    ) -> HttpRequest:
        params = {
            "to": destination,
            "sent_after": repr(since.timestamp()),
            "sent_before": repr(until.timestamp()),
        }
        return HttpRequest("GET", f"/{channel}/messages", params=params)

    def parse_lookup_body(self, response: httpx.Response) -> Observation:
        return self._looked_up(response.json())

    def parse_search_body(self, response: httpx.Response) -> list[Observation]:
        return [self._looked_up(found) for found in response.json()["messages"]]

    def _looked_up(self, body: dict[str, Any]) -> Observation:
        # A poll has no event id: the transition itself identifies it.
        key = stable_key(self.name, body["message_id"], body["status"], body["updated_at"])
        played = self.profiles.get(str(body.get("channel")), profile("ideal"))
        return self._observation(body, body["updated_at"], key, played, {})

    # --- webhooks -----------------------------------------------------------

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        played = self._speaking(request)
        self._check_signature(request, self._signed_query(played, request))
        try:
            payload = json.loads(request.body)
        except ValueError as exc:
            raise ProviderError("simulator webhook body is not JSON") from exc
        events = payload if isinstance(payload, list) else [payload]
        return [self._event_observation(event, played, request.query) for event in events]

    @staticmethod
    def _speaking(request: WebhookRequest) -> Profile:
        name = request.headers.get(PROFILE_HEADER) or request.headers.get(PROFILE_HEADER.lower())
        try:
            return profile(name or "ideal")
        except ValueError:
            raise ProviderError("simulator webhook names no known profile") from None

    @staticmethod
    def _signed_query(played: Profile, request: WebhookRequest) -> str:
        """The part of the URL's query the simulator added and signed."""
        if played.echo is not Echo.CALLBACK_QUERY:
            return ""
        value = request.query.get(played.reference_field)
        return urlencode({played.reference_field: value}) if value else ""

    def parse_inbound(self, request: WebhookRequest) -> InboundMessage:
        """The simulator's inbound messages: {"from", "text", "to"?}, signed like receipts."""
        self._check_signature(request, "")
        try:
            payload = json.loads(request.body)
        except ValueError as exc:
            raise ProviderError("simulator inbound body is not JSON") from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("from"), str):
            raise ProviderError("simulator inbound message needs a sender")
        to = payload.get("to")
        return InboundMessage(
            payload["from"], str(payload.get("text", "")), to if isinstance(to, str) else None
        )

    def _check_signature(self, request: WebhookRequest, query: str) -> None:
        secret = self._secret().encode()  # first: without one, nothing is accepted
        header = request.headers.get(SIGNATURE_HEADER)
        if not header:
            raise InvalidSignature(f"missing {SIGNATURE_HEADER}")
        parts = dict(p.strip().split("=", 1) for p in header.split(",") if "=" in p)
        stamp, given = parts.get("t", ""), parts.get("v1", "")
        if not (stamp.isascii() and stamp.isdigit()) or not given:
            raise InvalidSignature(f"malformed {SIGNATURE_HEADER}")
        expected = hmac.new(secret, signed_part(stamp, query, request.body), hashlib.sha256)
        if not same_digest(expected.hexdigest(), given):
            raise InvalidSignature("simulator signature mismatch")
        if self._tolerance_s is not None and abs(self._clock() - int(stamp)) > self._tolerance_s:
            raise InvalidSignature("simulator signature timestamp outside tolerance")

    def _secret(self) -> str:
        if not self._webhook_secret:
            raise ProviderConfigError("simulator adapter has no webhook_secret")
        return self._webhook_secret

    def _event_observation(
        self, event: dict[str, Any], played: Profile, query: Mapping[str, str]
    ) -> Observation:
        if not isinstance(event, dict) or "status" not in event:
            raise ProviderError("simulator webhook event lacks a status")
        event_id = event.get("event_id")
        key = f"{self.name}:event:{event_id}" if event_id else stable_key(self.name, event)
        return self._observation(event, event.get("occurred_at"), key, played, query)

    def _observation(
        self,
        body: dict[str, Any],
        at: str | None,
        dedupe_key: str,
        played: Profile,
        query: Mapping[str, str],
    ) -> Observation:
        raw_status, raw_code = str(body["status"]), body.get("code")
        code_text = None if raw_code is None else str(raw_code)
        status, code = _speaker(played).map_status(raw_status, code_text)
        reference = echoed_reference(played, body, dict(query))
        if reference is None:
            _refuse_misshapen_reference(played, body)
        return Observation(
            provider=self.account,
            provider_message_id=_text(body.get("message_id"), "message_id"),
            attempt_key=_text(reference, "reference"),
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=_occurred_at(at),
            dedupe_key=dedupe_key,
            raw=body,
            raw_code=code_text,
            created_at=_occurred_at(body.get("created_at")),
        )


def _speaker(played: Profile) -> type[ProviderAdapter]:
    """The adapter whose vocabulary the profile speaks: its own mapping
    reads the simulator's receipts, so the two cannot drift apart."""
    if played.name in ("ideal", "sns"):
        return SimulatorAdapter  # the simulator's own words
    from tidings.providers.settings import adapter_class

    return adapter_class(played.name)


def _refuse_misshapen_reference(played: Profile, body: dict[str, Any]) -> None:
    """A reference field that is there but of no shape the profile writes is
    a malformed receipt (400), not an unmatched one."""
    if played.echo in (Echo.NONE, Echo.CALLBACK_QUERY):
        return
    value = body.get(played.reference_field)
    if (
        value is None
        or value == ""
        or (isinstance(value, dict) and played.reference_field in KEY_NAME)
    ):
        return
    raise ProviderError(f"simulator event's {played.reference_field} is not a reference")


def _text(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ProviderError(f"simulator event's {name} is not a string")


def _occurred_at(value: object) -> datetime | None:
    """The event's time; signed but unreadable (or without a zone) is a bad
    request from the sender, never a server error."""
    if value is None or value == "":
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.utcoffset() is None:
        raise ProviderError("simulator event has no readable occurred_at")
    return parsed


def _from_settings(settings: Mapping[str, Any]) -> SimulatorAdapter:
    base_url = settings.get("base_url") or settings.get("url")
    if not base_url:
        raise ProviderConfigError("the simulator adapter needs base_url")
    secret = settings.get("webhook_secret") or None
    timeout = float(settings.get("timeout", DEFAULT_TIMEOUT))
    return SimulatorAdapter(base_url, secret, timeout, profile=settings.get("profile") or None)


register("simulator", _from_settings)
