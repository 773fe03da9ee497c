"""Unreconciled age counts from the call, not from the intent's creation.

A bulk job paced by its rate limits creates every intent at once and calls
the provider for the last ones long afterwards. Those intents are as late
as their call, not as old as the job: a healthy throttled job must not
page. A call that really stays unanswered still does.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import IntentState, ManualClock, Tidings
from tidings.observability.alerts.config import AlertConfig, Objective
from tidings.policies import builtin_document

from .dispatch_helpers import offer, publish_offer_template, simulator, worker

CONFIG = AlertConfig(unreconciled=Objective(warn_seconds=60, page_seconds=120, page_recipients=2))
AGE = re.compile(r"^tidings_oldest_unreconciled_age_seconds\{[^}]*\} (\S+)$", re.M)


def paced(t: Tidings, per_minute: int) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc["version"] = "paced-1"
    doc["rate_limits"] = [
        {"scope": "tenant", "channel": "sms", "limit": per_minute, "per_seconds": 60}
    ]
    t.publish_policy(doc)


def unreconciled(t: Tidings, clock: ManualClock) -> list[Any]:
    alerts = evaluate_alerts(t.db, clock.now(), CONFIG)
    return [a for a in alerts if a.condition == "unreconciled_backlog"]


def oldest_age(t: Tidings) -> float:
    body, _ = render_metrics(t.runtime)
    ages = [float(v) for v in AGE.findall(body.decode())]
    return max(ages) if ages else 0.0


def test_a_bulk_send_paced_by_its_rate_limit_does_not_page_while_healthy(
    tidings: Tidings, clock: ManualClock
) -> None:
    paced(tidings, per_minute=2)
    publish_offer_template(tidings)
    core = simulator(clock, receipt_delay_ms=1000)
    w = worker(tidings, core)
    intents = [
        offer(tidings, n, recipient={"ref": f"m{n}", "phone": "+14155550123"}, expires_at=None)
        for n in range(10)
    ]
    for _ in range(5):  # five rate windows: the last two are called four minutes in
        w.dispatch_once()
        clock.advance(10)
        assert unreconciled(tidings, clock) == []  # each call is 10 s old, the job 4 min
        assert oldest_age(tidings) <= 10.0
        w.reconcile_once()
        clock.advance(50)
    assert {tidings.get(i.id).state for i in intents} == {IntentState.DELIVERED}


def test_a_call_left_unanswered_pages_by_the_age_of_the_call(
    tidings: Tidings, clock: ManualClock
) -> None:
    paced(tidings, per_minute=10)
    publish_offer_template(tidings)
    core = simulator(clock, profile="sns")  # accepted is all it will ever say
    w = worker(tidings, core)
    for n in range(3):
        offer(tidings, n, recipient={"ref": f"m{n}", "phone": "+14155550123"}, expires_at=None)
    clock.advance(3600)  # created an hour before the call (workers were down)
    w.dispatch_once()
    clock.advance(100)
    [backlog] = unreconciled(tidings, clock)
    assert backlog.severity == "warning"  # 100 s since the call, not 1 h since creation
    assert backlog.details["oldest_nonterminal_age_seconds"] == 100.0
    assert oldest_age(tidings) == 100.0
    clock.advance(30)
    [backlog] = unreconciled(tidings, clock)
    assert backlog.severity == "page"
