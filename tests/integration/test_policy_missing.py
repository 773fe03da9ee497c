"""Deny by default: a tenant that has published no policy sends nothing.

Intents are still created (the decision is the claim's, as for every other
policy code) and end `suppressed` with POLICY_MISSING and a message saying
how to publish one; a job, whose channels cannot be resolved without a
policy, is refused with nothing created.
"""

from __future__ import annotations

from typing import Any

import pytest

from tidings import IntentState, InvalidInput, ManualClock, Tidings

from .api_support import auth, client, count, intent_body, is_problem, new_key, publish_offer
from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

pytestmark = pytest.mark.no_policy

HOW = ("tidings policy publish", "POST /v1/policies")


def _job(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "idempotency_key": "notice:1",
        "event_class": "waitlist_offer",
        "purpose": "transactional",
        "template": "waitlist_offer",
        "channels": ["sms"],
        "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
        "audience": [{"ref": "member-1", "phone": "+14155550123"}],
    }
    request.update(overrides)
    return request


def test_an_intent_of_a_tenant_without_policy_is_denied_with_policy_missing(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    intent = offer(tidings)
    assert intent.state is IntentState.PENDING and intent.policy_version is None
    core = simulator(clock)
    worker(tidings, core).dispatch_once()
    denied = tidings.get(intent.id)
    assert denied.state is IntentState.SUPPRESSED
    assert denied.decision_code == "POLICY_MISSING"
    assert sends(core) == []
    assert count(db_url, "policies") == 0  # nothing was published on our behalf
    decision = [e for e in tidings.timeline(intent.id) if e.to_state == "suppressed"][-1]
    assert decision.detail["code"] == "POLICY_MISSING" and decision.policy_version is None
    assert all(how in decision.detail["input"]["detail"] for how in HOW), decision


def test_a_job_of_a_tenant_without_policy_is_refused(tidings: Tidings, db_url: str) -> None:
    publish_offer_template(tidings)
    with pytest.raises(InvalidInput) as raised:
        tidings.create_job(**_job())
    assert raised.value.code == "POLICY_MISSING" and "tidings policy publish" in str(raised.value)
    assert count(db_url, "jobs") == 0


def test_policy_missing_over_http(tidings: Tidings, clock: ManualClock, db_url: str) -> None:
    publish_offer(tidings, "acme")
    http = client(tidings)
    http.headers.update(auth(new_key(tidings, "acme", policy=False)))
    created = http.post("/v1/intents", json=intent_body(tidings))
    assert created.status_code == 201, created.text
    assert created.json()["policy_version"] is None
    assert created.headers["Tidings-Warning"] == "POLICY_MISSING"
    assert [w["code"] for w in created.json()["warnings"]] == ["POLICY_MISSING"]
    assert all(how in created.json()["warnings"][0]["detail"] for how in HOW)
    worker(tidings, simulator(clock)).dispatch_once()
    view = http.get(f"/v1/intents/{created.json()['id']}").json()
    assert view["state"] == "suppressed"
    assert view["decision"]["code"] == "POLICY_MISSING"
    assert view["decision"]["policy_version"] is None and view["next_attempt_at"] is None
    entries = http.get(f"/v1/intents/{created.json()['id']}/timeline").json()["entries"]
    decision = [e for e in entries if e["to"] == "suppressed"][-1]
    assert decision["detail"]["code"] == "POLICY_MISSING"
    assert all(how in decision["detail"]["input"]["detail"] for how in HOW), decision
    job = _job(template={"name": "waitlist_offer"})
    problem = is_problem(http.post("/v1/jobs", json=job), 422, "POLICY_MISSING")
    assert "POST /v1/policies" in problem["detail"]
    assert count(db_url, "jobs") == 0


def test_publishing_a_policy_lets_the_next_intents_through(
    tidings: Tidings, clock: ManualClock
) -> None:
    from tests.conftest import publish_example_policy

    publish_offer_template(tidings)
    publish_example_policy(tidings)
    intent = offer(tidings, 2)
    core = simulator(clock)
    worker(tidings, core).dispatch_once()
    assert tidings.get(intent.id).state is IntentState.ACCEPTED and len(sends(core)) == 1
