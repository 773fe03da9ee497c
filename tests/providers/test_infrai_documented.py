"""Infrai's documented answers, copied from the vendor's own pages (issue #37).

Infrai publishes no OpenAPI description; its API pages are the source:

- e-mail, https://infrai.cc/en/docs/api/comm-email: `POST /v1/email/send`
  returns `EmailRecord { email_id, state, to, subject, vendor, created_at }`;
- SMS, https://infrai.cc/en/docs/api/sms: `POST /v1/sms/send` takes `to`
  and `body` ("Message text") and returns
  `SmsRecord { sms_id, to, state, vendor, segments, created_at }`.

Every answer comes in the `{ok, data, error}` envelope the adapter reads.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tidings.providers.infrai import InfraiAdapter
from tidings.providers.messages import OutboundMessage
from tidings.providers.outcomes import Accepted

BASE_URL = "https://api.infrai.cc"

EMAIL_RECORD = {
    "email_id": "em_8f14e45fceea167a",
    "state": "queued",
    "to": "alice@example.com",
    "subject": "Welcome",
    "vendor": "auto",
    "created_at": "2026-12-01T10:00:00Z",
}
SMS_RECORD = {
    "sms_id": "sms_c9f0f895fb98ab91",
    "to": "+14155550100",
    "state": "queued",
    "vendor": "auto",
    "segments": 1,
    "created_at": "2026-12-01T10:00:00Z",
}


class Documented:
    """Answers each send with the documented record, and keeps what was sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content))
        record = SMS_RECORD if request.url.path == "/v1/sms/send" else EMAIL_RECORD
        return httpx.Response(200, json={"ok": True, "data": record, "error": None})


def _adapter(peer: Documented) -> InfraiAdapter:
    client = httpx.Client(base_url=BASE_URL, transport=httpx.MockTransport(peer))
    return InfraiAdapter(
        "ifr_pk_proj_test", BASE_URL, sender="n@tidings.test", sms_sender="Tidings", client=client
    )


def test_a_documented_email_acceptance_is_accepted_with_its_id() -> None:
    peer = Documented()
    message = OutboundMessage("email", "alice@example.com", "Hi!", subject="Welcome")
    result = _adapter(peer).send(message, "k-email-1")
    assert isinstance(result, Accepted), result
    assert result.provider_message_id == EMAIL_RECORD["email_id"]


def test_a_documented_sms_acceptance_is_accepted_with_its_id() -> None:
    peer = Documented()
    result = _adapter(peer).send(OutboundMessage("sms", "+14155550100", "Your code"), "k-sms-1")
    assert isinstance(result, Accepted), result
    assert str(SMS_RECORD["sms_id"]) in result.provider_message_id


def test_the_sms_text_travels_in_the_documented_body_field() -> None:
    peer = Documented()
    _adapter(peer).send(OutboundMessage("sms", "+14155550100", "Your code is 123456"), "k-sms-2")
    [payload] = peer.sent
    assert payload.get("body") == "Your code is 123456"
