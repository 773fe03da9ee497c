"""The simulator speaking Vonage's SMS API, read by the real VonageAdapter,
unchanged: its form post with api_key/api_secret and client-ref, the
always-200 answer and its status table, and the delivery receipt parser
with its `sig` check, under the simulator core's faults."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tidings.domain import feedback
from tidings.domain.keys import attempt_key
from tidings.providers.errors import InvalidSignature
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
)
from tidings.providers.simulator import SimulatorConfig, SimulatorCore
from tidings.providers.simulator.app import create_app
from tidings.providers.simulator.in_process import CoreTransport
from tidings.providers.simulator.receipts import ReceiptDispatcher
from tidings.providers.simulator.wire_vonage import VonageAccount, account_of, delivery_receipt
from tidings.providers.vonage import VonageAdapter

T0 = 1_900_000_000.0
HOOK = "https://tidings.example/v1/webhooks/vonage"
BASE = "https://rest.vonage.test"
TO = "+447700900123"
KEY = attempt_key(uuid.UUID(int=37), 1)  # compacted into client-ref


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def wired(
    api_secret: str | None = None, signature_secret: str | None = None, **config: Any
) -> tuple[SimulatorCore, VonageAdapter, Clock]:
    clock = Clock()
    settings = SimulatorConfig(profile="vonage", webhook_url=HOOK, wire=True, **config)
    core = SimulatorCore(settings, clock=clock)
    account = account_of(core.config)
    client = httpx.Client(base_url=BASE, transport=CoreTransport(core))
    adapter = VonageAdapter(
        account.api_key,
        api_secret or account.api_secret,
        sender="Tidings",
        signature_secret=signature_secret or account.signature_secret,
        callback_url=HOOK,
        base_url=BASE,
        client=client,
        clock=clock,
    )
    return core, adapter, clock


def sms(to: str = TO) -> OutboundMessage:
    return OutboundMessage("sms", to, "hello")


def test_a_send_is_status_0_and_our_client_ref_reaches_the_core() -> None:
    core, adapter, _ = wired()
    request = adapter.build_request(sms(), KEY)
    response = adapter.transmit(request)
    assert response.status_code == 200
    body = response.json()
    [message] = body["messages"]
    assert body["message-count"] == "1" and message["status"] == "0"
    assert message["client-ref"] == request.data["client-ref"]  # type: ignore[index]
    assert len(message["client-ref"]) <= 40
    result = adapter.parse_response(response)
    assert isinstance(result, Accepted) and result.raw_status == "0"
    [entry] = core.ledger()
    assert entry["provider_message_id"] == result.provider_message_id
    assert entry["idempotency_key"] == message["client-ref"]


def test_a_wrong_api_secret_is_status_4_and_auth_failed() -> None:
    core, adapter, _ = wired(api_secret="not-the-secret")
    response = adapter.transmit(adapter.build_request(sms(), KEY))
    assert response.status_code == 200 and response.json()["messages"][0]["status"] == "4"
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED
    assert core.ledger() == []


def test_vonages_throttle_is_status_1_and_retryable() -> None:
    _, adapter, _ = wired(rate_429=1.0)
    response = adapter.transmit(adapter.build_request(sms(), KEY))
    assert response.status_code == 200 and "Retry-After" not in response.headers
    assert response.json()["messages"][0]["status"] == "1"
    result = adapter.parse_response(response)
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED


def test_vonages_internal_error_is_status_5_and_indeterminate() -> None:
    _, adapter, _ = wired(rate_5xx=1.0)
    result = adapter.send(sms(), KEY)
    assert isinstance(result, Indeterminate) and result.code is RejectCode.PROVIDER_ERROR


def test_a_stalled_answer_is_a_timeout_on_an_accepted_message() -> None:
    core, adapter, _ = wired(rate_timeout=1.0)
    result = adapter.send(sms(), KEY)
    assert isinstance(result, Indeterminate) and result.code is RejectCode.TIMEOUT
    [entry] = core.ledger()
    assert entry["outcome"] == "timeout_after_accept"


@pytest.mark.parametrize(
    ("suffix", "status", "code", "fault"),
    [
        ("0000", "6", RejectCode.INVALID_DESTINATION, "recipient"),
        ("0009", "7", RejectCode.OPTED_OUT, "recipient"),
        ("0422", "3", RejectCode.REQUEST_INVALID, "request"),
        ("0451", "15", RejectCode.SENDER_REJECTED, "sender"),
        ("0403", "29", RejectCode.ACCOUNT_RESTRICTED, "account"),
    ],
)
def test_a_refusal_the_core_decides_is_vonages_status(
    suffix: str, status: str, code: RejectCode, fault: str
) -> None:
    core, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(sms("+4477009" + suffix), KEY))
    assert response.status_code == 200
    [message] = response.json()["messages"]
    assert message["status"] == status and message["error-text"]
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is code
    assert result.provider_code == status
    assert feedback.fault(result.code.value) == fault
    if fault != "recipient":  # #37: only a fact about the recipient blocks it
        assert feedback.send_lesson(result.code.value) is None
    [entry] = core.ledger()
    assert entry["outcome"] == "rejected"


def test_a_request_missing_a_parameter_is_status_2_and_blocks_nobody() -> None:
    core, adapter, _ = wired()
    request = adapter.build_request(sms(), KEY)
    assert request.data is not None
    del request.data["text"]  # type: ignore[attr-defined]
    result = adapter.parse_response(adapter.transmit(request))
    assert isinstance(result, Rejected) and result.code is RejectCode.REQUEST_INVALID
    assert result.provider_code == "2"
    assert feedback.send_lesson(result.code.value) is None
    assert core.ledger() == []


def test_a_json_body_is_read_like_the_form() -> None:
    core, adapter, _ = wired()
    account = account_of(core.config)
    client = httpx.Client(base_url=BASE, transport=CoreTransport(core))
    params = {
        "api_key": account.api_key,
        "api_secret": account.api_secret,
        "from": "Tidings",
        "to": TO.lstrip("+"),
        "text": "hello",
        "client-ref": "ref-json",
    }
    response = client.post("/sms/json", json=params)
    [message] = response.json()["messages"]
    assert message["status"] == "0" and message["client-ref"] == "ref-json"
    assert isinstance(adapter.parse_response(response), Accepted)


def _receipts(core: SimulatorCore, clock: Clock, adapter: VonageAdapter) -> list[Any]:
    clock.now += 5
    seen = []
    for receipt in core.take_due_receipts():
        headers, body = delivery_receipt(receipt, account_of(core.config), int(clock.now))
        assert headers["Content-Type"] == "application/json"
        [obs] = adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
        seen.append((obs, json.loads(body)))
    return seen


def test_an_acceptance_ends_delivered_by_a_signed_receipt_naming_our_attempt() -> None:
    core, adapter, clock = wired()
    accepted = adapter.send(sms(), KEY)
    assert isinstance(accepted, Accepted)
    seen = _receipts(core, clock, adapter)
    assert [dlr["status"] for _, dlr in seen] == ["buffered", "delivered"]
    obs, dlr = seen[-1]
    assert dlr["messageId"] == accepted.provider_message_id and dlr["err-code"] == "0"
    assert dlr["msisdn"] == TO.lstrip("+") and len(dlr["scts"]) == 10
    assert obs.status is ObservedStatus.delivered and obs.attempt_key == KEY
    assert seen[0][0].status is ObservedStatus.accepted


def test_a_temporary_failure_is_undelivered_and_a_carrier_filter_suppresses_nobody() -> None:
    core, adapter, clock = wired()
    adapter.send(sms("+447700900001"), attempt_key(uuid.UUID(int=1), 1))
    adapter.send(sms("+447700900002"), attempt_key(uuid.UUID(int=2), 1))
    finals = [(o, d) for o, d in _receipts(core, clock, adapter) if d["status"] != "buffered"]
    by_number = {dlr["msisdn"]: (obs, dlr) for obs, dlr in finals}
    absent, absent_dlr = by_number["447700900001"]
    assert (absent_dlr["status"], absent_dlr["err-code"]) == ("failed", "2")
    assert absent.status is ObservedStatus.undelivered and absent.code == RejectCode.UNREACHABLE
    assert feedback.lesson(absent.status.value, absent.code) is None
    filtered, filtered_dlr = by_number["447700900002"]
    assert (filtered_dlr["status"], filtered_dlr["err-code"]) == ("rejected", "6")
    assert filtered.status is ObservedStatus.failed
    assert filtered.code == RejectCode.CARRIER_FILTERED
    assert feedback.lesson(filtered.status.value, filtered.code) is None


@pytest.mark.parametrize("method", ["md5hash", "sha256"])
def test_receipts_are_signed_and_a_stranger_refuses_them(method: str) -> None:
    core, _, clock = wired()
    _, stranger, _ = wired(signature_secret="someone-else")
    adapter = VonageAdapter(
        "tidings1",
        "x",
        signature_secret=core.config.webhook_secret,
        signature_method=method,
        clock=clock,
    )
    account = VonageAccount(
        api_secret=core.config.webhook_secret,
        signature_secret=core.config.webhook_secret,
        signature_method=method,
    )
    core.send("sms", {"to": TO, "body": "hi", "idempotency_key": "ref-1", "metadata": {}})
    clock.now += 5
    receipt = core.take_due_receipts()[-1]
    headers, body = delivery_receipt(receipt, account, int(clock.now))
    [obs] = adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
    assert obs.status is ObservedStatus.delivered
    with pytest.raises(InvalidSignature):
        stranger.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
    tampered = body.replace(b'"delivered"', b'"failed"')
    with pytest.raises(InvalidSignature):
        adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, tampered))


def test_duplicated_receipts_share_their_dedupe_key() -> None:
    core, adapter, clock = wired(duplicate_rate=1.0)
    adapter.send(sms(), KEY)
    seen = [obs for obs, dlr in _receipts(core, clock, adapter) if dlr["status"] == "delivered"]
    assert len(seen) == 2
    assert len({obs.dedupe_key for obs in seen}) == 1


def test_the_dispatcher_posts_signed_vonage_receipts() -> None:
    posted: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        request.read()
        posted.append(request)
        return httpx.Response(200)

    core, adapter, clock = wired()
    adapter.send(sms(), KEY)
    clock.now += 5
    receiver = httpx.Client(transport=httpx.MockTransport(receive))
    # The dispatcher signs with the wall clock: read its timestamp as sent.
    ReceiptDispatcher(core, client=receiver, wall_clock=clock).run_once()
    statuses = []
    for request in posted:
        [obs] = adapter.verify_webhook(
            WebhookRequest("POST", str(request.url), dict(request.headers), request.content)
        )
        assert obs.attempt_key == KEY
        statuses.append(obs.status)
    assert sorted(statuses) == [ObservedStatus.accepted, ObservedStatus.delivered]


def test_the_http_app_speaks_vonages_wire() -> None:
    clock = Clock()
    core = SimulatorCore(SimulatorConfig(profile="vonage"), clock=clock)
    account = account_of(core.config)
    with TestClient(create_app(core, deliver_receipts=False), base_url=BASE) as client:
        adapter = VonageAdapter(
            account.api_key, account.api_secret, sender="Tidings", base_url=BASE, client=client
        )
        accepted = adapter.send(sms(), KEY)
        assert isinstance(accepted, Accepted)
        refused = adapter.send(sms("+447700900422"), KEY)
        assert isinstance(refused, Rejected) and refused.code is RejectCode.REQUEST_INVALID
        [first, _] = core.ledger()
        assert first["provider_message_id"] == accepted.provider_message_id
