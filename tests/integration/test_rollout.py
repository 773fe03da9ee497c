"""Rolling out one region and one purpose at a time (issue #41, item 1):
controls scoped by purpose and event class, the live cohort, the cohort's
report and how shadow mode ends (docs/operations.md, docs/replay.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tidings import CohortShrink, IntentState, ManualClock, Tidings
from tidings.cli import app
from tidings.domain.errors import InvalidInput

from .api_support import auth, client, new_key
from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

NOON_NEW_YORK = datetime(2026, 6, 1, 16, 0, tzinfo=UTC)


def test_a_kill_switch_on_one_purpose_holds_it_and_lets_the_others_send(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    core = simulator(clock)
    w = worker(tidings, core)
    tidings.set_control("kill_switch", True, channel="sms", purpose="marketing")
    held = offer(tidings, 1, purpose="marketing")
    sent = offer(tidings, 2)
    assert w.dispatch_once() == 1
    assert tidings.get(held.id).state is IntentState.PENDING
    assert tidings.get(sent.id).state is IntentState.ACCEPTED
    tidings.set_control("kill_switch", False, channel="sms", purpose="marketing")
    w.dispatch_once()
    assert tidings.get(held.id).state is not IntentState.PENDING  # decided now
    assert len(sends(core)) == 1  # marketing without consent: refused by the policy


def test_shadow_mode_on_one_event_class_shadows_only_it(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    core = simulator(clock)
    tidings.set_control("shadow_mode", True, event_class="waitlist_reminder")
    shadowed = offer(tidings, 1, event_class="waitlist_reminder")
    live = offer(tidings, 2)
    worker(tidings, core).dispatch_once()
    got = tidings.get(shadowed.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "SHADOW_MODE"
    assert tidings.get(live.id).state is IntentState.ACCEPTED
    assert len(sends(core)) == 1


def test_a_scoped_control_stays_in_its_tenant(tidings: Tidings, clock: ManualClock) -> None:
    acme = tidings.for_tenant("acme")
    publish_offer_template(tidings)
    publish_offer_template(acme)
    clock.set(NOON_NEW_YORK)
    core = simulator(clock)
    tidings.set_control("kill_switch", True, purpose="transactional")
    acme.set_control("shadow_mode", True, event_class="waitlist_offer")
    ours, theirs = offer(tidings, 1), offer(acme, 2)
    worker(tidings, core).dispatch_once()
    assert tidings.get(ours.id).state is IntentState.PENDING  # held, not shadowed
    assert acme.get(theirs.id).decision_code == "SHADOW_MODE"  # shadowed, not held
    assert sends(core) == []
    scopes = {(c["kind"], c["purpose"], c["event_class"]) for c in tidings.controls()}
    assert scopes == {("kill_switch", "transactional", "")}


def test_the_api_scopes_a_control_by_purpose_and_event_class(api: TestClient) -> None:
    scope = {"channel": "sms", "country": "de", "purpose": "marketing", "event_class": "promo"}
    put = api.put("/v1/controls/kill-switch", json={"enabled": True, "scope": scope})
    assert put.status_code == 200, put.text
    assert put.json()["scope"] == {**scope, "country": "DE"}
    broad = api.put("/v1/controls/kill-switch", json={"enabled": False, "scope": {}})
    assert broad.json()["scope"] == dict.fromkeys(scope)  # a different control
    listed = [
        (c["enabled"], c["scope"]["purpose"]) for c in api.get("/v1/controls").json()["items"]
    ]
    assert sorted(listed, key=str) == [(False, None), (True, "marketing")]


def _decide_all(tidings: Tidings, clock: ManualClock, made: list[Any]) -> dict[str, Any]:
    """Claim everything due; each intent's cohort as its claim recorded it."""
    w = worker(tidings, simulator(clock))
    while w.dispatch_once():
        pass
    claims = {i.id: _claim_input(tidings, i.id) for i in made}
    return {str(tidings.get(i).recipient_ref): claims[i] for i in claims}


def _claim_input(tidings: Tidings, intent_id: Any) -> dict[str, Any]:
    inputs = [e.detail.get("input", {}).get("decision_inputs") for e in tidings.timeline(intent_id)]
    [cohort] = [i["cohort"] for i in inputs if i and "cohort" in i]
    got = tidings.get(intent_id)
    return {**cohort, "shadowed": got.decision_code == "SHADOW_MODE"}


