"""Unknown outcomes settled with only what each real provider offers.

The simulator plays one provider at a time (its profiles): no lookup by our
key outside `ideal`. A call whose answer was lost is found by the
provider's list search (Twilio), by our reference stored with the message
(Postmark), by a receipt echoing our reference (AWS, SES, SendGrid, Vonage),
or stays unknown, visibly, where the provider offers none of these (SNS).
A call that never reached the provider is proven absent and sent again,
wherever the provider can prove it.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from tests.profile_matrix import CHANNEL, finds_lost_answers, proves_absence
from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.call_start import Verdict
from tidings.dispatch.observe import apply_observation
from tidings.domain.keys import attempt_key
from tidings.observability.process_metrics import PROCESS_REGISTRY
from tidings.policies import builtin_document
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.providers.simulator.profiles import PROFILES

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

SENT = {"accepted", "timeout_after_accept"}
SCHEDULE = {
    "first_check_after_seconds": 5,
    "factor": 2,
    "max_interval_seconds": 20,
    "jitter": 0.0,
    "max_checks": 6,
    "give_up_after_seconds": 600,
}


def short_polls(t: Tidings) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc.update(version="short-polls-6", poll_schedule=SCHEDULE)
    t.publish_policy(doc)


def settle(w: Any, clock: ManualClock, seconds: int = 120, step: int = 5) -> None:
    for _ in range(seconds // step):
        clock.advance(step)
        w.sweep_once()
        w.reconcile_once()


def deliveries(core: Any) -> Counter[str]:
    return Counter(e["idempotency_key"] for e in sends(core) if e["outcome"] in SENT)


def lookups(provider: str, how: str) -> float:
    labels = {"provider": provider, "how": how}
    return PROCESS_REGISTRY.get_sample_value("tidings_reconciliation_lookups_total", labels) or 0.0


def crash_after_mark(w: Any, call: bool) -> Any:
    """Claim and mark one call, make it (or not), then die before recording."""
    [claimed] = w.claim("sms", 10)
    assert w._starts.verdict(claimed) is Verdict.GO
    if call:
        from tidings.dispatch.message import TemplateCache, prepare

        message, _, _ = prepare(w.runtime.db, claimed, w.runtime.vault, TemplateCache(), {})
        w.adapters["sms"].send(message, claimed.attempt_key)
    return claimed


def test_a_lost_answer_is_found_by_twilios_list_search(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, profile="twilio", rate_timeout=1.0)
    w = worker(tidings, core)
    intent = offer(tidings)
    w.dispatch_once()  # accepted at the provider, the answer never came
    assert tidings.get(intent.id).state is IntentState.RECONCILING
    core.configure({"rate_timeout": 0.0})
    searched = lookups("simulator", "search")
    settle(w, clock, 30)
    got = tidings.get(intent.id)
    assert got.state in (IntentState.ACCEPTED, IntentState.DELIVERED)
    [attempt] = got.attempts
    assert attempt.provider_message_id == sends(core)[0]["provider_message_id"]
    assert deliveries(core) == {attempt_key(intent.id, 1): 1}
    assert lookups("simulator", "search") > searched


def test_a_call_that_never_reached_twilio_is_proven_absent_and_sent_again(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, profile="twilio")
    w = worker(tidings, core, lease_seconds=30)
    intent = offer(tidings)
    crash_after_mark(w, call=False)
    settle(w, clock, 120)
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state in (IntentState.ACCEPTED, IntentState.DELIVERED)
    assert next((a.n, a.state, a.code) for a in got.attempts) == (1, "failed", "NOT_RECEIVED")
    assert deliveries(core) == {attempt_key(intent.id, 2): 1}


def test_a_check_that_comes_late_does_not_spend_the_budget_the_provider_had(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Twilio answers a send 500, having made no message; the reconciler is
    behind, so its first check comes after the whole budget and fails (a
    lookup storm). The time the check waited on our side is added to the
    budget: the next check's list search proves the message absent and it
    is sent again, where it used to end unknown."""
    publish_offer_template(tidings)
    short_polls(tidings)
    core = simulator(clock, profile="twilio", rate_5xx=1.0)
    w = worker(tidings, core)
    intent = offer(tidings)
    w.dispatch_once()
    assert tidings.get(intent.id).attempts[0].state == "unknown"
    core.configure({"rate_5xx": 0.0, "rate_lookup_5xx": 1.0})
    clock.advance(SCHEDULE["give_up_after_seconds"] + 100)  # no check ran meanwhile
    failed = lookups("simulator", "failed")
    w.reconcile_once()
    assert lookups("simulator", "failed") - failed == 1
    assert tidings.get(intent.id).state is IntentState.RECONCILING
    core.configure({"rate_lookup_5xx": 0.0})
    settle(w, clock, 60)
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert next((a.n, a.state, a.code) for a in got.attempts) == (1, "failed", "NOT_RECEIVED")
    assert got.state in (IntentState.ACCEPTED, IntentState.DELIVERED)
    assert deliveries(core) == {attempt_key(intent.id, 2): 1}


