"""Policy, consent, opt-out and limits, enforced in the claim transaction."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from tidings import IntentState, ManualClock, Tidings
from tidings.policies import builtin_document
from tidings.store.contacts import ConsentRecord

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker


def policy(version: str, **changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(builtin_document("default"))
    doc.update(version=version, **changes)
    return doc


def test_four_workers_never_exceed_a_frequency_cap(tidings: Tidings, clock: ManualClock) -> None:
    caps = [{"id": "sms-hourly", "channel": "sms", "limit": 3, "per_seconds": 3600}]
    tidings.publish_policy(policy("cap-1", frequency_caps=caps))
    publish_offer_template(tidings)
    core = simulator(clock)
    for n in range(10):
        offer(
            tidings,
            n,
            recipient={"ref": "member-1", "phone": "+14155550123"},
            expires_at=clock.now() + timedelta(hours=2),
        )
    workers = [worker(tidings, core, batch_size=2) for _ in range(4)]
    barrier = threading.Barrier(4)

    def drain(w: Any) -> None:
        barrier.wait()
        for _ in range(6):
            w.dispatch_once()

    threads = [threading.Thread(target=drain, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(sends(core)) == 3
    with tidings.db.transaction() as conn:
        rows = conn.execute("SELECT state, decision_code, next_due_at FROM intents").fetchall()
    waiting = [r for r in rows if r["state"] == "pending"]
    assert len(waiting) == 7
    assert {r["decision_code"] for r in waiting} == {"RECIPIENT_LIMIT"}
    assert all(r["next_due_at"] > clock.now() for r in waiting)


def test_a_cap_that_clears_after_the_deadline_expires_the_offer(
    tidings: Tidings, clock: ManualClock
) -> None:
    caps = [{"id": "sms-hourly", "channel": "sms", "limit": 1, "per_seconds": 3600}]
    tidings.publish_policy(policy("cap-2", frequency_caps=caps))
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    offer(tidings, 1, recipient={"ref": "member-1", "phone": "+14155550123"})
    late = offer(tidings, 2, recipient={"ref": "member-1", "phone": "+14155550123"})
    w.dispatch_once()
    got = tidings.get(late.id)
    assert got.state is IntentState.EXPIRED and got.decision_code == "RECIPIENT_LIMIT"


def test_a_country_spend_breaker_stops_at_its_segment_count(
    tidings: Tidings, clock: ManualClock
) -> None:
    limits = {"sms": {"US": {"segments": 5, "per_seconds": 86400}}}
    tidings.publish_policy(policy("spend-1", country_spend_limits=limits))
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    for n in range(8):
        offer(
            tidings,
            n,
            recipient={"ref": f"m{n}", "phone": "+14155550123"},
            expires_at=clock.now() + timedelta(days=3),
        )
    w.dispatch_once()
    assert len(sends(core)) == 5
    with tidings.db.transaction() as conn:
        codes = conn.execute(
            "SELECT decision_code, count(*) AS n FROM intents WHERE state = 'pending' GROUP BY 1"
        ).fetchall()
    assert [(r["decision_code"], r["n"]) for r in codes] == [("SPEND_LIMIT", 3)]
    clock.advance(days=1)
    w.dispatch_once()
    assert len(sends(core)) == 8


def test_marketing_without_consent_is_suppressed_and_with_it_is_sent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    clock.set(datetime(2026, 6, 1, 16, 0, tzinfo=UTC))  # noon in New York
    recipient = {"ref": "m1", "phone": "+14155550123", "timezone": "America/New_York"}
    denied = offer(tidings, 1, purpose="marketing", recipient=recipient)
    w.dispatch_once()
    got = tidings.get(denied.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "CONSENT_MISSING"
    tidings.put_contact(
        "m1",
        phone="+14155550123",
        consents=[
            ConsentRecord(
                "sms", "marketing", "signup-form", clock.now() - timedelta(days=1), "form:77"
            )
        ],
    )
    allowed = offer(tidings, 2, purpose="marketing", recipient=recipient)
    w.dispatch_once()
    assert tidings.get(allowed.id).state is IntentState.ACCEPTED
    assert len(sends(core)) == 1


def test_quiet_hours_defer_to_the_next_local_window(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    clock.set(datetime(2026, 6, 2, 3, 0, tzinfo=UTC))  # 23:00 in New York
    recipient = {"ref": "m1", "phone": "+14155550123", "timezone": "America/New_York"}
    tidings.put_contact(
        "m1", consents=[ConsentRecord("sms", "marketing", "form", clock.now() - timedelta(days=1))]
    )
    intent = offer(
        tidings,
        1,
        purpose="marketing",
        recipient=recipient,
        expires_at=clock.now() + timedelta(days=2),
    )
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.PENDING and got.decision_code == "QUIET_WINDOW"
    assert got.next_due_at == datetime(2026, 6, 2, 12, 0, tzinfo=UTC)  # 08:00 EDT
    assert sends(core) == []
    clock.set(got.next_due_at)
    w.dispatch_once()
    assert len(sends(core)) == 1


def test_stop_opts_out_before_the_next_send(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    assert tidings.handle_inbound("+14155550123", "  Stop ").value == "stop"
    intent = offer(tidings, 1)
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "OPTED_OUT"
    tidings.handle_inbound("+14155550123", "START")
    assert tidings.get(offer(tidings, 2).id).state is IntentState.PENDING
    w.dispatch_once()
    assert len(sends(core)) == 1


def test_a_provider_opt_out_answer_blocks_further_sends(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    opted_out_number = "+14155550009"  # the simulator answers OPTED_OUT
    first = offer(tidings, 1, recipient={"ref": "m1", "phone": opted_out_number})
    w.dispatch_once()
    assert tidings.get(first.id).state is IntentState.FAILED
    second = offer(tidings, 2, recipient={"ref": "m1", "phone": opted_out_number})
    w.dispatch_once()
    got = tidings.get(second.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "OPTED_OUT"
    assert len(sends(core)) == 1


def test_a_tenant_rate_limit_defers_to_the_next_window(
    tidings: Tidings, clock: ManualClock
) -> None:
    limits = [{"scope": "tenant", "channel": "sms", "limit": 2, "per_seconds": 60}]
    tidings.publish_policy(policy("rate-1", rate_limits=limits))
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    for n in range(5):
        offer(tidings, n, recipient={"ref": f"m{n}", "phone": "+14155550123"})
    w.dispatch_once()
    assert len(sends(core)) == 2
    clock.advance(60)
    w.dispatch_once()
    assert len(sends(core)) == 4


def test_a_provider_account_limit_is_one_limit_for_every_tenant(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Seed 000: limits per global provider account. Two tenants under a
    2/min account limit used to make 4 sends: each had a counter of its own."""
    limits = [{"scope": "provider_account", "channel": "sms", "limit": 2, "per_seconds": 60}]
    other = tidings.for_tenant("acme")
    for t in (tidings, other):
        t.publish_policy(policy("account-1", rate_limits=limits))
        publish_offer_template(t)
    core = simulator(clock)
    w = worker(tidings, core)
    for n in range(3):
        offer(tidings, n, recipient={"ref": f"m{n}", "phone": "+14155550123"})
        offer(other, n, recipient={"ref": f"m{n}", "phone": "+14155550124"})
    w.dispatch_once()
    assert len(sends(core)) == 2
    clock.advance(60)
    w.dispatch_once()
    assert len(sends(core)) == 4