def test_a_live_cohort_only_grows_and_keeps_everyone_live(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    assert tidings.set_control("shadow_mode", True, channel="sms", live_percent=10) == 10
    first = _decide_all(tidings, clock, [offer(tidings, n) for n in range(40)])
    assert all(c["live"] == (c["bucket"] < 10) != c["shadowed"] for c in first.values())
    assert all(c["live_percent"] == 10 for c in first.values())
    assert tidings.set_control("shadow_mode", True, channel="sms", live_percent=50) == 50
    again = [offer(tidings, n, idempotency_key=f"second:{n}") for n in range(40)]
    second = _decide_all(tidings, clock, again)
    assert {r for r, c in first.items() if c["live"]} <= {r for r, c in second.items() if c["live"]}
    assert all(c["live"] == (c["bucket"] < 50) != c["shadowed"] for c in second.values())
    assert 0 < sum(c["live"] for c in first.values()) < sum(c["live"] for c in second.values())


def test_a_live_cohort_refuses_to_shrink(tidings: Tidings, api: TestClient) -> None:
    tidings.set_control("shadow_mode", True, country="DE", live_percent=10)
    with pytest.raises(CohortShrink, match="kill switch"):
        tidings.set_control("shadow_mode", True, country="DE", live_percent=5)
    assert tidings.set_control("shadow_mode", False, country="DE") == 10  # off keeps it
    with pytest.raises(InvalidInput):
        tidings.set_control("kill_switch", True, live_percent=10)
    body = {"enabled": True, "scope": {"country": "de"}, "live_percent": 10}
    assert api.put("/v1/controls/shadow-mode", json=body).json()["live_percent"] == 10
    refused = api.put("/v1/controls/shadow-mode", json={**body, "live_percent": 1})
    assert refused.status_code == 409 and refused.json()["code"] == "COHORT_SHRINK"
    grown = api.put("/v1/controls/shadow-mode", json={**body, "live_percent": 25})
    assert grown.status_code == 200 and grown.json()["live_percent"] == 25


def test_the_cohort_report_counts_a_step_until_it_settles(
    tidings: Tidings, clock: ManualClock, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    start = clock.now()
    tidings.set_control("shadow_mode", True, channel="sms", country="US", live_percent=50)
    made = [offer(tidings, n) for n in range(20)]
    w = worker(tidings, simulator(clock, receipt_delay_ms=1000))
    while w.dispatch_once():
        pass
    step = tidings.rollout_report(since=start, channel="sms", country="us")
    counts = step["counts"]
    assert step["shadow_mode"] is True and step["live_percent"] == 50
    assert counts["intents"] == counts["decided"] == 20 and counts["waiting"] == 0
    assert 0 < counts["sent"] == counts["in_flight"] and counts["shadowed"] == 20 - counts["sent"]
    assert step["settled"] is False  # the live sends have no receipt yet
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    args = ["rollout", "report", "--since", start.isoformat(), "--channel", "sms", "--json"]
    assert CliRunner().invoke(app, args).exit_code == 1
    clock.advance(10)
    while w.reconcile_once():
        pass
    settled = tidings.rollout_report(since=start, channel="sms", country="US")
    assert settled["settled"] is True
    assert settled["counts"]["delivered"] == counts["sent"] and settled["counts"]["in_flight"] == 0
    shown = CliRunner().invoke(app, args)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["counts"]["delivered"] == counts["sent"]
    http = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant, ["read"], policy=False)))
    body = {"since": start.isoformat(), "scope": {"channel": "sms", "country": "us"}}
    answered = http.post("/v1/controls/rollout-report", json=body)
    assert answered.status_code == 200, answered.text
    assert answered.json()["counts"] == settled["counts"] and answered.json()["settled"] is True
    assert answered.json()["scope"]["country"] == "US" and answered.json()["live_percent"] == 50
    other = tidings.rollout_report(since=start, purpose="marketing")
    assert other["counts"]["intents"] == 0 and other["live_percent"] is None
    assert {tidings.get(i.id).state for i in made} == {
        IntentState.DELIVERED,
        IntentState.SUPPRESSED,
    }


def test_shadow_mode_ends_for_new_intents_only(tidings: Tidings, clock: ManualClock) -> None:
    """docs/replay.md: a shadow decision is final, and an intent created in
    shadow belongs to the live system even if claimed after shadow ends."""
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    core = simulator(clock)
    w = worker(tidings, core)
    tidings.set_control("shadow_mode", True, channel="sms")
    decided = offer(tidings, 1)
    later = offer(tidings, 2, not_before=clock.now() + timedelta(minutes=5))
    w.dispatch_once()
    assert tidings.get(decided.id).decision_code == "SHADOW_MODE"
    assert tidings.get(later.id).state is IntentState.PENDING  # not due: undecided
    clock.advance(60)
    tidings.set_control("shadow_mode", False, channel="sms")
    after = offer(tidings, 3)
    clock.advance(300)
    while w.dispatch_once():
        pass
    assert tidings.get(after.id).state is IntentState.ACCEPTED  # new: live
    got = tidings.get(later.id)  # created in shadow, claimed after it ended
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "SHADOW_MODE"
    assert tidings.get(decided.id).state is IntentState.SUPPRESSED  # never sent later
    assert [e["idempotency_key"] for e in sends(core)] == [
        tidings.get(after.id).attempts[0].attempt_key
    ]
    tidings.set_control("shadow_mode", True, channel="sms")  # on again: nothing moves back
    assert w.dispatch_once() == 0 and len(sends(core)) == 1


def test_the_console_names_each_controls_whole_scope(tidings: Tidings) -> None:
    from tests.security.test_console_session import browser, sign_in

    tidings.set_control("kill_switch", True, channel="sms", purpose="marketing")
    tidings.set_control("shadow_mode", True, country="DE", event_class="promo", live_percent=10)
    http = browser(tidings)
    assert sign_in(http, new_key(tidings, tidings.tenant, policy=False)).status_code in (302, 303)
    page = http.get("/console/").text
    assert '<span class="scope">sms · marketing since' in page
    assert '<span class="scope">all channels · DE · promo · 10% live since' in page