def test_two_open_calls_to_one_number_are_never_told_apart_by_a_search(
    tidings: Tidings, clock: ManualClock
) -> None:
    """A's request reached Twilio, B's did not, both to one number. A list
    search sees one message: it could be either's, so it settles neither,
    and neither is sent again (B's message would be A's duplicate)."""
    publish_offer_template(tidings)
    short_polls(tidings)
    core = simulator(clock, profile="twilio")
    w = worker(tidings, core, lease_seconds=30)
    a = offer(tidings, 1)
    b = offer(tidings, 2)
    claims = {c.intent.id: c for c in w.claim("sms", 10)}
    for claimed in claims.values():
        assert w._starts.verdict(claimed) is Verdict.GO
    from tidings.dispatch.message import TemplateCache, prepare

    message, _, _ = prepare(tidings.db, claims[a.id], tidings.vault, TemplateCache(), {})
    w.adapters["sms"].send(message, claims[a.id].attempt_key)  # A reaches Twilio; both die
    settle(w, clock, 900, step=15)
    assert {tidings.get(i.id).state for i in (a, b)} == {IntentState.UNKNOWN}
    assert deliveries(core) == {attempt_key(a.id, 1): 1}
    assert lookups("simulator", "ambiguous") >= 2


def test_postmark_finds_a_lost_answer_by_our_reference_and_proves_absence_by_it(
    tidings: Tidings, clock: ManualClock
) -> None:
    tidings.publish_template("note", channel="email", subject="Hi", body="Hello")
    core = simulator(clock, profile="postmark", rate_timeout=1.0)
    w = worker(tidings, core, lease_seconds=30)

    def note(n: int) -> Any:
        return tidings.notify(
            idempotency_key=f"note:{n}",
            channel="email",
            recipient={"ref": f"r{n}", "email": f"r{n}@example.com"},
            template="note",
            purpose="transactional",
            event_class="note",
        )

    lost = note(1)
    w.dispatch_once("email")  # reached Postmark, answer lost
    core.configure({"rate_timeout": 0.0})
    never = note(2)
    [claimed] = w.claim("email", 10)
    assert w._starts.verdict(claimed) is Verdict.GO  # marked, then the worker dies
    settle(w, clock, 120)
    w.dispatch_once("email")
    assert tidings.get(lost.id).state in (IntentState.ACCEPTED, IntentState.DELIVERED)
    assert [a.n for a in tidings.get(lost.id).attempts] == [1]
    assert next(a.code for a in tidings.get(never.id).attempts) == "NOT_RECEIVED"
    assert deliveries(core) == {attempt_key(lost.id, 1): 1, attempt_key(never.id, 2): 1}


# SMS profiles with neither a lookup nor a search, whose receipts echo our reference.
ECHO_ONLY_SMS = [
    name
    for name, played in PROFILES.items()
    if CHANNEL[name] == "sms"
    and not played.lookup_by_id
    and not proves_absence(name)
    and finds_lost_answers(name)
]


@pytest.mark.parametrize("profile", ECHO_ONLY_SMS)
def test_without_a_lookup_a_receipt_naming_our_reference_alone_settles_it(
    tidings: Tidings, clock: ManualClock, profile: str
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, profile=profile, webhook_url="http://in-process/hook")
    adapter = InProcessSimulatorAdapter(core)
    w = worker(tidings, core, adapter, lease_seconds=30)
    intent = offer(tidings)
    crash_after_mark(w, call=True)  # accepted; we never learned its id
    clock.advance(31)
    w.sweep_once()
    assert tidings.get(intent.id).state is IntentState.RECONCILING
    w.reconcile_once()  # nothing this provider can look up
    assert tidings.get(intent.id).state is IntentState.RECONCILING
    with tidings.db.transaction() as conn:
        for request in adapter.due_webhooks():
            for obs in adapter.verify_webhook(request):
                assert obs.attempt_key == attempt_key(intent.id, 1)
                apply_observation(conn, obs, "webhook", clock.now())
    got = tidings.get(intent.id)
    assert got.state is IntentState.DELIVERED
    assert got.attempts[0].provider_message_id == sends(core)[0]["provider_message_id"]
    assert w.dispatch_once() == 0 and len(sends(core)) == 1


def test_where_the_provider_offers_nothing_the_outcome_ends_unknown_never_resent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    short_polls(tidings)
    core = simulator(clock, profile="sns", webhook_url="http://in-process/hook")
    w = worker(tidings, core, lease_seconds=30)
    intent = offer(tidings)
    crash_after_mark(w, call=True)
    checked = lookups("simulator", "none")
    settle(w, clock, 900, step=15)
    got = tidings.get(intent.id)
    assert got.state is IntentState.UNKNOWN and got.decision_code == "CHECKS_EXHAUSTED"
    assert got.attempts[0].check_count == SCHEDULE["max_checks"]
    # Nothing to look up: the first check and the budget's last one, no empty polls between.
    assert lookups("simulator", "none") - checked == 2
    assert len(sends(core)) == 1 and core.receipts() == []


def test_failed_lookups_count_against_the_budget_and_end_it(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    short_polls(tidings)
    core = simulator(clock, profile="twilio", receipt_delay_ms=10_000_000)
    w = worker(tidings, core)
    intent = offer(tidings)
    w.dispatch_once()  # accepted, its id recorded; the provider then fails every lookup
    core.configure({"rate_lookup_5xx": 1.0})
    failed = lookups("simulator", "failed")
    settle(w, clock, 900, step=15)
    got = tidings.get(intent.id)
    assert got.state is IntentState.UNKNOWN and got.decision_code == "CHECKS_EXHAUSTED"
    assert got.attempts[0].check_count == SCHEDULE["max_checks"]
    assert lookups("simulator", "failed") - failed == SCHEDULE["max_checks"]
