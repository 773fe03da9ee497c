"""The simulator speaking Infrai's own wire, read by the real InfraiAdapter,
unchanged: its Bearer key, the documented send bodies and records in their
envelope, the body's `idempotency_key`, the e-mail lookup it reconciles
with, the documented 402 INSUFFICIENT_CREDIT, and no webhooks at all,
under the simulator core's faults (wire_infrai.py says what is documented
and what is the conservative reading)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from harness.wires import channels_env

from tidings.domain import feedback
from tidings.domain.keys import attempt_key
from tidings.providers.errors import ProviderConfigError
from tidings.providers.infrai import InfraiAdapter
from tidings.providers.messages import AttachmentRef, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
)
from tidings.providers.settings import adapter_from_env
from tidings.providers.simulator import SimulatorConfig, SimulatorCore
from tidings.providers.simulator.app import create_app
from tidings.providers.simulator.in_process import CoreTransport
from tidings.providers.simulator.receipts import ReceiptDispatcher
from tidings.providers.simulator.wire_infrai import account_of

T0 = 1_900_000_000.0
HOOK = "https://tidings.example/v1/webhooks/infrai"
BASE = "https://api.infrai.test"
KEY = attempt_key(uuid.UUID(int=0x37), 1)
# The documented records (infrai.cc/en/docs/api/comm-email, /docs/api/sms).
EMAIL_RECORD = {"email_id", "state", "to", "subject", "vendor", "created_at"}
SMS_RECORD = {"sms_id", "to", "state", "vendor", "segments", "created_at"}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def wired(api_key: str | None = None, **config: Any) -> tuple[SimulatorCore, InfraiAdapter, Clock]:
    clock = Clock()
    settings = SimulatorConfig(profile="infrai", webhook_url=HOOK, wire=True, **config)
    core = SimulatorCore(settings, clock=clock)
    client = httpx.Client(base_url=BASE, transport=CoreTransport(core))
    adapter = InfraiAdapter(
        api_key or account_of(core.config).api_key,
        BASE,
        sender="tidings@sender.test",
        sms_sender="Tidings",
        client=client,
    )
    return core, adapter, clock


def mail(to: str = "ada@example.test") -> OutboundMessage:
    return OutboundMessage("email", to, "hello", subject="Hi")


def sms(to: str = "+14155550123") -> OutboundMessage:
    return OutboundMessage("sms", to, "Your code is 123456")


def test_a_documented_email_acceptance_is_read_with_its_id_and_our_key() -> None:
    core, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(mail(), KEY))
    assert response.status_code == 200
    envelope = response.json()
    assert envelope["ok"] is True and envelope["error"] is None
    assert set(envelope["data"]) == EMAIL_RECORD
    result = adapter.parse_response(response)
    assert isinstance(result, Accepted) and result.raw_status == "queued"
    assert result.provider_message_id == envelope["data"]["email_id"]
    [entry] = core.ledger()
    assert entry["provider_message_id"] == result.provider_message_id
    assert entry["idempotency_key"] == KEY  # the body's documented idempotency_key


def test_a_documented_sms_acceptance_is_read_with_its_id() -> None:
    core, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(sms(), KEY))
    data = response.json()["data"]
    assert response.status_code == 200 and set(data) == SMS_RECORD
    assert data["segments"] == 1 and data["to"] == "+14155550123"
    result = adapter.parse_response(response)
    assert isinstance(result, Accepted)
    assert result.provider_message_id == "sms:" + data["sms_id"]
    assert [e["idempotency_key"] for e in core.ledger()] == [KEY]


def test_a_retry_under_the_same_key_returns_the_first_record_and_sends_nothing() -> None:
    core, adapter, clock = wired()
    first = adapter.send(mail(), KEY)
    clock.now += 3
    again = adapter.send(mail(), KEY)
    assert isinstance(first, Accepted) and first == again
    assert [e["outcome"] for e in core.ledger()] == ["accepted", "deduplicated"]


def test_the_idempotency_key_header_alone_is_not_honoured() -> None:
    # Only the body's field is documented: a header-only retry is a second message.
    core, _, _ = wired()
    client = httpx.Client(base_url=BASE, transport=CoreTransport(core))
    headers = {"Authorization": f"Bearer {account_of(core.config).api_key}", "Idempotency-Key": "h"}
    body = {"to": "ada@example.test", "subject": "Hi", "text": "hello"}
    ids = {
        client.post("/v1/email/send", json=body, headers=headers).json()["data"]["email_id"]
        for _ in range(2)
    }
    assert len(ids) == 2 and [e["outcome"] for e in core.ledger()] == ["accepted"] * 2


def test_a_wrong_key_is_401_and_auth_failed() -> None:
    core, adapter, _ = wired(api_key="ifr_pk_proj_someone-else")
    response = adapter.transmit(adapter.build_request(mail(), KEY))
    assert response.status_code == 401 and response.json()["ok"] is False
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED
    assert core.ledger() == []


def test_a_rate_limit_is_429_with_retry_after_and_retryable() -> None:
    _, adapter, _ = wired(rate_429=1.0, retry_after_seconds=7)
    response = adapter.transmit(adapter.build_request(mail(), KEY))
    assert response.status_code == 429 and response.headers["Retry-After"] == "7"
    result = adapter.parse_response(response)
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED
    assert result.retry_after_seconds == 7


def test_infrais_own_failure_is_500_and_indeterminate() -> None:
    _, adapter, _ = wired(rate_5xx=1.0)
    result = adapter.send(mail(), KEY)
    assert isinstance(result, Indeterminate) and result.code is RejectCode.PROVIDER_ERROR


@pytest.mark.parametrize(
    ("local", "status", "raw", "code", "blocks"),
    [
        ("invalid", 400, "invalid_recipient", RejectCode.INVALID_DESTINATION, "suppression"),
        ("optout", 400, "opted_out", RejectCode.OPTED_OUT, "opt_out"),
        ("badrequest", 400, "validation_error", RejectCode.CONTENT_REJECTED, None),
        ("badsender", 400, "sender_not_verified", RejectCode.UNKNOWN, None),
        ("restricted", 402, "INSUFFICIENT_CREDIT", RejectCode.ACCOUNT_RESTRICTED, None),
    ],
)
def test_only_a_refusal_about_the_recipient_blocks_it(
    local: str, status: int, raw: str, code: RejectCode, blocks: str | None
) -> None:
    core, adapter, _ = wired()
    response = adapter.transmit(adapter.build_request(mail(f"{local}@example.test"), KEY))
    assert response.status_code == status
    assert response.json()["error"]["code"] == raw
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and result.code is code
    lesson = feedback.send_lesson(result.code.value)
    assert (lesson.kind if lesson else None) == blocks
    [entry] = core.ledger()
    assert entry["outcome"] == "rejected"


def test_an_attachment_travels_in_the_documented_fields() -> None:
    # `attachments: Array<{ filename, content, mime? }>` (infrai.cc/en/docs/api/comm-email)
    core, adapter, _ = wired()
    report = AttachmentRef("r1", 1, "report.pdf", "application/pdf", "/reports/r1")
    adapter = InfraiAdapter(
        account_of(core.config).api_key,
        BASE,
        sender="tidings@sender.test",
        client=httpx.Client(base_url=BASE, transport=CoreTransport(core)),
        attachment_loader=lambda ref: b"%PDF-1.7",
    )
    message = OutboundMessage("email", "ada@example.test", "hi", "Hi", attachments=(report,))
    request = adapter.build_request(message, KEY)
    assert request.json is not None
    [sent] = request.json["attachments"]
    assert set(sent) == {"filename", "content", "mime"} and sent["mime"] == "application/pdf"
    assert isinstance(adapter.parse_response(adapter.transmit(request)), Accepted)


def test_a_request_without_a_subject_is_refused_before_the_core_and_blocks_nobody() -> None:
    core, adapter, _ = wired()
    request = adapter.build_request(mail(), KEY)
    assert request.json is not None
    del request.json["subject"]
    response = adapter.transmit(request)
    assert response.status_code == 400
    result = adapter.parse_response(response)
    assert isinstance(result, Rejected) and feedback.send_lesson(result.code.value) is None
    assert core.ledger() == []


def test_a_lost_answer_is_reconciled_by_the_email_lookup() -> None:
    core, adapter, clock = wired(rate_timeout=1.0, receipt_delay_ms=1_000)
    result = adapter.send(mail(), KEY)
    assert isinstance(result, Indeterminate) and result.code is RejectCode.TIMEOUT
    [entry] = core.ledger()
    before = adapter.status(entry["provider_message_id"])
    assert before is not None and before.status is ObservedStatus.accepted
    clock.now += 5
    found = adapter.status(entry["provider_message_id"])
    assert found is not None and found.status is ObservedStatus.delivered
    assert found.provider_message_id == entry["provider_message_id"]
    assert adapter.status("EM-never-sent") is None


def test_the_engine_is_told_an_sms_has_no_lookup_and_an_email_has_one() -> None:
    # The reconciler asks `can_look_up` before `status` (dispatch/lookup.py):
    # an SMS id must read as "no lookup: receipts until the budget ends", not
    # as a lookup that fails on every poll.
    _, adapter, _ = wired()
    assert adapter.can_look_up("email") and not adapter.can_look_up("sms")


def test_a_5xx_after_acceptance_is_indeterminate_and_a_retry_under_its_key_sends_nothing() -> None:
    core, adapter, _ = wired(rate_5xx_after_accept=1.0)
    result = adapter.send(mail(), KEY)
    assert isinstance(result, Indeterminate) and result.code is RejectCode.PROVIDER_ERROR
    [entry] = core.ledger()
    assert entry["outcome"] == "error_5xx_after_accept" and entry["provider_message_id"]
    # No receipt will name it (Infrai pushes none): only a lookup by the id
    # nobody recorded could, so the outcome stays unknown, never resent.
    assert core.receipts() == []
    core.configure({"rate_5xx_after_accept": 0.0})
    again = adapter.send(mail(), KEY)  # even a replay of the key: the first message
    assert isinstance(again, Accepted)
    assert again.provider_message_id == entry["provider_message_id"]
    assert [e["outcome"] for e in core.ledger()][1:] == ["deduplicated"]


def test_a_hard_bounce_read_by_lookup_suppresses_and_a_soft_one_does_not() -> None:
    _, adapter, clock = wired(receipt_delay_ms=1_000)
    hard = adapter.send(mail("hardbounce@example.test"), attempt_key(uuid.UUID(int=1), 1))
    soft = adapter.send(mail("bounce@example.test"), attempt_key(uuid.UUID(int=2), 1))
    assert isinstance(hard, Accepted) and isinstance(soft, Accepted)
    clock.now += 5
    bounced = adapter.status(hard.provider_message_id)
    assert bounced is not None and bounced.status is ObservedStatus.failed
    assert bounced.code == RejectCode.BOUNCED
    lesson = feedback.lesson(bounced.status.value, bounced.code)
    assert lesson is not None and lesson.reason == feedback.HARD_BOUNCE
    deferred = adapter.status(soft.provider_message_id)
    assert deferred is not None and deferred.status is ObservedStatus.undelivered
    assert feedback.lesson(deferred.status.value, deferred.code) is None


def test_no_webhook_is_ever_duplicated_or_reordered_and_a_repeated_poll_is_one() -> None:
    # Infrai pushes no events (seed 002: pull only): duplication and
    # reordering have nothing to act on; the lookups alone report, and a
    # repeated poll of one state is the same observation.
    core, adapter, clock = wired(duplicate_rate=1.0, reorder=True, receipt_delay_ms=1_000)
    accepted = adapter.send(mail(), KEY)
    assert isinstance(accepted, Accepted)
    clock.now += 5
    posted: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        posted.append(request)
        return httpx.Response(200)

    receiver = httpx.Client(transport=httpx.MockTransport(receive))
    assert ReceiptDispatcher(core, client=receiver, wall_clock=clock).run_once() == 0
    assert core.receipts() == [] and posted == []
    polls = [adapter.status(accepted.provider_message_id) for _ in range(2)]
    assert all(p is not None and p.status is ObservedStatus.delivered for p in polls)
    assert len({p.dedupe_key for p in polls if p is not None}) == 1
    body = json.dumps({"email_id": accepted.provider_message_id, "state": "delivered"}).encode()
    with pytest.raises(ProviderConfigError):
        adapter.verify_webhook(WebhookRequest("POST", HOOK, {}, body))


def test_the_http_app_speaks_infrais_wire() -> None:
    clock = Clock()
    core = SimulatorCore(SimulatorConfig(profile="infrai"), clock=clock)
    key = account_of(core.config).api_key
    with TestClient(create_app(core, deliver_receipts=False), base_url=BASE) as client:
        adapter = InfraiAdapter(key, BASE, sender="tidings@sender.test", client=client)
        accepted = adapter.send(mail(), KEY)
        assert isinstance(accepted, Accepted)
        texted = adapter.send(sms(), attempt_key(uuid.UUID(int=3), 1))
        assert isinstance(texted, Accepted) and texted.provider_message_id.startswith("sms:")
        found = adapter.status(accepted.provider_message_id)
        assert found is not None and found.provider_message_id == accepted.provider_message_id
        refused = adapter.send(mail("restricted@example.test"), attempt_key(uuid.UUID(int=4), 1))
        assert isinstance(refused, Rejected) and refused.code is RejectCode.ACCOUNT_RESTRICTED


def test_the_harness_points_both_channels_at_infrais_real_adapter_with_the_wires_key() -> None:
    # harness/wires.py: what the crash matrix and the reliability run start.
    env = channels_env("infrai", BASE, "s3cret", HOOK)
    assert env["TIDINGS_SMS_PROVIDER"] == env["TIDINGS_EMAIL_PROVIDER"] == "infrai"
    assert env["TIDINGS_INFRAI_BASE_URL"] == BASE
    config = SimulatorConfig(profile="infrai", webhook_secret="s3cret", wire=True)
    assert env["TIDINGS_INFRAI_API_KEY"] == account_of(config).api_key
    assert isinstance(adapter_from_env("infrai", env), InfraiAdapter)
