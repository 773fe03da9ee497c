"""Rolling out one region and one purpose at a time (issue #41, item 1):
controls scoped by purpose and event class, the live cohort, the cohort's
report and how shadow mode ends (docs/operations.md, docs/replay.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from tidings import IntentState, ManualClock, Tidings

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
