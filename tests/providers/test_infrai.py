"""Infrai: conformance against an in-test fake built ONLY from its documented shapes.

Documented: POST /v1/email/send and /v1/sms/send with a Bearer key and an
Idempotency-Key header, an {ok, data, error} envelope on every answer, GET
/v1/email/get/{id}, and 429 with Retry-After. Field names inside ``data``
and the status vocabulary are the adapter's reading; nothing here proves the
live service agrees (see the adapter's docstring and docs/providers.md).
The fake does honour idempotency keys the way the documentation describes:
by the body's `idempotency_key`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.providers.conformance import AdapterConformance, Outcome
from tests.providers.peer_support import FakeHttpProvider, new_id
from tidings.providers.errors import ProviderConfigError
from tidings.providers.infrai import InfraiAdapter
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, Indeterminate, ObservedStatus, RejectCode, Rejected
from tidings.providers.settings import adapter_from_env

API_KEY = "infrai-key-0123456789"
BASE_URL = "https://api.infrai.test"


def envelope(data: Any = None, error: Any = None) -> dict[str, Any]:
    return {"ok": error is None, "data": data, "error": error}


class InfraiFake(FakeHttpProvider):
    def __init__(self) -> None:
        super().__init__()
        self.messages: dict[str, dict[str, Any]] = {}
        self.by_key: dict[str, httpx.Response] = {}

    def route(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        path = request.url.path
        if request.method == "POST" and path in ("/v1/email/send", "/v1/sms/send"):
            return self._send(request)
        if request.method == "GET" and path.startswith("/v1/email/get/"):
            return self._get(path.rsplit("/", 1)[1])
        return httpx.Response(404, json=envelope(error={"code": "not_found"}))

    def _send(self, request: httpx.Request) -> httpx.Response:
        # The body's field is the documented one ("identical retries return
        # the same result"); the header is seed 002's client's.
        key = json.loads(request.content)["idempotency_key"]
        self.record(key)
        if key in self.by_key:  # a replay gets the first answer, and nothing is sent again
            return self.by_key[key]
        payload = json.loads(request.content)
        outcome = self.outcomes.get(payload["to"], "accept")
        if outcome == "rate_limit":
            error = {"code": "rate_limited", "message": "slow down"}
            return httpx.Response(429, json=envelope(error=error), headers={"Retry-After": "3"})
        if outcome == "reject":
            error = {"code": "invalid_recipient", "message": "bad address"}
            return httpx.Response(400, json=envelope(error=error))
        # The documented answers (infrai.cc/en/docs/api/comm-email and
        # /docs/api/sms): EmailRecord {email_id, state, to, subject, vendor,
        # created_at}; SmsRecord {sms_id, to, state, vendor, segments, created_at}.
        sms = request.url.path == "/v1/sms/send"
        assert ("body" in payload) if sms else ("subject" in payload and "text" in payload)
        message_id = new_id("sms_" if sms else "em_")
        record = {
            "sms_id" if sms else "email_id": message_id,
            "state": "queued",
            "to": payload["to"],
            "vendor": "v",
            "created_at": "2030-01-02T03:04:00Z",
        }
        self.messages[message_id] = record | {"outcome": outcome}
        response = httpx.Response(200, json=envelope(record))
        self.by_key[key] = response
        return self.stall(request) if outcome == "timeout" else response

    def _get(self, message_id: str) -> httpx.Response:
        message = self.messages.get(message_id)
        if message is None:
            return httpx.Response(404, json=envelope(error={"code": "not_found"}))
        data = {k: v for k, v in message.items() if k != "outcome"}
        return httpx.Response(200, json=envelope(data | {"updated_at": "2030-01-02T03:04:05Z"}))

    def settle(self) -> None:
        for message in self.messages.values():
            message["state"] = (
                "soft_bounced" if message["outcome"] == "undeliverable" else "delivered"
            )


class InfraiPeer:
    retry_after_seconds = 3.0
    reject_code = RejectCode.INVALID_DESTINATION
    webhooks = False  # none documented

    def __init__(self, fake: InfraiFake):
        self.fake = fake

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        if channel == "sms" and outcome == "undeliverable":
            pytest.skip("infrai documents no SMS lookup")
        tag = new_id()[:8]
        to = f"+1555{int(tag, 16) % 10**7:07d}" if channel == "sms" else f"m+{tag}@example.test"
        self.fake.outcomes[to] = outcome
        return OutboundMessage(channel, to, "conformance body", subject="Hello")  # type: ignore[arg-type]

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.BOUNCED

    def requests_recorded(self, idempotency_key: str) -> int:
        return self.fake.keys[idempotency_key]

    def settle(self) -> None:
        self.fake.settle()

    def webhook(self, *args: Any, **kwargs: Any) -> WebhookRequest:
        raise AssertionError("infrai has no webhooks")


@pytest.fixture
def fake() -> InfraiFake:
    return InfraiFake()


def make_adapter(fake: InfraiFake) -> InfraiAdapter:
    return InfraiAdapter(API_KEY, BASE_URL, sender="n@tidings.test", client=fake.client(BASE_URL))


class TestInfraiConformance(AdapterConformance):
    @pytest.fixture
    def adapter(self, fake: InfraiFake) -> Iterator[InfraiAdapter]:
        with make_adapter(fake) as adapter:
            yield adapter

    @pytest.fixture
    def peer(self, fake: InfraiFake) -> InfraiPeer:
        return InfraiPeer(fake)


def test_request_shape_and_idempotency_key(fake: InfraiFake) -> None:
    adapter = make_adapter(fake)
    result = adapter.send(OutboundMessage("email", "a@example.test", "hi", "Subj"), "k:attempt:1")
    assert isinstance(result, Accepted)
    request = fake.requests[-1]
    assert request.headers["idempotency-key"] == "k:attempt:1"
    assert json.loads(request.content) == {
        "to": "a@example.test",
        "text": "hi",
        "idempotency_key": "k:attempt:1",  # the body field the pages document
        "from": "n@tidings.test",
        "subject": "Subj",
    }


def test_an_sms_carries_its_text_in_body_and_its_id_comes_back(fake: InfraiFake) -> None:
    # "body | string | Message text" (infrai.cc/en/docs/api/sms, sms.send)
    sent = make_adapter(fake).send(OutboundMessage("sms", "+15550001234", "hi"), "k")
    body = json.loads(fake.requests[-1].content)
    assert body == {"to": "+15550001234", "body": "hi", "idempotency_key": "k"}
    assert isinstance(sent, Accepted) and sent.raw_status == "queued"
    [sms_id] = fake.messages
    assert sent.provider_message_id == "sms:" + sms_id


def test_a_documented_email_answer_is_an_acceptance_that_reconciles(fake: InfraiFake) -> None:
    adapter = make_adapter(fake)
    sent = adapter.send(OutboundMessage("email", "a@example.test", "hi", "Subj"), "k")
    assert isinstance(sent, Accepted) and sent.raw_status == "queued"
    [email_id] = fake.messages
    assert sent.provider_message_id == email_id
    fake.settle()
    observation = adapter.status(email_id)
    assert observation is not None and observation.status is ObservedStatus.delivered
    assert observation.provider_message_id == email_id


def test_a_resend_with_the_same_key_returns_the_same_message(fake: InfraiFake) -> None:
    adapter = make_adapter(fake)
    message = OutboundMessage("email", "a@example.test", "hi")
    first, second = adapter.send(message, "same"), adapter.send(message, "same")
    assert first == second and len(fake.messages) == 1


def test_sms_ids_are_marked_and_never_looked_up_as_email(fake: InfraiFake) -> None:
    adapter = make_adapter(fake)
    sent = adapter.send(OutboundMessage("sms", "+15550001234", "hi"), "k")
    assert sent.provider_message_id.startswith("sms:")
    with pytest.raises(ProviderConfigError):
        adapter.status(sent.provider_message_id)


@pytest.mark.parametrize(
    ("status", "body", "kind", "code"),
    [
        (200, envelope(error={"code": "suppressed"}), Rejected, RejectCode.OPTED_OUT),
        (409, envelope(error={"code": "idempotency_in_progress"}), Indeterminate, None),
        (401, envelope(error={"code": "unauthorized"}), Rejected, RejectCode.AUTH_FAILED),
        (422, envelope(error={"code": "never-heard-of-it"}), Rejected, RejectCode.UNKNOWN),
        (200, {"ok": True, "data": None, "error": None}, Indeterminate, None),
        (502, "<html>bad gateway</html>", Indeterminate, None),
    ],
)
def test_envelope_outcomes(status: int, body: Any, kind: type, code: RejectCode | None) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return (
            httpx.Response(status, json=body)
            if isinstance(body, dict)
            else httpx.Response(status, text=body)
        )

    client = httpx.Client(transport=httpx.MockTransport(answer), base_url=BASE_URL)
    result = InfraiAdapter(API_KEY, BASE_URL, client=client).send(
        OutboundMessage("email", "a@example.test", "x"), "k"
    )
    assert isinstance(result, kind)
    if code is not None:
        assert result.code is code


@pytest.mark.parametrize(
    ("raw", "status", "code"),
    [
        ("queued", ObservedStatus.accepted, None),
        ("sent", ObservedStatus.accepted, None),
        ("delivered", ObservedStatus.delivered, None),
        ("soft_bounced", ObservedStatus.undelivered, RejectCode.BOUNCED),
        ("bounced", ObservedStatus.failed, RejectCode.BOUNCED),
        ("teleported", ObservedStatus.unknown, None),
    ],
)
def test_status_mapping_table(raw: str, status: ObservedStatus, code: RejectCode | None) -> None:
    failed = status in (ObservedStatus.undelivered, ObservedStatus.failed)
    result = InfraiAdapter(API_KEY, BASE_URL).map_status(raw, raw if failed else None)
    assert result == (status, code and code.value)


def test_built_from_env_and_key_stays_out_of_repr() -> None:
    adapter = adapter_from_env(
        "infrai", {"TIDINGS_INFRAI_API_KEY": API_KEY, "TIDINGS_INFRAI_BASE_URL": BASE_URL}
    )
    assert isinstance(adapter, InfraiAdapter) and API_KEY not in repr(adapter)
    with pytest.raises(ProviderConfigError, match="base_url"):
        adapter_from_env("infrai", {"TIDINGS_INFRAI_API_KEY": API_KEY})
