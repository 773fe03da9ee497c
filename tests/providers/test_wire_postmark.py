"""The simulator speaking Postmark's own wire, read by the real
PostmarkAdapter, unchanged: its request building, answer and ErrorCode
parsing, the details lookup, the metadata search and the webhook parser
with its Basic credentials check, under the simulator core's faults."""

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
from tidings.providers.postmark import PostmarkAdapter
from tidings.providers.simulator import SimulatorConfig, SimulatorCore
from tidings.providers.simulator.app import create_app
from tidings.providers.simulator.in_process import CoreTransport
from tidings.providers.simulator.receipts import ReceiptDispatcher
from tidings.providers.simulator.wire_postmark import server_of, webhook

T0 = 1_900_000_000.0
HOOK = "https://tidings.example/v1/webhooks/postmark"
BASE = "https://api.postmark.test"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def wired(
    token: str | None = None, hook_password: str | None = None, **config: Any
) -> tuple[SimulatorCore, PostmarkAdapter, Clock]:
    clock = Clock()
    settings = SimulatorConfig(profile="postmark", webhook_url=HOOK, wire=True, **config)
    core = SimulatorCore(settings, clock=clock)
    server = server_of(core.config)
    client = httpx.Client(base_url=BASE, transport=CoreTransport(core))
    adapter = PostmarkAdapter(
        token or server.server_token,
        sender="tidings@sender.test",
        webhook_credentials=(server.webhook_user, hook_password or server.webhook_password),
        base_url=BASE,
        client=client,
    )
    return core, adapter, clock


def mail(to: str = "ada@example.test", **fields: Any) -> OutboundMessage:
    return OutboundMessage("email", to, "hello", subject="Hi", **fields)


def test_a_send_is_accepted_with_postmarks_message_id_and_our_key_reaches_the_core() -> None:
    core, adapter, _ = wired()
    result = adapter.send(mail(), "tdg:key:1")
    assert isinstance(result, Accepted) and result.raw_status == "OK"
    [entry] = core.ledger()
    assert entry["provider_message_id"] == result.provider_message_id
    assert entry["idempotency_key"] == "tdg:key:1"  # from Metadata


def test_the_send_answer_is_postmarks_json() -> None:
    _, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(mail(), "tdg:key:1"))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"To", "SubmittedAt", "MessageID", "ErrorCode", "Message"}
    assert body["ErrorCode"] == 0 and body["To"] == "ada@example.test"


def test_a_wrong_server_token_is_postmarks_401_error_10() -> None:
    core, adapter, _ = wired(token="not-the-token")
    response = adapter.transmit(adapter.build_request(mail(), "tdg:key:1"))
    assert response.status_code == 401 and response.json()["ErrorCode"] == 10
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED
    assert core.ledger() == []


def test_an_invalid_request_is_error_300_request_invalid_and_suppresses_nobody() -> None:
    core, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(mail("invalid@example.test"), "tdg:k:2"))
    assert response.status_code == 422 and response.json()["ErrorCode"] == 300
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is RejectCode.REQUEST_INVALID
    # The item-1 rule: a fact about the request blocks no recipient.
    assert feedback.fault(result.code.value) == "request"
    assert feedback.send_lesson(result.code.value) is None
    [entry] = core.ledger()
    assert entry["outcome"] == "rejected"


def test_a_request_without_a_body_is_error_300_before_the_core_sees_it() -> None:
    core, adapter, _ = wired()
    request = adapter.build_request(mail(), "tdg:k:3")
    assert request.json is not None
    del request.json["TextBody"]
    response = adapter.transmit(request)
    assert response.status_code == 422 and response.json()["ErrorCode"] == 300
    assert core.ledger() == []


def test_an_inactive_recipient_is_error_406() -> None:
    _, adapter, _ = wired()
    result = adapter.send(mail("optout@example.test"), "tdg:k:4")
    assert isinstance(result, Rejected) and result.code is RejectCode.BOUNCED
    assert result.http_status == 422


def test_postmarks_rate_limit_is_429_and_retryable() -> None:
    _, adapter, _ = wired(rate_429=1.0)
    response = adapter.transmit(adapter.build_request(mail(), "tdg:k:5"))
    assert response.status_code == 429 and response.json()["ErrorCode"] == 429
    result = adapter.parse_response(response)
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED


def test_postmarks_own_failure_is_500_and_indeterminate() -> None:
    _, adapter, _ = wired(rate_5xx=1.0)
    result = adapter.send(mail(), "tdg:k:6")
    assert isinstance(result, Indeterminate) and result.code is RejectCode.PROVIDER_ERROR


def test_a_lost_answer_is_found_by_message_id_and_by_our_metadata() -> None:
    core, adapter, clock = wired(rate_timeout=1.0, receipt_delay_ms=1_000)
    result = adapter.send(mail(), "tdg:k:7")
    assert isinstance(result, Indeterminate) and result.code is RejectCode.TIMEOUT
    [entry] = core.ledger()
    clock.now += 5
    found = adapter.status(entry["provider_message_id"])
    assert found is not None and found.status is ObservedStatus.delivered
    assert found.raw_status == "Delivered" and found.attempt_key == "tdg:k:7"
    [listed] = adapter.find_by_reference("email", "tdg:k:7")
    assert listed.provider_message_id == entry["provider_message_id"]
    assert listed.status is ObservedStatus.accepted  # the search says Sent
    assert adapter.find_by_reference("email", "tdg:k:none") == []
    assert adapter.status("EM-never-sent") is None  # 422 ErrorCode 701


def test_the_details_show_a_hard_bounce_as_bounced() -> None:
    _, adapter, clock = wired(receipt_delay_ms=1_000)
    accepted = adapter.send(mail("hardbounce@example.test"), "tdg:k:8")
    assert isinstance(accepted, Accepted)
    before = adapter.status(accepted.provider_message_id)
    assert before is not None and before.status is ObservedStatus.accepted
    clock.now += 5
    after = adapter.status(accepted.provider_message_id)
    assert after is not None and after.status is ObservedStatus.failed
    assert after.code == RejectCode.BOUNCED


def _hooks(core: SimulatorCore, clock: Clock, adapter: PostmarkAdapter) -> list[Any]:
    clock.now += 5
    seen = []
    for receipt in core.take_due_receipts():
        rendered = webhook(receipt, server_of(core.config))
        if rendered is None:
            continue  # a stage Postmark posts no webhook for
        headers, body = rendered
        assert headers["Content-Type"] == "application/json"
        [obs] = adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
        seen.append((obs, json.loads(body)))
    return seen


def test_a_delivery_webhook_names_our_attempt() -> None:
    core, adapter, clock = wired()
    accepted = adapter.send(mail(), "tdg:k:9")
    assert isinstance(accepted, Accepted)
    [(obs, body)] = _hooks(core, clock, adapter)
    assert body["RecordType"] == "Delivery" and body["Recipient"] == "ada@example.test"
    assert obs.status is ObservedStatus.delivered and obs.attempt_key == "tdg:k:9"
    assert obs.provider_message_id == accepted.provider_message_id


def test_a_hard_bounce_webhook_suppresses_and_a_blocked_one_does_not() -> None:
    core, adapter, clock = wired()
    adapter.send(mail("hardbounce@example.test"), "tdg:k:10")
    adapter.send(mail("blocked@example.test"), "tdg:k:11")
    seen = {obs.attempt_key: (obs, body) for obs, body in _hooks(core, clock, adapter)}
    hard, hard_body = seen["tdg:k:10"]
    assert hard_body["RecordType"] == "Bounce" and hard_body["Type"] == "HardBounce"
    assert hard_body["TypeCode"] == 1 and hard_body["Email"] == "hardbounce@example.test"
    assert hard.status is ObservedStatus.failed and hard.code == RejectCode.BOUNCED
    assert feedback.lesson(hard.status.value, hard.code) == feedback.Lesson(
        "suppression", feedback.HARD_BOUNCE
    )
    blocked, blocked_body = seen["tdg:k:11"]
    assert blocked_body["Type"] == "Blocked" and blocked_body["TypeCode"] == 100006
    assert blocked.code == RejectCode.SENDER_REJECTED
    assert feedback.lesson(blocked.status.value, blocked.code) is None


