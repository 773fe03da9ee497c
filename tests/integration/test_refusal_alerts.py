"""A provider's refusal of our request, sender or account alerts (DESIGN
invariant 12, issue 37): `provider_refused` per tenant, channel, provider
account and code, with the count in the window and the newest sample
(intent, attempt, the provider's code and status; never a destination or a
body), cleared when the window holds no such refusal. An account
restriction also pauses the account: the next intents stay pending, unsent
and not failed, until the pause ends.

The refusals come from the simulator's magic numbers (simulator/magic.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.conftest import publish_example_policy
from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import IntentState, ManualClock, Tidings
from tidings.domain.breaker import RESTRICTED_BASE_SECONDS
from tidings.observability.alerts.config import AlertConfig
from tidings.observability.alerts.rules import Alert

from .dispatch_helpers import OFFER_BODY, offer, publish_offer_template, sends, simulator, worker

SENDER_REJECTED = "+14155550451"
REQUEST_INVALID = "+14155550422"
ACCOUNT_RESTRICTED = "+14155550403"
FINE = "+14155550123"
PAUSED = re.compile(r'^tidings_provider_paused_seconds\{[^}]*code="(\w+)"[^}]*\} (\S+)$', re.M)


def paused(t: Tidings) -> list[tuple[str, float]]:
    body, _ = render_metrics(t.runtime)
    return [(code, float(v)) for code, v in PAUSED.findall(body.decode())]


def sms(t: Tidings, n: int, phone: str) -> Any:
    return offer(t, n, recipient={"ref": f"m{n}", "phone": phone}, expires_at=None)


def refused(t: Tidings, clock: ManualClock, config: AlertConfig | None = None) -> dict[str, Alert]:
    found = evaluate_alerts(t.db, clock.now(), config or AlertConfig())
    return {f"{a.tenant_id}/{a.key}": a for a in found if a.condition == "provider_refused"}


def _leaks(alert: Alert, *secrets: str) -> list[str]:
    text = json.dumps({"summary": alert.summary, "details": alert.details})
    return [s for s in secrets if s in text]


def test_a_refused_sender_pages_with_the_newest_sample_and_clears_after_the_window(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    first = sms(tidings, 1, SENDER_REJECTED)
    w.dispatch_once("sms")
    clock.advance(60)
    newest = sms(tidings, 2, SENDER_REJECTED)
    w.dispatch_once("sms")
    assert tidings.get(newest.id).state is IntentState.FAILED
    assert tidings.get(first.id).decision_code == "SENDER_REJECTED"

    alerts = refused(tidings, clock)
    alert = alerts["default/provider_refused:sms:simulator:SENDER_REJECTED"]
    assert alert.severity == "page"  # every send from this sender fails the same way
    d = alert.details
    assert (d["channel"], d["provider"], d["code"], d["refusals"]) == (
        "sms",
        "simulator",
        "SENDER_REJECTED",
        2,
    )
    assert d["sample"]["intent_id"] == str(newest.id) and d["sample"]["attempt"] == 1
    assert d["sample"]["http_status"] == 400
    assert d["sample"]["provider_code"] == "SENDER_REJECTED"
    assert "sender" in d["action"] and "From" in d["action"]
    assert _leaks(alert, SENDER_REJECTED, "5550451", "Spin 7am", OFFER_BODY[:20]) == []

    clock.advance(AlertConfig().refusal_window_seconds - 30)
    assert list(refused(tidings, clock)) == [
        "default/provider_refused:sms:simulator:SENDER_REJECTED"
    ]
    clock.advance(31)  # the window holds no refusal any more
    assert refused(tidings, clock) == {}


def test_an_invalid_request_warns_and_pages_past_its_threshold(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    config = AlertConfig(refusal_page_requests=3)
    for n in (1, 2):
        sms(tidings, n, REQUEST_INVALID)
    w.dispatch_once("sms")
    [alert] = refused(tidings, clock, config).values()
    assert alert.key == "provider_refused:sms:simulator:REQUEST_INVALID"
    assert alert.severity == "warning" and alert.details["refusals"] == 2
    assert "request" in alert.details["action"]
    sms(tidings, 3, REQUEST_INVALID)
    w.dispatch_once("sms")
    [alert] = refused(tidings, clock, config).values()
    assert alert.severity == "page" and alert.details["refusals"] == 3


def test_each_tenant_sees_only_its_own_refusals(tidings: Tidings, clock: ManualClock) -> None:
    other = tidings.for_tenant("acme")
    publish_example_policy(tidings, "acme")
    for t in (tidings, other):
        publish_offer_template(t)
    w = worker(tidings, simulator(clock))
    mine = sms(tidings, 1, SENDER_REJECTED)
    theirs = [sms(other, n, SENDER_REJECTED) for n in (1, 2, 3)]
    w.dispatch_once("sms")
    alerts = refused(tidings, clock)
    assert set(alerts) == {
        "default/provider_refused:sms:simulator:SENDER_REJECTED",
        "acme/provider_refused:sms:simulator:SENDER_REJECTED",
    }
    own = alerts["default/provider_refused:sms:simulator:SENDER_REJECTED"]
    assert own.details["refusals"] == 1 and own.details["sample"]["intent_id"] == str(mine.id)
    assert _leaks(own, *(str(i.id) for i in theirs), "acme") == []
    acme = alerts["acme/provider_refused:sms:simulator:SENDER_REJECTED"]
    assert acme.details["refusals"] == 3 and str(mine.id) not in json.dumps(acme.details)


def test_an_account_restriction_pauses_the_account_and_the_rest_wait_unsent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    restricted = sms(tidings, 1, ACCOUNT_RESTRICTED)
    assert w.dispatch_once("sms") == 1
    # The refused intent fails: the provider processed and refused it.
    assert (tidings.get(restricted.id).state, tidings.get(restricted.id).decision_code) == (
        IntentState.FAILED,
        "ACCOUNT_RESTRICTED",
    )
    waiting = [sms(tidings, n, FINE) for n in (2, 3)]
    clock.advance(RESTRICTED_BASE_SECONDS / 2)
    assert w.dispatch_once("sms") == 0  # the account is paused: nothing is claimed
    assert {tidings.get(i.id).state for i in waiting} == {IntentState.PENDING}
    assert len(sends(core)) == 1

    assert paused(tidings) == [("ACCOUNT_RESTRICTED", RESTRICTED_BASE_SECONDS / 2)]
    found = evaluate_alerts(tidings.db, clock.now(), AlertConfig())
    page = next(a for a in found if a.condition == "provider_refused")
    assert page.severity == "page" and page.details["code"] == "ACCOUNT_RESTRICTED"
    assert "restrict" in page.details["action"] and "sandbox" in page.details["action"]

    clock.advance(RESTRICTED_BASE_SECONDS / 2)  # the pause has ended
    assert w.dispatch_once("sms") == 2
    assert {tidings.get(i.id).state for i in waiting} == {IntentState.ACCEPTED}


def test_a_repeated_restriction_doubles_the_pause(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    sms(tidings, 1, ACCOUNT_RESTRICTED)
    w.dispatch_once("sms")
    clock.advance(RESTRICTED_BASE_SECONDS)
    sms(tidings, 2, ACCOUNT_RESTRICTED)
    assert w.dispatch_once("sms") == 1
    assert paused(tidings) == [("ACCOUNT_RESTRICTED", 2 * RESTRICTED_BASE_SECONDS)]


def test_intents_claimed_before_the_restriction_are_handed_back_unsent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    restricted = sms(tidings, 1, ACCOUNT_RESTRICTED)
    others = [sms(tidings, n, FINE) for n in (2, 3)]
    claimed = w.claim("sms", 10)  # one worker's batch, claimed before the answer
    assert len(claimed) == 3
    first = next(c for c in claimed if c.intent.id == restricted.id)
    w.send_and_record(first)
    for c in claimed:
        if c is not first:
            w.send_and_record(c)  # the account paused meanwhile: no call is made
    assert len(sends(core)) == 1
    for i in others:
        got = tidings.get(i.id)
        assert (got.state, got.decision_code) == (IntentState.PENDING, "PROVIDER_PAUSED")
    found = evaluate_alerts(tidings.db, clock.now(), AlertConfig())
    [held] = [a for a in found if a.condition == "provider_paused"]
    assert held.details["code"] == "ACCOUNT_RESTRICTED" and held.details["affected_intents"] == 2
    assert "restricted" in held.details["action"]
    clock.advance(RESTRICTED_BASE_SECONDS)
    assert w.dispatch_once("sms") == 2
    assert {tidings.get(i.id).state for i in others} == {IntentState.ACCEPTED}
