"""A stopping worker: what it hands back, what it waits for, what it leaves.

Interleavings are made explicit with a gate in front of the simulator
adapter: the one call under way blocks until the test opens the gate.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.record import record_released
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.providers.outcomes import SendResult
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

WORKER_STOPPED = "WORKER_STOPPED"


class GatedAdapter(InProcessSimulatorAdapter):
    """The simulator adapter, with each call held until the gate opens."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.entered = threading.Event()

    def send(self, message: Any, idempotency_key: str) -> SendResult:
        self.entered.set()
        self.gate.wait(30)
        return super().send(message, idempotency_key)


def gated_worker(
    tidings: Tidings, clock: ManualClock, **config: Any
) -> tuple[Worker, GatedAdapter]:
    """A worker sending one call at a time through a gated simulator."""
    publish_offer_template(tidings)
    adapter = GatedAdapter(simulator(clock))
    settings = WorkerConfig(seed=7, concurrency={"sms": 1, "email": 1}, **config)
    return Worker(tidings.runtime, {"sms": adapter, "email": adapter}, config=settings), adapter


def running(w: Worker) -> tuple[threading.Event, threading.Thread, list[int]]:
    """The worker's run loop in a thread; `results` gets what run returns."""
    stop = threading.Event()
    results: list[int] = []
    runner = threading.Thread(target=lambda: results.append(w.run(stop)))
    runner.start()
    return stop, runner, results


def test_a_claim_handed_back_unsent_is_due_again_at_once(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    intent = offer(tidings)
    [claimed] = w.claim("sms", 10)
    with tidings.db.transaction() as conn:
        assert record_released(conn, claimed, clock.now()) == "moved"
    got = tidings.get(intent.id)
    assert got.state is IntentState.PENDING
    assert got.next_due_at == clock.now()
    assert [(a.state, a.code) for a in got.attempts] == [("failed", WORKER_STOPPED)]
    transitions = [e.event for e in tidings.timeline(intent.id) if e.kind == "transition"]
    assert transitions[-1] == "released"
    assert sends(core) == []
    assert w.dispatch_once() == 1
    got = tidings.get(intent.id)
    assert got.state is IntentState.ACCEPTED
    assert [a.n for a in got.attempts] == [1, 2]
    assert len(sends(core)) == 1


def test_a_hand_back_after_a_cancel_changes_nothing(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    intent = offer(tidings)
    [claimed] = w.claim("sms", 10)
    tidings.cancel(intent.id, reason="member_left")
    with tidings.db.transaction() as conn:
        assert record_released(conn, claimed, clock.now()) == "stale"
    assert tidings.get(intent.id).state is IntentState.CANCELED


def test_stop_hands_back_unstarted_sends_and_reports_the_call_left_hanging(
    tidings: Tidings, clock: ManualClock
) -> None:
    lease = 1.0
    w, adapter = gated_worker(tidings, clock, lease_seconds=lease, batch_size=4)
    intents = [offer(tidings, n) for n in range(1, 5)]
    stop, runner, results = running(w)
    assert adapter.entered.wait(30), "no call started"
    stop.set()
    started = time.monotonic()
    runner.join(30)
    took = time.monotonic() - started
    assert not runner.is_alive()
    # One call was under way and still hanging past the lease: left to
    # lease recovery, and said so. The three behind it were handed back.
    assert results == [1]
    assert took < lease + 3
    states = [tidings.get(i.id).state for i in intents]
    assert states.count(IntentState.SENDING) == 1
    assert states.count(IntentState.PENDING) == 3
    for i in intents:
        got = tidings.get(i.id)
        if got.state is IntentState.PENDING:
            assert [(a.state, a.code) for a in got.attempts] == [("failed", WORKER_STOPPED)]
    adapter.gate.set()  # let the hanging call end; nobody records it


def test_stop_waits_for_a_call_that_answers_within_the_lease(
    tidings: Tidings, clock: ManualClock
) -> None:
    w, adapter = gated_worker(tidings, clock, lease_seconds=10.0)
    intent = offer(tidings)
    stop, runner, results = running(w)
    assert adapter.entered.wait(30), "no call started"
    stop.set()
    threading.Timer(0.3, adapter.gate.set).start()
    runner.join(30)
    assert results == [0]
    assert tidings.get(intent.id).state is IntentState.ACCEPTED
    assert len(sends(adapter.core)) == 1
