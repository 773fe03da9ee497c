"""With webhooks off, polling alone settles every attempt within its budget."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

from tidings import IntentState, ManualClock, Tidings
from tidings.policies import builtin_document
from tidings.providers.outcomes import Observation
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import offer, publish_offer_template, simulator, worker

SCHEDULE = {
    "first_check_after_seconds": 5,
    "factor": 2,
    "max_interval_seconds": 60,
    "jitter": 0.2,
    "max_checks": 5,
    "give_up_after_seconds": 300,
}


class CountingAdapter(InProcessSimulatorAdapter):
    """The real in-process adapter, counting the lookups it is asked for."""

    lookups: Counter[str]

    def status(self, provider_message_id: str) -> Observation | None:
        self.lookups[provider_message_id] += 1
        return super().status(provider_message_id)


def test_every_attempt_settles_or_is_explicitly_unknown(
    tidings: Tidings, clock: ManualClock
) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc.update(version="poll-1", poll_schedule=SCHEDULE)
    tidings.publish_policy(doc)
    publish_offer_template(tidings)
    core = simulator(clock, receipt_delay_ms=20_000)
    adapter = CountingAdapter(core)
    adapter.lookups = Counter()
    w = worker(tidings, core, adapter)
    fast = [offer(tidings, n).id for n in range(6)]
    w.dispatch_once()
    core.configure({"receipt_delay_ms": 10_000_000})  # these never settle at the provider
    slow = [offer(tidings, n).id for n in range(6, 10)]
    w.dispatch_once()
    for _ in range(400):
        clock.advance(1)
        w.reconcile_once()
    assert {tidings.get(i).state for i in fast} == {IntentState.DELIVERED}
    for intent_id in slow:
        got = tidings.get(intent_id)
        assert got.state is IntentState.UNKNOWN and got.decision_code == "CHECKS_EXHAUSTED"
        assert got.attempts[0].state == "unknown"
    assert adapter.lookups and max(adapter.lookups.values()) <= SCHEDULE["max_checks"]
