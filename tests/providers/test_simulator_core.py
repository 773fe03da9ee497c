"""The simulator core: seeded determinism, the ledger, statuses, and receipts over a real socket."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.providers.support import Receiver, free_port
from tidings.providers.messages import WebhookRequest
from tidings.providers.outcomes import ObservedStatus
from tidings.providers.simulator import SimulatorConfig, SimulatorCore
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.receipts import ReceiptDispatcher

T0 = 1_900_000_000.0
FAULTY = {"rate_429": 0.2, "rate_5xx": 0.1, "rate_timeout": 0.1, "delivered_share": 0.7}


def make_core(**config: Any) -> SimulatorCore:
    # A frozen clock: every timestamp is a function of the requests alone.
    return SimulatorCore(SimulatorConfig(**config), clock=lambda: T0)


def send(core: SimulatorCore, key: str, to: str = "+15550001234", channel: str = "sms") -> Any:
    return core.send(channel, {"to": to, "body": "hi", "idempotency_key": key})


def outcomes(core: SimulatorCore) -> dict[str, list[str]]:
    by_key: dict[str, list[str]] = {}
    for entry in core.ledger():
        by_key.setdefault(entry["idempotency_key"], []).append(entry["outcome"])
    return by_key


# --- determinism ---------------------------------------------------------------


def test_same_seed_same_requests_same_everything() -> None:
    runs = []
    for _ in range(2):
        core = make_core(seed=42, webhook_url="http://unused.test", **FAULTY)
        for n in range(200):
            send(core, f"k{n % 150}")  # some keys twice: retries of the same attempt
        core.advance(10)
        views = [core.lookup(e["provider_message_id"]) for e in core.ledger()]
        runs.append((core.ledger(), views, core.receipts()))
    assert runs[0] == runs[1]


def test_a_different_seed_gives_different_faults() -> None:
    cores = [make_core(seed=seed, **FAULTY) for seed in (1, 2)]
    for core in cores:
        for n in range(100):
            send(core, f"k{n}")
    assert outcomes(cores[0]) != outcomes(cores[1])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), keys=st.lists(st.text(min_size=1), max_size=30, unique=True))
def test_faults_do_not_depend_on_request_interleaving(seed: int, keys: list[str]) -> None:
    # Concurrent workers reorder requests; per-key outcomes must not change.
    shuffled = random.Random(seed).sample(keys, len(keys))
    results = []
    for order in (keys, shuffled):
        core = make_core(seed=seed, **FAULTY)
        for key in order:
            send(core, key)
        results.append(outcomes(core))
    assert results[0] == results[1]


def test_fault_rates_are_honoured_roughly() -> None:
    core = make_core(seed=7, rate_429=0.3)
    for n in range(1000):
        send(core, f"k{n}")
    limited = sum(o == ["rate_limited"] for o in outcomes(core).values())
    assert 240 <= limited <= 360


# --- the ledger and lookups ----------------------------------------------------------


@pytest.mark.parametrize(
    ("to", "channel", "status", "outcome"),
    [
        ("+15550001234", "sms", 201, "accepted"),
        ("+15550000000", "sms", 400, "rejected"),
        ("+15550000009", "sms", 400, "rejected"),
        ("+15550000429", "sms", 429, "rate_limited"),
        ("+15550000500", "sms", 500, "error_5xx"),
        ("+15550000408", "sms", 201, "timeout_after_accept"),
        ("not-a-number", "sms", 400, "rejected"),
        ("ratelimit+1@example.test", "email", 429, "rate_limited"),
        ("invalid@example.test", "email", 400, "rejected"),
        ("no-at-sign", "email", 400, "rejected"),
        ("timeout@example.test", "email", 201, "timeout_after_accept"),
    ],
)
def test_magic_destinations_and_ledger_entries(to, channel, status, outcome) -> None:
    core = make_core(timeout_stall_ms=5000)
    reply = send(core, "k", to, channel)
    [entry] = core.ledger()
    assert (reply.status_code, entry["outcome"]) == (status, outcome)
    assert entry["destination_hash"] == hashlib.sha256(to.encode()).hexdigest()
    assert to not in json.dumps(core.ledger())
    accepted = outcome in ("accepted", "timeout_after_accept")
    assert (entry["provider_message_id"] is not None) is accepted
    assert (core.find_by_key("k") is not None) is accepted
    assert (reply.stall_s == 5.0) is (outcome == "timeout_after_accept")


@pytest.mark.parametrize(
    ("to", "channel", "code"),
    [
        ("+15550000422", "sms", "REQUEST_INVALID"),
        ("+15550000451", "sms", "SENDER_REJECTED"),
        ("+15550000403", "sms", "ACCOUNT_RESTRICTED"),
        ("badrequest@example.test", "email", "REQUEST_INVALID"),
        ("badsender+2@example.test", "email", "SENDER_REJECTED"),
        ("restricted@example.test", "email", "ACCOUNT_RESTRICTED"),
    ],
)
def test_magic_refusals_of_our_side(to: str, channel: str, code: str) -> None:
    # Refusals of the request, the sender and the account (issue #37).
    core = make_core()
    reply = send(core, "k", to, channel)
    assert (reply.status_code, reply.body["code"]) == (400, code)
    assert [e["outcome"] for e in core.ledger()] == ["rejected"]


def test_rate_limit_reply_carries_retry_after() -> None:
    reply = send(make_core(rate_429=1.0, retry_after_seconds=9), "k")
    assert reply.headers["Retry-After"] == "9"


def test_the_simulator_never_dedupes_so_double_sends_show() -> None:
    core = make_core()
    first, second = send(core, "same"), send(core, "same")
    assert first.body["message_id"] != second.body["message_id"]
    assert [e["outcome"] for e in core.ledger("same")] == ["accepted", "accepted"]
    assert core.find_by_key("same")["message_id"] == first.body["message_id"]


def test_status_progresses_with_the_simulated_clock() -> None:
    core = make_core(receipt_delay_ms=10_000)
    message_id = send(core, "k").body["message_id"]
    seen = []
    for step in (0, 5, 5):
        core.advance(step)
        seen.append(core.lookup(message_id)["status"])
    assert seen == ["queued", "sent", "delivered"]
    delivered_at = datetime.fromisoformat(core.lookup(message_id)["updated_at"])
    assert delivered_at == datetime.fromtimestamp(T0 + 10, UTC)


@pytest.mark.parametrize(
    ("to", "channel", "status", "code"),
    [
        ("+15550000001", "sms", "undelivered", "UNREACHABLE"),
        ("+15550000002", "sms", "failed", "CARRIER_FILTERED"),
        ("bounce+7@example.test", "email", "undelivered", "BOUNCED"),
        ("hardbounce+7@example.test", "email", "failed", "BOUNCED"),
        ("fail@example.test", "email", "failed", "CONTENT_REJECTED"),
    ],
)
def test_magic_final_outcomes(to: str, channel: str, status: str, code: str) -> None:
    core = make_core(receipt_delay_ms=0)
    view = core.lookup(send(core, "k", to, channel).body["message_id"])
    assert (view["status"], view["code"]) == (status, code)


def test_delivered_share_zero_means_undelivered() -> None:
    core = make_core(receipt_delay_ms=0, delivered_share=0.0)
    assert core.lookup(send(core, "k").body["message_id"])["status"] == "undelivered"


def test_reset_clears_state_and_optionally_config() -> None:
    core = make_core(rate_429=0.5)
    send(core, "k")
    core.reset()
    assert core.ledger() == [] and core.find_by_key("k") is None
    assert core.config.rate_429 == 0.5
    core.reset(config=True)
    assert core.config == SimulatorConfig()


@pytest.mark.parametrize(
    "changes",
    [{"rate_429": 1.5}, {"rate_429": 0.6, "rate_timeout": 0.6}, {"bogus": 1}, {"latency_ms": -1}],
)
def test_invalid_config_is_refused_and_nothing_changes(changes: dict[str, Any]) -> None:
    core = make_core()
    with pytest.raises(ValidationError):
        core.configure(changes)
    assert core.config == SimulatorConfig()


# --- receipts, delivered over a real socket ---------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def receipts_core(receiver: Receiver, **config: Any) -> SimulatorCore:
    base = {"webhook_url": receiver.url, "receipt_delay_ms": 1000, "seed": 3}
    return SimulatorCore(SimulatorConfig(**{**base, **config}))


def observations(receiver: Receiver, secret: str = "tidings-simulator-secret") -> list[Any]:
    adapter = SimulatorAdapter("http://unused.test", secret)
    requests = [WebhookRequest("POST", receiver.url, h, b) for h, b in receiver.requests]
    return [o for r in requests for o in adapter.verify_webhook(r)]


def deliver_all(core: SimulatorCore, **kwargs: Any) -> ReceiptDispatcher:
    core.advance(3600)
    dispatcher = ReceiptDispatcher(core, **kwargs)
    dispatcher.run_once()
    return dispatcher


def test_receipts_are_signed_and_follow_each_message(receiver: Receiver) -> None:
    core = receipts_core(receiver, webhook_secret="s3cret")
    ids = {send(core, f"k{n}").body["message_id"] for n in range(3)}
    deliver_all(core).close()
    seen = observations(receiver, "s3cret")
    assert len(seen) == 6
    assert {o.provider_message_id for o in seen} == ids
    for message_id in ids:
        statuses = [o.status for o in seen if o.provider_message_id == message_id]
        assert statuses == [ObservedStatus.accepted, ObservedStatus.delivered]
    assert all(r["state"] == "delivered" for r in core.receipts())


def test_duplicates_share_the_event_id(receiver: Receiver) -> None:
    core = receipts_core(receiver, duplicate_rate=1.0)
    send(core, "k")
    deliver_all(core).close()
    keys = [o.dedupe_key for o in observations(receiver)]
    assert len(keys) == 4 and len(set(keys)) == 2
    assert sum(r["duplicate"] for r in core.receipts()) == 2


def test_lost_receipts_never_arrive(receiver: Receiver) -> None:
    core = receipts_core(receiver, loss_rate=0.5, seed=11)
    for n in range(20):
        send(core, f"k{n}")
    deliver_all(core).close()
    states = [r["state"] for r in core.receipts()]
    assert 0 < states.count("lost") < len(states)
    assert len(receiver.requests) == states.count("delivered") == len(states) - states.count("lost")


def test_reordered_receipts_can_report_final_before_sent(receiver: Receiver) -> None:
    core = receipts_core(receiver, reorder=True)
    for n in range(20):
        send(core, f"k{n}")
    deliver_all(core).close()
    arrival: dict[str, list[str]] = {}
    for o in observations(receiver):
        arrival.setdefault(o.provider_message_id, []).append(o.raw_status)
    orders = {tuple(statuses) for statuses in arrival.values()}
    assert orders == {("sent", "delivered"), ("delivered", "sent")}


def test_a_receiver_that_is_down_gets_retries_then_gives_up() -> None:
    core = SimulatorCore(
        SimulatorConfig(webhook_url=f"http://127.0.0.1:{free_port()}/hook", receipt_delay_ms=0)
    )
    send(core, "k")
    dispatcher = ReceiptDispatcher(core, max_attempts=2, retry_backoff_s=0.0)
    assert dispatcher.run_once() == 2  # first try of both receipts, requeued due now
    assert {r["state"] for r in core.receipts()} == {"pending"}
    assert dispatcher.run_once() == 2
    assert {(r["state"], r["attempts"]) for r in core.receipts()} == {("failed", 2)}
    dispatcher.close()


def test_the_background_thread_delivers_by_itself(receiver: Receiver) -> None:
    core = receipts_core(receiver, receipt_delay_ms=0)
    dispatcher = ReceiptDispatcher(core)
    dispatcher.start()
    try:
        send(core, "k")
        assert len(receiver.wait_for(2, timeout=10)) == 2
    finally:
        dispatcher.close()