def test_a_soft_bounce_webhook_is_undelivered_and_suppresses_nobody() -> None:
    core, adapter, clock = wired()
    adapter.send(mail("bounce@example.test"), "tdg:k:12")
    [(obs, body)] = _hooks(core, clock, adapter)
    assert body["Type"] == "SoftBounce" and body["TypeCode"] == 4096
    assert obs.status is ObservedStatus.undelivered
    assert feedback.lesson(obs.status.value, obs.code) is None


def test_a_spam_complaint_webhook_suppresses_as_a_complaint() -> None:
    core, adapter, clock = wired()
    accepted = adapter.send(mail("complaint@example.test"), "tdg:k:16")
    assert isinstance(accepted, Accepted)
    [(obs, body)] = _hooks(core, clock, adapter)
    assert body["RecordType"] == "SpamComplaint" and body["Inactive"] is True
    assert obs.status is ObservedStatus.delivered and obs.code == RejectCode.COMPLAINT
    assert feedback.lesson(obs.status.value, obs.code) == feedback.Lesson(
        "suppression", feedback.COMPLAINT
    )
    found = adapter.status(accepted.provider_message_id)
    assert found is not None and found.status is ObservedStatus.delivered


def test_webhooks_carry_postmarks_basic_credentials() -> None:
    core, adapter, clock = wired()
    _, stranger, _ = wired(hook_password="someone-else")
    adapter.send(mail(), "tdg:k:13")
    clock.now += 5
    [receipt] = [r for r in core.take_due_receipts() if webhook(r, server_of(core.config))]
    rendered = webhook(receipt, server_of(core.config))
    assert rendered is not None
    headers, body = rendered
    assert headers["Authorization"].startswith("Basic ")
    with pytest.raises(InvalidSignature):
        stranger.verify_webhook(WebhookRequest("POST", HOOK, headers, body))


def test_the_http_app_speaks_postmarks_wire_beside_its_own_routes() -> None:
    clock = Clock()
    core = SimulatorCore(SimulatorConfig(profile="postmark", receipt_delay_ms=1_000), clock=clock)
    server = server_of(core.config)
    with TestClient(create_app(core, deliver_receipts=False), base_url=BASE) as client:
        adapter = PostmarkAdapter(
            server.server_token, sender="tidings@sender.test", base_url=BASE, client=client
        )
        accepted = adapter.send(mail(), "tdg:k:14")
        assert isinstance(accepted, Accepted)
        clock.now += 5
        found = adapter.status(accepted.provider_message_id)
        assert found is not None and found.status is ObservedStatus.delivered
        [listed] = adapter.find_by_reference("email", "tdg:k:14")
        assert listed.provider_message_id == accepted.provider_message_id
        # The simulator's own lookup is still there beside Postmark's paths.
        assert client.get(f"/messages/{accepted.provider_message_id}").status_code == 200


def test_the_dispatcher_posts_postmark_webhooks_and_no_sent_stage() -> None:
    posted: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        request.read()
        posted.append(request)
        return httpx.Response(200)

    core, adapter, clock = wired()
    adapter.send(mail("hardbounce@example.test"), "tdg:k:15")
    clock.now += 5
    receiver = httpx.Client(transport=httpx.MockTransport(receive))
    ReceiptDispatcher(core, client=receiver).run_once()
    [request] = posted
    [obs] = adapter.verify_webhook(
        WebhookRequest("POST", str(request.url), dict(request.headers), request.content)
    )
    assert obs.attempt_key == "tdg:k:15" and obs.status is ObservedStatus.failed
    states = sorted(r["state"] for r in core.receipts())
    assert states == ["delivered", "dropped"]  # the "Sent" stage posts nothing


def test_duplicated_webhooks_share_their_dedupe_key() -> None:
    core, adapter, clock = wired(duplicate_rate=1.0)
    adapter.send(mail("hardbounce@example.test"), "tdg:k:17")
    seen = _hooks(core, clock, adapter)
    assert len(seen) == 2
    assert len({obs.dedupe_key for obs, _ in seen}) == 1


def test_a_lost_webhook_leaves_the_outcome_to_the_details_lookup() -> None:
    core, adapter, clock = wired(loss_rate=1.0)
    accepted = adapter.send(mail("hardbounce@example.test"), "tdg:k:18")
    assert isinstance(accepted, Accepted)
    assert _hooks(core, clock, adapter) == []
    found = adapter.status(accepted.provider_message_id)
    assert found is not None and found.status is ObservedStatus.failed
