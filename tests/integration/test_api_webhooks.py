"""Provider webhooks over HTTP: signed ones are applied once, others record nothing."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tidings import ManualClock, Tidings
from tidings.providers.messages import WebhookRequest
from tidings.providers.outcomes import Observation
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.providers.simulator.receipts import SIGNATURE_HEADER, render, sign

from .api_support import (
    auth,
    client,
    intent_body,
    is_problem,
    new_key,
    publish_offer,
    receipts_stored,
)
from .dispatch_helpers import simulator, worker

SECRET = "webhook-test-secret"
PATH = "/v1/webhooks/simulator"


class Sent:
    """An intent sent through the in-process simulator, its receipts now due."""

    def __init__(self, tidings: Tidings, clock: ManualClock) -> None:
        publish_offer(tidings, "acme")
        self.core: SimulatorCore = simulator(
            clock,
            webhook_url="http://api.test" + PATH,
            webhook_secret=SECRET,
            receipt_delay_ms=1000,
        )
        self.http = client(
            tidings, {"simulator": SimulatorAdapter("http://simulator.invalid", SECRET)}
        )
        self.key = auth(new_key(tidings, "acme"))
        self.id = self.http.post("/v1/intents", json=intent_body(tidings), headers=self.key).json()[
            "id"
        ]
        assert worker(tidings, self.core).dispatch_once() == 1
        clock.advance(5)
        self.receipts = InProcessSimulatorAdapter(self.core).due_webhooks()

    def post(self, request: WebhookRequest) -> Any:
        return self.http.post(PATH, content=request.body, headers=dict(request.headers))

    def state(self) -> str:
        intent = self.http.get(f"/v1/intents/{self.id}", headers=self.key).json()
        return str(intent["state"])


@pytest.fixture
def sent(tidings: Tidings, clock: ManualClock) -> Sent:
    return Sent(tidings, clock)


def test_a_signed_receipt_is_applied(sent: Sent, db_url: str) -> None:
    assert [json.loads(r.body)["status"] for r in sent.receipts] == ["sent", "delivered"]
    effects = []
    for receipt in sent.receipts:
        answer = sent.post(receipt)
        assert answer.status_code == 200, answer.text
        assert answer.json()["received"] == 1
        effects += answer.json()["effects"]
    assert effects[-1] == "intent_delivered"
    assert sent.state() == "delivered" and receipts_stored(db_url) == 2


def test_a_replayed_webhook_is_recorded_once(sent: Sent, db_url: str) -> None:
    delivered = sent.receipts[-1]
    assert sent.post(delivered).json()["effects"] == ["intent_delivered"]
    assert sent.post(delivered).json()["effects"] == ["duplicate"]
    assert receipts_stored(db_url) == 1 and sent.state() == "delivered"


def _forged(receipt: WebhookRequest) -> list[dict[str, Any]]:
    event = json.loads(receipt.body)
    now = int(time.time())
    wrong_secret, _ = render(event, "not-the-secret", now)
    stale, _ = render(event, SECRET, now - 3600)
    tampered = receipt.body.replace(b'"delivered"', b'"failed"')
    unsigned = {k: v for k, v in receipt.headers.items() if k.lower() != SIGNATURE_HEADER.lower()}
    return [
        {"content": receipt.body, "headers": unsigned},
        {"content": receipt.body, "headers": wrong_secret},
        {"content": receipt.body, "headers": stale},
        {"content": tampered, "headers": dict(receipt.headers)},
        {"content": receipt.body, "headers": {**unsigned, SIGNATURE_HEADER: "t=1,v1=abc"}},
    ]


def test_a_missing_or_bad_signature_is_401_and_records_nothing(sent: Sent, db_url: str) -> None:
    for forged in _forged(sent.receipts[-1]):
        is_problem(sent.http.post(PATH, **forged), 401, "INVALID_SIGNATURE")
    assert receipts_stored(db_url) == 0 and sent.state() == "accepted"


def test_an_unknown_provider_is_404(sent: Sent) -> None:
    receipt = sent.receipts[-1]
    answer = sent.http.post(
        "/v1/webhooks/twilio", content=receipt.body, headers=dict(receipt.headers)
    )
    is_problem(answer, 404, "NOT_FOUND")


def test_a_signed_body_that_is_not_json_is_400(sent: Sent, db_url: str) -> None:
    body = b"status=delivered"
    headers = {SIGNATURE_HEADER: sign(SECRET, body, int(time.time()))}
    is_problem(sent.http.post(PATH, content=body, headers=headers), 400, "INVALID_WEBHOOK")
    assert receipts_stored(db_url) == 0


class Recording(SimulatorAdapter):
    def __init__(self) -> None:
        super().__init__("http://simulator.invalid", SECRET)
        self.seen: list[WebhookRequest] = []

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        self.seen.append(request)
        return []


def test_the_adapter_sees_the_request_as_sent(tidings: Tidings) -> None:
    adapter = Recording()
    http = client(tidings, {"rec": adapter})
    answer = http.post(
        "/v1/webhooks/rec?AccountSid=AC1&x=2",
        content=b"a=1&b=2",
        headers={"X-Twilio-Signature": "sig", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 200 and answer.json() == {"received": 0, "effects": []}
    [seen] = adapter.seen
    assert (
        seen.method == "POST" and seen.url == "http://testserver/v1/webhooks/rec?AccountSid=AC1&x=2"
    )
    assert seen.body == b"a=1&b=2" and seen.headers["x-twilio-signature"] == "sig"
    assert dict(seen.query) == {"AccountSid": "AC1", "x": "2"}
