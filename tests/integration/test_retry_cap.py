"""Retries end: retryable provider failures are capped per intent by the policy.

A provider answering 429 for ever, an adapter whose configuration is wrong,
a report file that cannot be loaded: each answer is retryable, and an
intent without a deadline used to retry them for ever. The policy's
`retry.max_failures` (default 10, frozen with the policy version) ends it
in `failed` with the last code, and tells the application.
"""

from __future__ import annotations

import copy
from typing import Any

import psycopg
import pytest

from tests.integration.observability_helpers import evaluate_alerts
from tidings import IntentState, ManualClock, Tidings
from tidings.domain.policy_document import PolicyError, parse_policy
from tidings.domain.schedules import DEFAULT_MAX_FAILURES, DEFAULT_MAX_PENDING_SECONDS
from tidings.observability.alerts.config import AlertConfig
from tidings.policies import builtin_document
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import OutboundMessage
from tidings.providers.outcomes import SendResult
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker


def publish(t: Tidings, version: str, **retry: Any) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc["version"] = version
    doc["retry"] = {"base_seconds": 1, "max_seconds": 5, "jitter": 0.0} | retry
    t.publish_policy(doc)


def run_until_settled(t: Tidings, w: Any, clock: ManualClock, intent_id: Any, rounds: int) -> Any:
    for _ in range(rounds):
        w.dispatch_once()
        if t.get(intent_id).state is not IntentState.PENDING:
            break
        clock.advance(120)
    return t.get(intent_id)


def event_types(db_url: str) -> list[str]:
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("SELECT type FROM events ORDER BY id")]


def test_a_provider_that_429s_for_ever_ends_the_intent_after_the_cap(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish(tidings, "retry-cap-3", max_failures=3)
    publish_offer_template(tidings)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=1)
    w = worker(tidings, core)
    intent = offer(tidings, expires_at=None)  # no deadline: nothing else ends it
    got = run_until_settled(tidings, w, clock, intent.id, rounds=20)
    assert got.state is IntentState.FAILED and got.decision_code == "RATE_LIMITED"
    assert [e["outcome"] for e in sends(core)] == ["rate_limited"] * 3
    [ended] = [e for e in tidings.timeline(intent.id) if e.event == "retries_exhausted"]
    assert (ended.from_state, ended.to_state) == ("sending", "failed")
    assert event_types(db_url) == ["intent.failed"]  # the application is told


class Misconfigured(InProcessSimulatorAdapter):
    """An adapter whose settings are wrong: it refuses before any request."""

    def send(self, message: OutboundMessage, idempotency_key: str) -> SendResult:
        raise ProviderConfigError("simulator: no sender configured")


def test_a_misconfigured_provider_ends_the_intent_with_the_default_cap(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish(tidings, "retry-default-cap")  # no max_failures: the default applies
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core, adapter=Misconfigured(core))
    intent = offer(tidings, expires_at=None)
    got = run_until_settled(tidings, w, clock, intent.id, rounds=DEFAULT_MAX_FAILURES + 5)
    assert got.state is IntentState.FAILED and got.decision_code == "PROVIDER_ERROR"
    assert len(got.attempts) == DEFAULT_MAX_FAILURES
    assert sends(core) == []  # nothing ever reached the provider


def test_the_cap_is_frozen_with_the_intents_policy_version(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish(tidings, "retry-cap-2", max_failures=2)
    publish_offer_template(tidings)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=1)
    w = worker(tidings, core)
    intent = offer(tidings, expires_at=None)
    publish(tidings, "retry-cap-50", max_failures=50)  # published after the intent froze cap-2
    got = run_until_settled(tidings, w, clock, intent.id, rounds=10)
    assert got.state is IntentState.FAILED and len(sends(core)) == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_max_failures_must_be_a_positive_integer(bad: Any) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc["retry"] = {"base_seconds": 1, "max_seconds": 5, "jitter": 0.0, "max_failures": bad}
    with pytest.raises(PolicyError, match="max_failures"):
        parse_policy(doc)


def conditions(t: Tidings, clock: ManualClock) -> dict[str, Any]:
    return {a.condition: a for a in evaluate_alerts(t.db, clock.now(), AlertConfig())}


def test_an_intent_retried_past_the_threshold_alerts_until_it_ends(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish(tidings, "retry-cap-5", max_failures=5)
    publish_offer_template(tidings)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=1)
    w = worker(tidings, core)
    intent = offer(tidings, expires_at=None)
    for _ in range(2):
        w.dispatch_once()
        clock.advance(2)
    assert "provider_retrying" not in conditions(tidings, clock)  # 2 < 3: a blip
    w.dispatch_once()
    alert = conditions(tidings, clock)["provider_retrying"]
    assert alert.key == "retrying:sms" and alert.severity == "warning"
    assert alert.details["worst_intent_id"] == str(intent.id)
    assert alert.details["codes"] == ["RATE_LIMITED"] and alert.details["max_failures"] == 3
    assert "timeline" in alert.details["action"]
    clock.advance(2)
    run_until_settled(tidings, w, clock, intent.id, rounds=5)
    assert tidings.get(intent.id).state is IntentState.FAILED
    assert "provider_retrying" not in conditions(tidings, clock)  # it ended: nothing to chase


def test_an_intent_pending_longer_than_its_policy_allows_alerts(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish(tidings, "retry-pending-60", max_pending_seconds=60)
    publish_offer_template(tidings)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=30)
    w = worker(tidings, core)
    intent = offer(tidings, expires_at=None)
    w.dispatch_once()
    clock.advance(59)
    assert "pending_too_long" not in conditions(tidings, clock)
    clock.advance(2)
    alert = conditions(tidings, clock)["pending_too_long"]
    assert alert.key == "pending_too_long:sms" and alert.details["allowed_seconds"] == 60
    assert alert.details["oldest_intent_id"] == str(intent.id)
    assert alert.details["codes"] == ["RATE_LIMITED"]
    core.configure({"rate_429": 0.0})
    w.dispatch_once()
    assert tidings.get(intent.id).state is IntentState.ACCEPTED
    assert "pending_too_long" not in conditions(tidings, clock)


def test_without_a_policy_setting_pending_waits_the_default(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish(tidings, "retry-no-pending-setting")
    publish_offer_template(tidings)
    offer(tidings, expires_at=None)
    clock.advance(DEFAULT_MAX_PENDING_SECONDS - 1)
    assert "pending_too_long" not in conditions(tidings, clock)
    clock.advance(2)
    assert conditions(tidings, clock)["pending_too_long"].details["affected_intents"] == 1
