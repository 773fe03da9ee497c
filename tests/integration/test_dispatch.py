from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.call_start import Verdict
from tidings.dispatch.claim import Claimed
from tidings.dispatch.message import TemplateCache, prepare
from tidings.dispatch.observe import apply_observation
from tidings.dispatch.runner import Worker
from tidings.domain.keys import attempt_key
from tidings.observability.process_metrics import PROCESS_REGISTRY
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import (
    offer,
    publish_offer_template,
    racing_worker,
    sends,
    simulator,
    worker,
)

# Also run on the embedded PostgreSQL in CI, beside the smoke processes tests
# (tests/lanes.py).
pytestmark = pytest.mark.smoke


def test_a_due_intent_is_sent_once_and_accepted(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    intent = offer(tidings)
    assert w.dispatch_once() == 1
    assert w.dispatch_once() == 0
    got = tidings.get(intent.id)
    assert got.state is IntentState.ACCEPTED
    assert got.accepted_at == clock.now()
    [attempt] = got.attempts
    assert attempt.attempt_key == attempt_key(intent.id, 1)  # from the id, not the caller key
    assert attempt.provider == "simulator" and attempt.provider_message_id
    assert attempt.segments == 1 and attempt.encoding == "GSM-7"
    [entry] = sends(core)
    assert entry["idempotency_key"] == attempt.attempt_key
    assert entry["outcome"] == "accepted"


def test_poll_reaches_delivered_and_emits_the_event(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, receipt_delay_ms=1000)
    w = worker(tidings, core)
    intent = offer(tidings)
    w.dispatch_once()
    clock.advance(10)
    assert w.reconcile_once() == 1
    got = tidings.get(intent.id)
    assert got.state is IntentState.DELIVERED
    assert got.last_status_at is not None and got.terminal_at == clock.now()
    assert got.attempts[0].state == "delivered"
    with psycopg.connect(db_url) as conn:
        types = [r[0] for r in conn.execute("SELECT type FROM events ORDER BY id")]
    assert types == ["intent.delivered"]


def test_kill_switch_blocks_claims_until_lifted(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    tidings.set_control("kill_switch", True, channel="sms")
    intent = offer(tidings)
    assert w.dispatch_once() == 0
    assert sends(core) == [] and tidings.get(intent.id).state is IntentState.PENDING
    tidings.set_control("kill_switch", False, channel="sms")
    assert w.dispatch_once() == 1
    assert len(sends(core)) == 1


def test_kill_switch_lets_reconciliation_continue(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    intent = offer(tidings)
    w.dispatch_once()
    tidings.set_control("kill_switch", True)
    clock.advance(10)
    w.reconcile_once()
    assert tidings.get(intent.id).state is IntentState.DELIVERED


def test_shadow_mode_records_the_decision_and_sends_nothing(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    tidings.set_control("shadow_mode", True, channel="sms", country="US")
    intent = offer(tidings)
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "SHADOW_MODE"
    last = tidings.timeline(intent.id)[-1]
    assert last.detail["input"]["would"] == "send"
    assert sends(core) == []


def test_429_defers_by_retry_after_without_spending_the_budget(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=7)
    w = worker(tidings, core)
    intent = offer(tidings)
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.PENDING
    assert got.next_due_at == clock.now() + timedelta(seconds=7)
    clock.advance(6)
    assert w.dispatch_once() == 0
    core.configure({"rate_429": 0.0})
    clock.advance(1)
    assert w.dispatch_once() == 1
    got = tidings.get(intent.id)
    assert got.state is IntentState.ACCEPTED
    assert [a.state for a in got.attempts] == ["failed", "accepted"]
    outcomes = Counter(e["outcome"] for e in sends(core))
    assert outcomes == {"rate_limited": 1, "accepted": 1}


def test_a_timeout_after_accept_is_reconciled_not_resent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, rate_timeout=1.0)
    w = worker(tidings, core)
    intent = offer(tidings)
    w.dispatch_once()
    assert tidings.get(intent.id).state is IntentState.RECONCILING
    core.configure({"rate_timeout": 0.0})
    assert w.dispatch_once() == 0  # unknown is not a reason to send again
    clock.advance(6)
    w.reconcile_once()
    got = tidings.get(intent.id)
    assert got.state in (IntentState.ACCEPTED, IntentState.DELIVERED)
    assert len(got.attempts) == 1
    assert [e["outcome"] for e in sends(core)] == ["timeout_after_accept"]


def test_a_crash_before_the_call_is_due_again_at_once_under_the_same_attempt(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Invariant 3: no call-started mark, so no call: recovery undoes the
    claim, nothing is unknown, and the same attempt key goes out next."""
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core, lease_seconds=30)
    intent = offer(tidings)
    [claimed] = w.claim("sms", 10)  # the worker "dies" here: claimed, never sent
    clock.advance(31)
    assert w.sweep_once()["leases_recovered"] == 1
    got = tidings.get(intent.id)
    assert got.state is IntentState.PENDING
    assert got.attempts == () and got.attempt_count == 0
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.ACCEPTED
    assert [(a.n, a.state) for a in got.attempts] == [(1, "accepted")]
    assert [e["idempotency_key"] for e in sends(core)] == [claimed.attempt_key]
    events = [e.event for e in tidings.timeline(intent.id) if e.kind == "transition"]
    assert events == ["create", "claim", "call_not_started", "claim", "provider_accepted"]


def test_a_crash_after_the_mark_is_reconciled_and_proven_absent_before_a_new_attempt(
    tidings: Tidings, clock: ManualClock
) -> None:
    """The mark was written but the worker died before its request left: the
    outcome is unknown, so it is looked up first; the simulator's `ideal`
    profile can prove absence by our key, after which attempt 2 goes out."""
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core, lease_seconds=30)
    intent = offer(tidings)
    [claimed] = w.claim("sms", 10)
    assert w._starts.verdict(claimed) is Verdict.GO  # marked; the worker dies here
    clock.advance(31)
    assert w.sweep_once()["leases_recovered"] == 1
    assert tidings.get(intent.id).state is IntentState.RECONCILING
    w.reconcile_once()  # nothing under attempt 1's key, but a request may still be on its way
    assert tidings.get(intent.id).state is IntentState.RECONCILING
    clock.advance(30)  # past NOT_RECEIVED_AFTER from the claim: absence is now proof
    w.reconcile_once()
    assert tidings.get(intent.id).state is IntentState.PENDING
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.ACCEPTED
    assert [(a.n, a.state, a.code) for a in got.attempts] == [
        (1, "failed", "NOT_RECEIVED"),
        (2, "accepted", None),
    ]
    assert [e["idempotency_key"] for e in sends(core)] == [attempt_key(intent.id, 2)]


def test_a_cancel_during_the_call_wins_and_the_facts_are_kept(
    tidings: Tidings, clock: ManualClock
) -> None:
    """The awkward ordering of R000.6 (docs/requirements.md), in full: worker
    A claims and calls; the member cancels while the request is on its way;
    the provider accepts it; a delivery observation arrives later."""
    publish_offer_template(tidings)
    core = simulator(clock, receipt_delay_ms=1000)
    intent = offer(tidings)
    w = racing_worker(tidings, core, lambda: tidings.cancel(intent.id, reason="member_left"))
    [claimed] = w.claim("sms", 10)
    assert w.send_and_record(claimed) == "stale"  # the provider accepted the request
    clock.advance(10)
    w.reconcile_once()  # delivered arrives later
    got = tidings.get(intent.id)
    assert got.state is IntentState.CANCELED
    [attempt] = got.attempts
    assert attempt.state == "delivered" and attempt.accepted_at is not None
    kinds = [(e.kind, e.to_state) for e in tidings.timeline(intent.id)]
    assert ("transition", "canceled") in kinds and ("observation", "delivered") in kinds
    w.dispatch_once()
    assert len(sends(core)) == 1


def claimed_offer(
    tidings: Tidings, clock: ManualClock, **overrides: Any
) -> tuple[SimulatorCore, Worker, Any, Claimed]:
    """One offer, claimed by a worker that has not called yet."""
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    intent = offer(tidings, **overrides)
    [claimed] = w.claim("sms", 10)
    return core, w, intent, claimed


def withheld_calls(reason: str) -> float:
    labels = {"channel": "sms", "reason": reason}
    found = PROCESS_REGISTRY.get_sample_value("tidings_provider_calls_withheld_total", labels)
    return found or 0.0


def test_a_cancel_after_the_claim_stops_the_call(tidings: Tidings, clock: ManualClock) -> None:
    """Invariant 5: the worker reads the committed state again right before
    the call; a cancel that committed after the claim means no call at all."""
    core, w, intent, claimed = claimed_offer(tidings, clock)
    withheld = withheld_calls("withdrawn")
    tidings.cancel(intent.id, reason="member_left")
    assert w.send_and_record(claimed) == "stale"
    assert sends(core) == []
    assert withheld_calls("withdrawn") == withheld + 1
    got = tidings.get(intent.id)
    assert got.state is IntentState.CANCELED
    assert [(a.state, a.code) for a in got.attempts] == [("failed", "WITHDRAWN")]
    w.dispatch_once()
    assert sends(core) == []


def test_a_deadline_passed_while_waiting_for_the_call_stops_it(
    tidings: Tidings, clock: ManualClock
) -> None:
    deadline = clock.now() + timedelta(seconds=5)
    core, w, intent, claimed = claimed_offer(tidings, clock, expires_at=deadline)
    clock.advance(5)
    assert w.send_and_record(claimed) == "moved"
    assert sends(core) == []
    assert [(a.state, a.code) for a in tidings.get(intent.id).attempts] == [("failed", "EXPIRED")]
    assert w.dispatch_once() == 0  # the gate expires it instead of claiming it
    assert tidings.get(intent.id).state is IntentState.EXPIRED
    assert sends(core) == []


def test_a_stop_after_the_claim_stops_the_call(tidings: Tidings, clock: ManualClock) -> None:
    """Seed 003: hard suppression is read again immediately before dispatch.
    A STOP that committed between the claim and the call means no call."""
    core, w, intent, claimed = claimed_offer(tidings, clock)
    withheld = withheld_calls("stopped")
    assert tidings.handle_inbound("+14155550123", "STOP") is not None
    assert w.send_and_record(claimed) == "moved"
    assert sends(core) == []
    assert withheld_calls("stopped") == withheld + 1
    assert [(a.state, a.code) for a in tidings.get(intent.id).attempts] == [
        ("failed", "RECIPIENT_STOPPED")
    ]
    w.dispatch_once()  # the gate reads the opt-out and decides
    got = tidings.get(intent.id)
    assert got.state is IntentState.SUPPRESSED and sends(core) == []


def test_a_suppression_after_the_claim_stops_the_call(tidings: Tidings, clock: ManualClock) -> None:
    core, w, intent, claimed = claimed_offer(tidings, clock)
    tidings.suppress("sms", "+14155550123", reason="operator")
    assert w.send_and_record(claimed) == "moved"
    w.dispatch_once()
    assert tidings.get(intent.id).state is IntentState.SUPPRESSED
    assert sends(core) == []


def test_an_opt_out_the_claim_already_saw_does_not_stop_the_call(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Only a change since the claim withholds the call: one the gate
    already weighed (and let through) must not hand it back forever."""
    core, w, intent, claimed = claimed_offer(tidings, clock)
    tidings.handle_inbound("+14155550123", "STOP")
    assert w.send_and_record(replace(claimed, opted_out=True)) == "moved"
    assert len(sends(core)) == 1
    assert tidings.get(intent.id).attempts[0].code != "RECIPIENT_STOPPED"


def test_a_kill_switch_after_the_claim_holds_the_call_until_lifted(
    tidings: Tidings, clock: ManualClock
) -> None:
    core, w, intent, claimed = claimed_offer(tidings, clock)
    tidings.set_control("kill_switch", True, channel="sms")
    assert w.send_and_record(claimed) == "moved"
    assert sends(core) == []
    got = tidings.get(intent.id)
    assert got.state is IntentState.PENDING
    assert [(a.state, a.code) for a in got.attempts] == [("failed", "KILL_SWITCH")]
    assert w.dispatch_once() == 0
    tidings.set_control("kill_switch", False, channel="sms")
    assert w.dispatch_once() == 1
    [entry] = sends(core)
    assert entry["idempotency_key"] == attempt_key(intent.id, 2)
    assert tidings.get(intent.id).state is IntentState.ACCEPTED


def test_answers_recorded_as_a_group_keep_each_intents_own_outcome(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Acceptances are recorded in one transaction; a cancel that won the
    race for one of them (committing while its request was on the way)
    leaves the others moving and that one canceled."""
    publish_offer_template(tidings)
    core = simulator(clock)
    intents = [offer(tidings, n) for n in range(3)]
    cancels = iter([lambda: None, lambda: tidings.cancel(intents[1].id, reason="member_left")])
    w = racing_worker(tidings, core, lambda: next(cancels, lambda: None)())
    claimed = w.claim("sms", 10)
    assert [c.intent.id for c in claimed] == [i.id for i in intents]
    answers = [w.send(c) for c in claimed]
    assert w.record(answers) == ["moved", "stale", "moved"]
    got = [tidings.get(i.id) for i in intents]
    assert [g.state for g in got] == [
        IntentState.ACCEPTED,
        IntentState.CANCELED,
        IntentState.ACCEPTED,
    ]
    assert all(g.attempts[-1].state == "accepted" for g in got)  # the facts all stand
    assert all(g.attempts[-1].segments == 1 for g in got)
    assert len(sends(core)) == 3


def test_deadline_expires_a_pending_intent_and_releases_the_offer(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    tidings.set_control("kill_switch", True)
    intent = offer(tidings)
    clock.advance(minutes=31)
    assert w.sweep_once()["expired"] == 1
    tidings.set_control("kill_switch", False)
    assert w.dispatch_once() == 0
    assert tidings.get(intent.id).state is IntentState.EXPIRED
    with psycopg.connect(db_url) as conn:
        types = sorted(r[0] for r in conn.execute("SELECT type FROM events"))
    assert types == ["intent.expired", "offer.released"]
    assert sends(core) == []


def test_undelivered_resends_exactly_the_budget(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, delivered_share=0.0, receipt_delay_ms=500)
    w = worker(tidings, core)
    intent = offer(tidings, resend_budget=2)
    for _ in range(6):
        w.dispatch_once()
        clock.advance(10)
        w.reconcile_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.FAILED
    keys = [e["idempotency_key"] for e in sends(core)]
    assert keys == [attempt_key(intent.id, n) for n in (1, 2, 3)]


def test_a_retry_after_past_the_deadline_means_no_second_try(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=3600)
    w = worker(tidings, core)
    intent = offer(tidings)  # valid for 30 minutes
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.PENDING and got.next_due_at == got.expires_at
    clock.advance(minutes=30)
    assert w.dispatch_once() == 0
    w.sweep_once()
    assert tidings.get(intent.id).state is IntentState.EXPIRED
    assert [e["outcome"] for e in sends(core)] == ["rate_limited"]


def test_a_receipt_while_the_worker_is_gone_settles_the_recovered_intent(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Found by the reliability suite: the worker is killed after the
    provider accepted; the delivered receipt reaches the attempt; the lease
    then expires. The intent must end delivered, not stay reconciling."""
    publish_offer_template(tidings)
    core = simulator(clock, receipt_delay_ms=500, webhook_url="http://in-process/hook")
    adapter = InProcessSimulatorAdapter(core)
    w = worker(tidings, core, lease_seconds=30)
    intent = offer(tidings)
    [claimed] = w.claim("sms", 10)
    message, _, _ = prepare(tidings.db, claimed, tidings.vault, TemplateCache(), {})
    assert w._starts.verdict(claimed) is Verdict.GO
    adapter.send(message, claimed.attempt_key)  # accepted; the worker dies before recording
    clock.advance(1)
    with tidings.db.transaction() as conn:
        for request in adapter.due_webhooks():
            for obs in adapter.verify_webhook(request):
                apply_observation(conn, obs, "webhook", clock.now())
    assert tidings.get(intent.id).attempts[0].state == "delivered"
    clock.advance(31)
    w.sweep_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.DELIVERED
    assert len(sends(core)) == 1
