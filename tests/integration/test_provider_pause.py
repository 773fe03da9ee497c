"""A provider that says "back off" is backed off by every worker.

A 429 pauses its provider account, in the database, until its Retry-After;
a storm of 5xx answers opens the same pause with an exponential backoff.
Every worker's claims for that account wait; another account goes on. The
pause is a metric and an alert while it lasts, and ends on the injected
clock.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.observability.alerts.config import AlertConfig
from tidings.policies import builtin_document
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import offer, publish_offer_template, sends, simulator

THROTTLED = "+14155550429"  # the simulator's magic number: 429 with Retry-After
PAUSED = re.compile(
    r'^tidings_provider_paused_seconds\{caused_by="[^"]*",code="(\w+)",provider="([^"]+)"\} (\S+)$',
    re.M,
)


class MailAccount(InProcessSimulatorAdapter):
    """The same simulator behind another provider account, for e-mail."""

    @property
    def account(self) -> str:
        return "simulator-mail"


def setup(t: Tidings) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc["version"] = "pause-1"
    t.publish_policy(doc)
    publish_offer_template(t)
    t.publish_template("note", channel="email", subject="Note", body="Hello {{ who }}.",
                       required_variables=["who"])  # fmt: skip


def two_workers(t: Tidings, core: SimulatorCore) -> tuple[Worker, Worker]:
    adapters = {"sms": InProcessSimulatorAdapter(core), "email": MailAccount(core)}
    config = WorkerConfig(seed=7, reconcile_concurrency=1)
    return (
        Worker(t.runtime, adapters, config=config, owner="worker-1"),
        Worker(t.runtime, adapters, config=config, owner="worker-2"),
    )


def sms(t: Tidings, n: int, phone: str = "+14155550123") -> Any:
    return offer(t, n, recipient={"ref": f"m{n}", "phone": phone}, expires_at=None)


def mail(t: Tidings, n: int) -> Any:
    return t.notify(
        idempotency_key=f"note:{n}",
        channel="email",
        recipient={"ref": f"m{n}", "email": f"m{n}@example.org"},
        template="note",
        variables={"who": "there"},
        purpose="transactional",
        event_class="note",
    )


def paused(t: Tidings) -> dict[str, tuple[str, float]]:
    body, _ = render_metrics(t.runtime)
    return {p: (code, float(v)) for code, p, v in PAUSED.findall(body.decode())}


def alerts(t: Tidings, clock: ManualClock) -> dict[str, Any]:
    found = evaluate_alerts(t.db, clock.now(), AlertConfig())
    return {a.key: a for a in found if a.condition == "provider_paused"}


def test_a_429_pauses_the_account_for_every_worker_until_retry_after(
    tidings: Tidings, clock: ManualClock
) -> None:
    setup(tidings)
    core = simulator(clock, retry_after_seconds=30)
    first, second = two_workers(tidings, core)
    throttled = sms(tidings, 1, THROTTLED)
    assert first.dispatch_once("sms") == 1  # the 429
    waiting = [sms(tidings, n) for n in (2, 3)]
    clock.advance(10)
    assert second.dispatch_once("sms") == 0  # another worker: the account is paused
    assert first.dispatch_once("sms") == 0
    assert [e["outcome"] for e in sends(core)] == ["rate_limited"]
    assert mail(tidings, 9) and second.dispatch_once("email") == 1  # another account goes on
    assert paused(tidings) == {"simulator": ("RATE_LIMITED", 20.0)}
    [alert] = alerts(tidings, clock).values()
    assert alert.key == "provider_paused:simulator" and alert.severity == "warning"
    assert alert.details["sample_intent_id"] == str(throttled.id)
    assert "back off" in alert.details["action"]
    clock.advance(20)  # Retry-After has passed
    assert paused(tidings) == {} and alerts(tidings, clock) == {}
    assert second.dispatch_once("sms") == 3  # the two waiting, and the throttled one again
    assert {tidings.get(i.id).state for i in waiting} == {IntentState.ACCEPTED}
    assert paused(tidings) == {"simulator": ("RATE_LIMITED", 30.0)}  # it answered 429 again


def test_a_storm_of_5xx_answers_opens_the_same_pause(tidings: Tidings, clock: ManualClock) -> None:
    setup(tidings)
    core = simulator(clock)
    first, second = two_workers(tidings, core)
    sms(tidings, 1, "+14155550500")
    assert first.dispatch_once("sms") == 1
    sms(tidings, 2)
    assert second.dispatch_once("sms") == 1  # one 5xx is the intent's business, not a storm
    sms(tidings, 3)
    sms(tidings, 4, "+14155550500")
    first.dispatch_once("sms")  # a group with an acceptance starts the count again
    assert paused(tidings) == {}
    for n in (5, 6, 7):
        sms(tidings, n, "+14155550500")
    assert first.dispatch_once("sms") == 3  # three 5xx in a row: a storm
    [(code, seconds)] = paused(tidings).values()
    assert code == "PROVIDER_ERROR" and 0.5 <= seconds <= 1.0  # backoff 1 s, jitter at most half
    sms(tidings, 8)
    assert second.dispatch_once("sms") == 0
    clock.advance(1)
    assert second.dispatch_once("sms") == 1


def test_a_fast_429_does_not_widen_the_claim_window(tidings: Tidings, clock: ManualClock) -> None:
    setup(tidings)
    core = simulator(clock, retry_after_seconds=1)
    first, _ = two_workers(tidings, core)
    sms(tidings, 1, THROTTLED)
    first.dispatch_once("sms")
    assert first._windows["sms"].per_call is None  # only real calls time the window