def test_an_intent_keeps_the_policy_version_it_was_created_under(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    before = offer(tidings, 1)
    tidings.publish_policy(
        policy("strict-1", channels={"sms": {"countries": ["DE"]}, "email": {"countries": "*"}})
    )
    after = offer(tidings, 2)
    assert (before.policy_version, after.policy_version) == ("default-1", "strict-1")
    w = worker(tidings, simulator(clock))
    w.dispatch_once()
    assert tidings.get(before.id).state is IntentState.ACCEPTED
    got = tidings.get(after.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "COUNTRY_DISABLED"


def test_one_claim_batch_never_exceeds_a_frequency_cap(
    tidings: Tidings, clock: ManualClock
) -> None:
    """A claim writes its moves in one statement per kind; the attempts it
    started for a recipient must still count toward that recipient's cap
    when the same batch reaches their next intent."""
    caps = [{"id": "sms-hourly", "channel": "sms", "limit": 3, "per_seconds": 3600}]
    tidings.publish_policy(policy("cap-batch", frequency_caps=caps))
    publish_offer_template(tidings)
    core = simulator(clock)
    for n in range(10):
        offer(
            tidings,
            n,
            recipient={"ref": "member-1", "phone": "+14155550123"},
            expires_at=clock.now() + timedelta(hours=2),
        )
    w = worker(tidings, core, batch_size=50)
    assert w.dispatch_once() == 3
    assert len(sends(core)) == 3
    with tidings.db.transaction() as conn:
        states = conn.execute("SELECT state, count(*) AS n FROM intents GROUP BY state")
        assert {r["state"]: r["n"] for r in states} == {"accepted": 3, "pending": 7}
