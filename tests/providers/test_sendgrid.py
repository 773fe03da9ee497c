"""SendGrid: conformance against a fake replaying Mail Send v3's published answers.

The peer answers like SendGrid's v3 reference: 202 with ``X-Message-Id``,
400 ``{"errors": [{message, field, help}]}``, 429 with ``X-RateLimit-Reset``.
Event webhooks are signed with a locally generated P-256 key exactly as
SendGrid signs them; SendGrid's own published test vector (key, signature,
timestamp, payload from sendgrid-python's tests) is verified too.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.providers.conformance import AdapterConformance, Outcome, Signature
from tests.providers.peer_support import FakeHttpProvider, new_id
from tidings.providers.errors import InvalidSignature, ProviderConfigError
from tidings.providers.messages import AttachmentRef, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, ObservedStatus, RejectCode, Rejected, Retryable
from tidings.providers.sendgrid import SendGridAdapter
from tidings.providers.settings import build

API_KEY = "SG.test-key-0123456789"
NOW = 1_900_000_000.0
RESET_IN = 42


class SendGridFake(FakeHttpProvider):
    def route(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path == "/v3/mail/send"
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        payload = json.loads(request.content)
        self.record(payload.get("custom_args", {}).get("tidings_attempt"))
        to = payload["personalizations"][0]["to"][0]["email"]
        outcome = self.outcomes.get(to, "accept")
        if outcome == "rate_limit":
            headers = {"X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "0"}
            headers["X-RateLimit-Reset"] = str(int(NOW) + RESET_IN)
            errors = {"errors": [{"field": None, "message": "too many requests"}]}
            return httpx.Response(429, json=errors, headers=headers)
        if outcome == "reject":
            error = {
                "message": "Does not contain a valid address.",
                "field": "personalizations.0.to.0.email",
                "help": "http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html",
            }
            return httpx.Response(400, json={"errors": [error]})
        if outcome == "timeout":
            return self.stall(request)
        return httpx.Response(202, headers={"X-Message-Id": new_id()[:22]})


class SendGridPeer:
    retry_after_seconds = float(RESET_IN)
    reject_code = RejectCode.INVALID_DESTINATION

    def __init__(self, fake: SendGridFake, key: ec.EllipticCurvePrivateKey):
        self.fake = fake
        self.key = key

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        to = f"member+{new_id()[:8]}@example.test"
        self.fake.outcomes[to] = outcome
        return OutboundMessage("email", to, "conformance body", subject="Hello")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.BOUNCED

    def requests_recorded(self, idempotency_key: str) -> int:
        return self.fake.keys[idempotency_key]

    def settle(self) -> None:
        pytest.skip("sendgrid has no lookup to settle")

    def webhook(
        self,
        provider_message_id: str,
        idempotency_key: str,
        raw_status: str,
        *,
        signature: Signature = "valid",
        destination: str | None = None,
    ) -> WebhookRequest:
        status = {"sent": "processed"}.get(raw_status, raw_status)
        event = sendgrid_event(provider_message_id, idempotency_key, status, destination)
        body = json.dumps([event]).encode() + b"\r\n"
        other = ec.generate_private_key(ec.SECP256R1())
        headers = sign(other if signature == "wrong_secret" else self.key, body, int(time.time()))
        if signature == "missing":
            headers = {}
        if signature == "tampered":
            body = body.replace(status.encode(), b"dropped")
        return WebhookRequest("POST", "https://tidings.test/hooks/sendgrid", headers, body)


def sendgrid_event(pmid: str, key: str, status: str, to: str | None = None) -> dict[str, Any]:
    # The fields of an Event Webhook event; custom_args arrive as top-level keys.
    event: dict[str, Any] = {
        "email": to or "member@example.test",
        "timestamp": 1_893_456_000,
        "event": status,
        "sg_event_id": "ev" + hashlib.sha256(f"{pmid}|{status}".encode()).hexdigest()[:20],
        "sg_message_id": f"{pmid}.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
        "smtp-id": f"<{pmid}@ismtpd0039p1iad1.sendgrid.net>",
        "tidings_attempt": key,
    }
    if status == "bounce":
        event |= {"type": "bounce", "reason": "550 5.1.1 no such user", "status": "5.1.1"}
    return event


def sign(key: ec.EllipticCurvePrivateKey, body: bytes, stamp: int) -> dict[str, str]:
    # SendGrid signs timestamp + payload with ECDSA P-256 / SHA-256, base64 DER.
    signature = key.sign(str(stamp).encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": str(stamp),
    }


def public_key_b64(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


@pytest.fixture
def key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def fake() -> SendGridFake:
    return SendGridFake()


def make_adapter(fake: SendGridFake, key: ec.EllipticCurvePrivateKey, **kw: Any):
    return SendGridAdapter(
        API_KEY,
        sender="Tidings <notify@tidings.test>",
        webhook_public_key=public_key_b64(key),
        client=fake.client("https://api.sendgrid.com"),
        clock=lambda: NOW,
        **kw,
    )


class TestSendGridConformance(AdapterConformance):
    @pytest.fixture
    def adapter(self, fake: SendGridFake, key: ec.EllipticCurvePrivateKey) -> Iterator[Any]:
        with make_adapter(fake, key) as adapter:
            yield adapter

    @pytest.fixture
    def peer(self, fake: SendGridFake, key: ec.EllipticCurvePrivateKey) -> SendGridPeer:
        return SendGridPeer(fake, key)


# --- sending ------------------------------------------------------------------


def test_request_shape_with_attachment_loaded_at_send_time(fake: SendGridFake, key: Any) -> None:
    ref = AttachmentRef("rep-7", 2, "report.pdf", "application/pdf", "s3://reports/rep-7")
    loads: list[AttachmentRef] = []

    def loader(r: AttachmentRef) -> bytes:
        loads.append(r)
        return b"%PDF-1.7"

    adapter = make_adapter(fake, key, attachment_loader=loader)
    message = OutboundMessage(
        "email", "a@example.test", "see attached", "Report", attachments=(ref,)
    )
    result = adapter.send(message, "report:7:revision:2:email")
    assert isinstance(result, Accepted)
    payload = json.loads(fake.requests[-1].content)
    assert payload["from"] == {"email": "notify@tidings.test", "name": "Tidings"}
    assert payload["custom_args"] == {"tidings_attempt": "report:7:revision:2:email"}
    assert payload["content"] == [{"type": "text/plain", "value": "see attached"}]
    [attachment] = payload["attachments"]
    assert base64.b64decode(attachment["content"]) == b"%PDF-1.7"
    assert (attachment["filename"], attachment["type"]) == ("report.pdf", "application/pdf")
    assert loads == [ref]


def test_202_without_message_id_is_indeterminate_not_lost() -> None:
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(202)), base_url="https://x"
    )
    result = SendGridAdapter(API_KEY, sender="a@b.test", client=client).send(
        OutboundMessage("email", "c@d.test", "x"), "k"
    )
    assert type(result).__name__ == "Indeterminate"


def test_429_without_reset_header_uses_retry_after() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "5"}, json={"errors": []})

    client = httpx.Client(transport=httpx.MockTransport(answer), base_url="https://x")
    result = SendGridAdapter(API_KEY, sender="a@b.test", client=client).send(
        OutboundMessage("email", "c@d.test", "x"), "k"
    )
    assert isinstance(result, Retryable) and result.retry_after_seconds == 5.0


def test_401_is_an_auth_rejection() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"errors": [{"message": "authorization required"}]})

    client = httpx.Client(transport=httpx.MockTransport(answer), base_url="https://x")
    result = SendGridAdapter(API_KEY, sender="a@b.test", client=client).send(
        OutboundMessage("email", "c@d.test", "x"), "k"
    )
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED


def _refused(status: int, field: str | None) -> Any:
    def answer(request: httpx.Request) -> httpx.Response:
        error = {"message": "refused", "field": field, "help": None}
        return httpx.Response(status, json={"errors": [error]})

    client = httpx.Client(transport=httpx.MockTransport(answer), base_url="https://x")
    return SendGridAdapter(API_KEY, sender="a@b.test", client=client).send(
        OutboundMessage("email", "c@d.test", "x"), "k"
    )


@pytest.mark.parametrize(
    ("status", "field", "code"),
    [
        # Mail Send errors (twilio.com/docs/sendgrid/api-reference/mail-send/errors):
        # a malformed recipient address is about the recipient...
        (400, "personalizations.0.to.0.email", RejectCode.INVALID_DESTINATION),
        # ...the shape of our request never is ("The to array is required for
        # all personalization objects", "You must have at least one
        # personalization", "The subject is required").
        (400, "personalizations.0.to", RejectCode.REQUEST_INVALID),
        (400, "personalizations", RejectCode.REQUEST_INVALID),
        (400, "personalizations.0", RejectCode.REQUEST_INVALID),
        (400, "subject", RejectCode.REQUEST_INVALID),
        # Our From: "The from email does not contain a valid address", and the
        # 403 "The from address does not match a verified Sender Identity".
        (400, "from.email", RejectCode.SENDER_REJECTED),
        (403, "from", RejectCode.SENDER_REJECTED),
        (403, None, RejectCode.AUTH_FAILED),
    ],
)
def test_a_refusal_is_classified_by_its_field(
    status: int, field: str | None, code: RejectCode
) -> None:
    result = _refused(status, field)
    assert isinstance(result, Rejected) and result.code is code


# --- events ---------------------------------------------------------------------

EVENT_TABLE = [
    ({"event": "processed"}, ObservedStatus.accepted, None),
    ({"event": "deferred"}, ObservedStatus.accepted, None),
    ({"event": "delivered"}, ObservedStatus.delivered, None),
    ({"event": "open"}, ObservedStatus.delivered, None),
    ({"event": "click"}, ObservedStatus.delivered, None),
    ({"event": "bounce", "type": "bounce"}, ObservedStatus.failed, RejectCode.BOUNCED),
    ({"event": "bounce", "type": "blocked"}, ObservedStatus.undelivered, RejectCode.BOUNCED),
    ({"event": "dropped", "reason": "Bounced Address"}, ObservedStatus.failed, RejectCode.BOUNCED),
    (
        {"event": "dropped", "reason": "Unsubscribed Address"},
        ObservedStatus.failed,
        RejectCode.OPTED_OUT,
    ),
    (
        {"event": "dropped", "reason": "Invalid"},
        ObservedStatus.failed,
        RejectCode.INVALID_DESTINATION,
    ),
    ({"event": "spamreport"}, ObservedStatus.delivered, RejectCode.COMPLAINT),
    ({"event": "unsubscribe"}, ObservedStatus.delivered, RejectCode.OPTED_OUT),
    ({"event": "group_unsubscribe"}, ObservedStatus.delivered, RejectCode.OPTED_OUT),
    ({"event": "teleport"}, ObservedStatus.unknown, None),
]


@pytest.mark.parametrize(("fields", "status", "code"), EVENT_TABLE)
def test_event_mapping_table(
    key: Any, fields: dict[str, str], status: ObservedStatus, code: RejectCode | None
) -> None:
    adapter = make_adapter(SendGridFake(), key)
    event = sendgrid_event("14c5d75ce93", "k", "processed") | fields
    body = json.dumps([event]).encode()
    request = WebhookRequest("POST", "https://t/", sign(key, body, int(NOW)), body)
    [observation] = adapter.verify_webhook(request)
    assert (observation.status, observation.code) == (status, code and code.value)
    assert observation.provider_message_id == "14c5d75ce93"
    assert observation.dedupe_key == f"sendgrid:event:{event['sg_event_id']}"


def test_a_batch_is_verified_once_and_mapped_per_event(key: Any) -> None:
    adapter = make_adapter(SendGridFake(), key)
    events = [sendgrid_event("m1", "k1", "processed"), sendgrid_event("m1", "k1", "delivered")]
    body = json.dumps(events).encode()
    observations = adapter.verify_webhook(
        WebhookRequest("POST", "https://t/", sign(key, body, 1), body)
    )
    assert [o.raw_status for o in observations] == ["processed", "delivered"]
    assert {o.attempt_key for o in observations} == {"k1"}


# SendGrid's published vector (sendgrid-python test/unit/test_eventwebhook.py).
VECTOR_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpV"
    "KS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
)
VECTOR_SIGNATURE = (
    "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+lu"
    "QAbPIqHh89M15TluLtEZtM="
)
VECTOR_TIMESTAMP = "1600112502"
VECTOR_PAYLOAD = (
    json.dumps(
        [
            {
                "email": "hello@world.com",
                "event": "dropped",
                "reason": "Bounced Address",
                "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
                "sg_message_id": (
                    "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0"
                ),
                "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
                "timestamp": 1600112492,
            }
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
    + "\r\n"
).encode()


def vector_request(signature: str | None = VECTOR_SIGNATURE, body: bytes = VECTOR_PAYLOAD):
    headers = {"X-Twilio-Email-Event-Webhook-Timestamp": VECTOR_TIMESTAMP}
    if signature is not None:
        headers["X-Twilio-Email-Event-Webhook-Signature"] = signature
    return WebhookRequest("POST", "https://t/", headers, body)


def test_published_vector_verifies() -> None:
    adapter = SendGridAdapter(API_KEY, webhook_public_key=VECTOR_KEY)
    [observation] = adapter.verify_webhook(vector_request())
    assert (observation.status, observation.code) == (ObservedStatus.failed, "BOUNCED")
    assert observation.provider_message_id == "LRzXl_NHStOGhQ4kofSm_A"
    assert "hello@world.com" not in repr(observation.raw)


@pytest.mark.parametrize(
    "request_",
    [
        vector_request(signature=None),
        vector_request(body=b"payload"),
        vector_request(
            "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0="
        ),
        vector_request(signature="not base64!"),
    ],
    ids=["missing", "bad-payload", "bad-signature", "garbage"],
)
def test_published_vector_negative_cases(request_: WebhookRequest) -> None:
    adapter = SendGridAdapter(API_KEY, webhook_public_key=VECTOR_KEY)
    with pytest.raises(InvalidSignature):
        adapter.verify_webhook(request_)


def test_the_published_vector_fails_under_another_key() -> None:
    other = (
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8REntlo"
        "7aNDthvj+y7GjUuFDb/R1NGe1OPzpA=="
    )
    with pytest.raises(InvalidSignature):
        SendGridAdapter(API_KEY, webhook_public_key=other).verify_webhook(vector_request())


def test_tolerance_is_optional_and_enforced_when_set() -> None:
    adapter = SendGridAdapter(
        API_KEY, webhook_public_key=VECTOR_KEY, signature_tolerance_s=300, clock=lambda: NOW
    )
    with pytest.raises(InvalidSignature, match="tolerance"):
        adapter.verify_webhook(vector_request())


def test_without_a_public_key_webhooks_are_a_config_error() -> None:
    with pytest.raises(ProviderConfigError):
        SendGridAdapter(API_KEY).verify_webhook(vector_request())
    with pytest.raises(ProviderConfigError):
        SendGridAdapter(API_KEY, webhook_public_key="not a key")


def test_built_from_settings_and_key_stays_out_of_repr() -> None:
    adapter = build("sendgrid", {"api_key": API_KEY, "from": "a@b.test", "timeout": "2"})
    assert isinstance(adapter, SendGridAdapter) and adapter.timeout == 2.0
    assert API_KEY not in repr(adapter)
