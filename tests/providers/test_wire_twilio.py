"""The simulator speaking Twilio's own wire, read by the real TwilioAdapter,
unchanged: its request building, answer parsing, rate-limit reading, lookups,
list search and status-callback signature check."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tidings.providers.errors import InvalidSignature
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, ObservedStatus, RejectCode, Rejected, Retryable
from tidings.providers.simulator import SimulatorConfig, SimulatorCore
from tidings.providers.simulator.in_process import CoreTransport
from tidings.providers.simulator.wire_twilio import account_of, status_callback
from tidings.providers.twilio import TwilioAdapter

T0 = 1_900_000_000.0
HOOK = "https://tidings.example/v1/webhooks/twilio"
TO = "+15550001234"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def wired(token: str | None = None, **config: Any) -> tuple[SimulatorCore, TwilioAdapter, Clock]:
    clock = Clock()
    core = SimulatorCore(SimulatorConfig(profile="twilio", webhook_url=HOOK, **config), clock=clock)
    account = account_of(core.config)
    client = httpx.Client(base_url="https://api.twilio.test", transport=CoreTransport(core))
    adapter = TwilioAdapter(
        account.account_sid,
        token or account.auth_token,
        from_number="+15559990000",
        status_callback=HOOK,
        base_url="https://api.twilio.test",
        client=client,
    )
    return core, adapter, clock


def sms(to: str = TO) -> OutboundMessage:
    return OutboundMessage("sms", to, "hello")


def test_a_send_is_accepted_with_twilios_sid_and_our_reference_reaches_the_core() -> None:
    core, adapter, _ = wired()
    result = adapter.send(sms(), "tdg:key:1")
    assert isinstance(result, Accepted) and result.raw_status == "queued"
    [entry] = core.ledger()
    assert entry["provider_message_id"] == result.provider_message_id
    assert result.provider_message_id.startswith("SM")
    assert entry["idempotency_key"] == "tdg:key:1"  # from the StatusCallback's query


def test_a_wrong_auth_token_is_twilios_20003() -> None:
    core, adapter, _ = wired(token="not-the-token")
    result = adapter.send(sms(), "tdg:key:1")
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED
    assert core.ledger() == []


def test_twilios_rate_limit_is_20429_without_retry_after() -> None:
    _, adapter, _ = wired(rate_429=1.0)
    response = adapter.transmit(adapter.build_request(sms(), "tdg:key:1"))
    assert response.status_code == 429 and response.json()["code"] == 20429
    assert "Retry-After" not in response.headers
    result = adapter.parse_response(response)
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED


def test_the_message_is_looked_up_and_listed_in_twilios_words() -> None:
    _, adapter, clock = wired(receipt_delay_ms=1_000, search_visible_after_ms=0)
    accepted = adapter.send(sms(), "tdg:key:1")
    assert isinstance(accepted, Accepted)
    clock.now += 5
    found = adapter.status(accepted.provider_message_id)
    assert found is not None and found.status is ObservedStatus.delivered
    assert found.raw_status == "delivered"
    listed = adapter.search("sms", TO, _at(T0 - 5), _at(T0 + 10))
    assert [m.provider_message_id for m in listed] == [accepted.provider_message_id]
    assert adapter.search("sms", "+15550009999", _at(T0 - 5), _at(T0 + 10)) == []


def test_status_callbacks_are_twilios_signed_forms_naming_our_attempt() -> None:
    core, adapter, clock = wired(receipt_delay_ms=1_000, delivered_share=0.0)
    accepted = adapter.send(sms(), "tdg:key:1")
    assert isinstance(accepted, Accepted)
    clock.now += 5
    receipts = core.take_due_receipts()
    assert len(receipts) == 2
    seen = []
    for receipt in receipts:
        url = f"{HOOK}?tidings_attempt={receipt.query['tidings_attempt']}"
        headers, body = status_callback(receipt, account_of(core.config), url)
        assert headers["Content-Type"] == "application/x-www-form-urlencoded"
        request = WebhookRequest("POST", url, headers, body, {"tidings_attempt": "tdg:key:1"})
        [obs] = adapter.verify_webhook(request)
        assert obs.attempt_key == "tdg:key:1"
        assert obs.provider_message_id == accepted.provider_message_id
        seen.append((obs.raw_status, obs.raw_code))
        forged = WebhookRequest("POST", url, headers, body.replace(b"sent", b"read"))
        if b"sent" in body:
            with pytest.raises(InvalidSignature):
                adapter.verify_webhook(forged)
    assert seen == [("sent", None), ("undelivered", "30003")]
    assert urlsplit(url).path.endswith("/twilio")


def _at(ts: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC)


def test_a_long_list_is_paged_and_its_oldest_message_still_found() -> None:
    """More messages to one number than a page holds: Twilio names the next
    page, and the adapter's search reads on to the oldest. A list cut to one
    page with no next page made an attempt the provider had look never
    received, and it was sent again (the third hour)."""
    _, adapter, clock = wired(search_visible_after_ms=0)
    oldest = adapter.send(sms(), "tdg:oldest:1")
    assert isinstance(oldest, Accepted)
    for n in range(150):
        clock.now += 0.5
        assert isinstance(adapter.send(sms(), f"tdg:later:{n}"), Accepted)
    clock.now += 5
    listed = adapter.search("sms", TO, _at(T0 - 5), _at(clock.now + 5))
    assert len(listed) == 151
    assert oldest.provider_message_id in {m.provider_message_id for m in listed}
