"""Defects the reliability runs found, each pinned in a few milliseconds with
a manual clock, so the fix is held in place without a long run.

A delivery receipt can land while its intent is still `sending` (the
provider answers the webhook before it answers the send, or the worker dies
between the two). The receipt settles the attempt; the intent must end up
settled too once it leaves `sending`, whichever way it leaves.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from tidings import ManualClock, Tidings
from tidings.dispatch.observe import apply_observation, apply_received
from tidings.dispatch.record import record_result
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    Observation,
    ObservedStatus,
    RejectCode,
    Retryable,
)

from ..integration.dispatch_helpers import offer, publish_offer_template, simulator, worker


def _receipt_arrives(t: Tidings, clock: ManualClock, attempt_key: str, status: str) -> None:
    observation = Observation(
        provider="simulator",
        provider_message_id="SM-early",
        attempt_key=attempt_key,
        status=ObservedStatus(status),
        code="UNREACHABLE" if status == "undelivered" else None,
        raw_status=status,
        occurred_at=clock.now(),
        dedupe_key=f"early:{attempt_key}:{status}",
        raw={},
    )
    with t.db.transaction() as conn:
        assert apply_observation(conn, observation, "webhook", clock.now()) == "attempt_only"


def _run_maintenance(w: Any, clock: ManualClock) -> None:
    for _ in range(3):
        clock.advance(minutes=10)
        w.sweep_once()
        w.reconcile_once()


def test_a_receipt_before_a_timed_out_answer_still_settles_the_intent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    intent = offer(tidings, expires_at=None)
    [claimed] = w.claim("sms", 10)
    _receipt_arrives(tidings, clock, claimed.attempt_key, "delivered")
    with tidings.db.transaction() as conn:  # then the send's answer times out
        timeout = Indeterminate(RejectCode.TIMEOUT, "read timeout")
        record_result(conn, claimed, timeout, clock.now(), random.Random(1))
    _run_maintenance(w, clock)
    assert tidings.get(intent.id).state == "delivered"


def test_a_receipt_before_a_worker_crash_still_settles_the_intent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock), lease_seconds=8)
    intent = offer(tidings, expires_at=None)
    [claimed] = w.claim("sms", 10)
    _receipt_arrives(tidings, clock, claimed.attempt_key, "delivered")
    clock.advance(9)  # the worker died before recording: its lease runs out
    _run_maintenance(w, clock)
    assert tidings.get(intent.id).state == "delivered"


def test_an_undelivered_receipt_before_a_crash_leads_to_the_resend(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock), lease_seconds=8)
    intent = offer(tidings, expires_at=None, resend_budget=1)
    [claimed] = w.claim("sms", 10)
    _receipt_arrives(tidings, clock, claimed.attempt_key, "undelivered")
    clock.advance(9)
    _run_maintenance(w, clock)
    assert tidings.get(intent.id).state == "resend_due"


def test_a_late_answer_after_the_lease_was_recovered_leaves_the_intent_movable(
    tidings: Tidings, clock: ManualClock
) -> None:
    """The worker's lease ran out while its send waited in the queue; the
    sweeper handed the attempt to reconciliation. Then the send went out
    and the provider refused it (429): that late answer must not settle the
    attempt under reconciliation's feet and strand the intent."""
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock), lease_seconds=8)
    intent = offer(tidings, expires_at=None)
    [claimed] = w.claim("sms", 10)
    clock.advance(9)
    w.sweep_once()  # lease recovered: reconciling, the attempt unknown
    with tidings.db.transaction() as conn:
        limited = Retryable(RejectCode.RATE_LIMITED, 1.0, "HTTP 429")
        assert record_result(conn, claimed, limited, clock.now(), random.Random(1)) == "stale"
    _run_maintenance(w, clock)
    assert tidings.get(intent.id).state not in ("reconciling", "sending")


def test_a_receipt_racing_the_record_of_its_provider_id_is_matched(
    tidings: Tidings, clock: ManualClock
) -> None:
    """The receipt names only the provider's id and arrives while the
    worker's record of that id is still uncommitted: it cannot see the id
    yet, and the record has already looked for early receipts. Unserialized,
    it was kept unmatched for good (twice over when the provider resent it
    after the record), and an intent the provider had delivered stayed
    `accepted`, or ended `unknown` under a provider with no lookup."""
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    intent = offer(tidings, expires_at=None)
    [claimed] = w.claim("sms", 10)
    receipt = Observation(
        provider="simulator",
        provider_message_id="SM-race",
        attempt_key=None,
        status=ObservedStatus.delivered,
        code=None,
        raw_status="delivered",
        occurred_at=clock.now(),
        dedupe_key="race:delivered",
        raw={},
    )
    effects: list[str] = []

    def webhook() -> None:
        with tidings.db.transaction() as conn:
            effects.extend(apply_received(conn, [receipt], "webhook", clock.now()))

    arrival = threading.Thread(target=webhook)
    with tidings.db.transaction() as conn:
        record_result(conn, claimed, Accepted("SM-race"), clock.now(), random.Random(1))
        arrival.start()
        arrival.join(timeout=1.0)  # unserialized, it is done by now
    arrival.join()
    assert effects == ["intent_delivered"]
    assert tidings.get(intent.id).state == "delivered"
    with tidings.db.transaction() as conn:
        stored = conn.execute(
            "SELECT tenant_id, intent_id IS NOT NULL AS matched FROM observations"
            " WHERE dedupe_key = 'race:delivered'"
        ).fetchall()
    assert stored == [{"tenant_id": tidings.tenant, "matched": True}]
