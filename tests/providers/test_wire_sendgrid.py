"""The simulator speaking SendGrid's own wire, read by the real
SendGridAdapter, unchanged: its request building, the 202 and its
X-Message-Id, the errors' fields, the 429's X-RateLimit-Reset, and the
Event Webhook parser with its ECDSA signature check, under the simulator
core's faults."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tidings.domain import feedback
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
from tidings.providers.sendgrid import SIGNATURE_HEADER, TIMESTAMP_HEADER, SendGridAdapter
from tidings.providers.simulator import SimulatorConfig, SimulatorCore
from tidings.providers.simulator.app import create_app
from tidings.providers.simulator.in_process import CoreTransport
from tidings.providers.simulator.receipts import ReceiptDispatcher
from tidings.providers.simulator.wire_sendgrid import account_of, event_webhook

T0 = 1_900_000_000.0
HOOK = "https://tidings.example/v1/webhooks/sendgrid"
BASE = "https://api.sendgrid.test"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def wired(
    api_key: str | None = None, secret: str | None = None, **config: Any
) -> tuple[SimulatorCore, SendGridAdapter, Clock]:
    clock = Clock()
    settings = SimulatorConfig(profile="sendgrid", webhook_url=HOOK, wire=True, **config)
    core = SimulatorCore(settings, clock=clock)
    account = account_of(core.config)
    client = httpx.Client(base_url=BASE, transport=CoreTransport(core))
    # A stranger's verification key: the key pair of another secret.
    key = account_of(settings.updated({"webhook_secret": secret})).public_key() if secret else None
    adapter = SendGridAdapter(
        api_key or account.api_key,
        sender="tidings@sender.test",
        webhook_public_key=key or account.public_key(),
        base_url=BASE,
        client=client,
        clock=clock,
    )
    return core, adapter, clock


def mail(to: str = "ada@example.test") -> OutboundMessage:
    return OutboundMessage("email", to, "hello", subject="Hi")


def test_a_send_is_202_with_x_message_id_and_our_key_reaches_the_core() -> None:
    core, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(mail(), "tdg:key:1"))
    assert response.status_code == 202 and response.content == b""
    result = adapter.parse_response(response)
    assert isinstance(result, Accepted)
    [entry] = core.ledger()
    assert entry["provider_message_id"] == response.headers["X-Message-Id"]
    assert entry["provider_message_id"] == result.provider_message_id
    assert entry["idempotency_key"] == "tdg:key:1"  # from custom_args


def test_a_wrong_api_key_is_401_and_auth_failed() -> None:
    core, adapter, _ = wired(api_key="SG.not-the-key")
    response = adapter.transmit(adapter.build_request(mail(), "tdg:key:2"))
    assert response.status_code == 401 and response.json()["errors"][0]["field"] is None
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED
    assert core.ledger() == []


def test_sendgrids_rate_limit_is_429_read_from_x_ratelimit_reset() -> None:
    _, adapter, _ = wired(rate_429=1.0, retry_after_seconds=7)
    response = adapter.transmit(adapter.build_request(mail(), "tdg:key:3"))
    assert response.status_code == 429
    assert response.headers["X-RateLimit-Remaining"] == "0"
    assert response.headers["X-RateLimit-Reset"] == str(int(T0) + 7)
    assert "Retry-After" not in response.headers
    [error] = response.json()["errors"]
    assert (error["field"], error["message"]) == (None, "too many requests")
    result = adapter.parse_response(response)
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED
    assert result.retry_after_seconds == 7.0


def test_sendgrids_own_failure_is_500_and_indeterminate() -> None:
    _, adapter, _ = wired(rate_5xx=1.0)
    result = adapter.send(mail(), "tdg:key:4")
    assert isinstance(result, Indeterminate) and result.code is RejectCode.PROVIDER_ERROR


def test_a_stalled_answer_is_a_timeout_on_an_accepted_message() -> None:
    core, adapter, _ = wired(rate_timeout=1.0)
    result = adapter.send(mail(), "tdg:key:5")
    assert isinstance(result, Indeterminate) and result.code is RejectCode.TIMEOUT
    [entry] = core.ledger()
    assert entry["provider_message_id"]


@pytest.mark.parametrize(
    ("to", "status", "field", "code"),
    [
        (
            "invalid@example.test",
            400,
            "personalizations.0.to.0.email",
            RejectCode.INVALID_DESTINATION,
        ),
        ("badrequest@example.test", 400, "personalizations.0", RejectCode.REQUEST_INVALID),
        ("badsender@example.test", 403, "from", RejectCode.SENDER_REJECTED),
        ("restricted@example.test", 403, None, RejectCode.AUTH_FAILED),
        ("optout@example.test", 400, None, RejectCode.UNKNOWN),
    ],
)
def test_a_refusal_the_core_decides_reads_as_sendgrids_error(
    to: str, status: int, field: str | None, code: RejectCode
) -> None:
    core, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(mail(to), "tdg:key:6"))
    assert response.status_code == status
    [error] = response.json()["errors"]
    assert error["field"] == field and error["message"]
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is code
    [entry] = core.ledger()
    assert entry["outcome"] == "rejected"


@pytest.mark.parametrize(
    "to", ["badrequest@example.test", "badsender@example.test", "restricted@example.test"]
)
def test_a_refusal_not_about_the_recipient_suppresses_nobody(to: str) -> None:
    _, adapter, _ = wired()
    result = adapter.send(mail(to), "tdg:key:7")
    assert isinstance(result, Rejected)
    assert feedback.fault(result.code.value) != "recipient"
    assert feedback.send_lesson(result.code.value) is None


@pytest.mark.parametrize(
    ("drop", "field"),
    [
        ("personalizations", "personalizations"),
        ("to", "personalizations.0.to"),
        ("from", "from"),
        ("subject", "subject"),
        ("content", "content"),
    ],
)
def test_a_malformed_request_is_refused_before_the_core_and_blocks_nobody(
    drop: str, field: str
) -> None:
    core, adapter, _ = wired()
    request = adapter.build_request(mail(), "tdg:key:8")
    assert request.json is not None
    if drop == "to":
        del request.json["personalizations"][0]["to"]
    else:
        del request.json[drop]
    response = adapter.transmit(request)
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == field
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected)
    # #37: a refusal of the request's shape is never a fact about the recipient.
    assert feedback.fault(result.code.value) != "recipient"
    assert feedback.send_lesson(result.code.value) is None
    assert core.ledger() == []


def _hooks(core: SimulatorCore, clock: Clock, adapter: SendGridAdapter) -> list[Any]:
    clock.now += 5
    seen = []
    for receipt in core.take_due_receipts():
        headers, body = event_webhook(receipt, account_of(core.config), int(clock.now))
        assert headers["Content-Type"] == "application/json"
        [obs] = adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
        [event] = json.loads(body)
        seen.append((obs, event))
    return seen


def test_an_acceptance_ends_delivered_by_a_signed_event_naming_our_attempt() -> None:
    core, adapter, clock = wired()
    accepted = adapter.send(mail(), "tdg:key:9")
    assert isinstance(accepted, Accepted)
    [(obs, event)] = _hooks(core, clock, adapter)
    assert event["event"] == "delivered" and event["email"] == "ada@example.test"
    assert event["sg_message_id"].split(".")[0] == accepted.provider_message_id
    assert event["tidings_attempt"] == "tdg:key:9"  # custom_args, top-level
    assert obs.status is ObservedStatus.delivered and obs.attempt_key == "tdg:key:9"
    assert obs.provider_message_id == accepted.provider_message_id


def test_a_hard_bounce_suppresses_and_a_blocked_or_soft_one_does_not() -> None:
    core, adapter, clock = wired()
    adapter.send(mail("hardbounce@example.test"), "tdg:key:10")
    adapter.send(mail("blocked@example.test"), "tdg:key:11")
    adapter.send(mail("bounce@example.test"), "tdg:key:12")
    seen = {obs.attempt_key: (obs, event) for obs, event in _hooks(core, clock, adapter)}
    hard, hard_event = seen["tdg:key:10"]
    assert (hard_event["event"], hard_event["type"]) == ("bounce", "bounce")
    assert hard.status is ObservedStatus.failed and hard.code == RejectCode.BOUNCED
    assert feedback.lesson(hard.status.value, hard.code) == feedback.Lesson(
        "suppression", feedback.HARD_BOUNCE
    )
    for key in ("tdg:key:11", "tdg:key:12"):
        soft, soft_event = seen[key]
        assert (soft_event["event"], soft_event["type"]) == ("bounce", "blocked")
        assert soft.status is ObservedStatus.undelivered
        assert feedback.lesson(soft.status.value, soft.code) is None


def test_a_dropped_event_carries_its_reason_and_a_spamreport_suppresses() -> None:
    core, adapter, clock = wired()
    adapter.send(mail("fail@example.test"), "tdg:key:13")
    adapter.send(mail("complaint@example.test"), "tdg:key:14")
    seen = {obs.attempt_key: (obs, event) for obs, event in _hooks(core, clock, adapter)}
    dropped, dropped_event = seen["tdg:key:13"]
    assert dropped_event["reason"] == "Invalid SMTPAPI header"
    assert dropped.status is ObservedStatus.failed
    assert dropped.code == RejectCode.CONTENT_REJECTED
    assert feedback.lesson(dropped.status.value, dropped.code) is None
    spam, spam_event = seen["tdg:key:14"]
    assert spam_event["event"] == "spamreport" and spam.code == RejectCode.COMPLAINT
    assert feedback.lesson(spam.status.value, spam.code) == feedback.Lesson(
        "suppression", feedback.COMPLAINT
    )


def test_events_are_signed_with_the_accounts_key_and_a_stranger_refuses_them() -> None:
    core, adapter, clock = wired()
    _, stranger, _ = wired(secret="someone-else")
    adapter.send(mail(), "tdg:key:15")
    clock.now += 5
    [receipt] = core.take_due_receipts()
    headers, body = event_webhook(receipt, account_of(core.config), int(clock.now))
    assert headers[TIMESTAMP_HEADER] == str(int(clock.now)) and headers[SIGNATURE_HEADER]
    with pytest.raises(InvalidSignature):
        stranger.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
    tampered = body.replace(b"delivered", b"bounce")
    with pytest.raises(InvalidSignature):
        adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, tampered))


def test_duplicated_events_share_their_dedupe_key() -> None:
    core, adapter, clock = wired(duplicate_rate=1.0)
    adapter.send(mail("hardbounce@example.test"), "tdg:key:16")
    seen = _hooks(core, clock, adapter)
    assert len(seen) == 2
    assert len({obs.dedupe_key for obs, _ in seen}) == 1


def test_the_dispatcher_posts_signed_sendgrid_events() -> None:
    posted: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        request.read()
        posted.append(request)
        return httpx.Response(200)

    core, adapter, clock = wired()
    adapter.send(mail(), "tdg:key:17")
    clock.now += 5
    receiver = httpx.Client(transport=httpx.MockTransport(receive))
    ReceiptDispatcher(core, client=receiver).run_once()
    [request] = posted
    [obs] = adapter.verify_webhook(
        WebhookRequest("POST", str(request.url), dict(request.headers), request.content)
    )
    assert obs.attempt_key == "tdg:key:17" and obs.status is ObservedStatus.delivered


def test_the_http_app_speaks_sendgrids_wire() -> None:
    clock = Clock()
    core = SimulatorCore(SimulatorConfig(profile="sendgrid"), clock=clock)
    account = account_of(core.config)
    with TestClient(create_app(core, deliver_receipts=False), base_url=BASE) as client:
        adapter = SendGridAdapter(
            account.api_key, sender="tidings@sender.test", base_url=BASE, client=client
        )
        accepted = adapter.send(mail(), "tdg:key:18")
        assert isinstance(accepted, Accepted)
        refused = adapter.send(mail("badrequest@example.test"), "tdg:key:19")
        assert isinstance(refused, Rejected) and refused.code is RejectCode.REQUEST_INVALID
        [first, _] = core.ledger()
        assert first["provider_message_id"] == accepted.provider_message_id


def test_the_verification_key_is_read_where_sendgrid_serves_it() -> None:
    # An operator configures the worker's key from the simulator as from SendGrid.
    clock = Clock()
    core = SimulatorCore(SimulatorConfig(profile="sendgrid", webhook_secret="s3"), clock=clock)
    account = account_of(core.config)
    with TestClient(create_app(core, deliver_receipts=False), base_url=BASE) as client:
        path = "/v3/user/webhooks/event/settings/signed"
        assert client.get(path).status_code == 401
        auth = {"Authorization": f"Bearer {account.api_key}"}
        served = client.get(path, headers=auth).json()["public_key"]
        assert client.get(f"{path}/simulator", headers=auth).json()["public_key"] == served
    assert served == account.public_key()
    assert served != account_of(SimulatorConfig(webhook_secret="other")).public_key()
