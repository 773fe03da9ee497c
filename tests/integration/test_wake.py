"""A channel busy waiting for an answer still wakes for a new intent.

Its loop sleeps on one inbox that finished calls and the LISTEN thread's
rings both land in; with the timed scan set far out (30 s), only the ring
can make it claim the second intent while the first call is still hanging.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from tidings import ManualClock, Tidings
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.providers.outcomes import SendResult
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import offer, publish_offer_template, simulator


class CountingGate(InProcessSimulatorAdapter):
    """The simulator adapter; the first call hangs until the gate opens."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.calls = 0
        self.lock = threading.Lock()

    def send(self, message: Any, idempotency_key: str) -> SendResult:
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            self.gate.wait(60)
        return super().send(message, idempotency_key)


def until(check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)  # polling another thread's progress, not waiting for time
    return False


def listening(db_url: str) -> bool:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN tidings_due%%'"
        ).fetchone()
    return bool(row and row[0])


def test_a_notify_wakes_a_channel_while_a_call_is_in_flight(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    adapter = CountingGate(simulator(clock))
    config = WorkerConfig(
        seed=7, idle_wait=30.0, maintenance_interval=30.0, concurrency={"sms": 2, "email": 1}
    )
    w = Worker(tidings.runtime, {"sms": adapter, "email": adapter}, config=config)
    offer(tidings, 1)
    stop = threading.Event()
    runner = threading.Thread(target=w.run, args=(stop,))
    runner.start()
    try:
        assert until(lambda: adapter.calls == 1, 10), "the first call did not start"
        assert until(lambda: listening(db_url), 10), "the worker is not listening"
        offer(tidings, 2)
        assert until(lambda: adapter.calls == 2, 5), "the new intent waited for the timed scan"
    finally:
        adapter.gate.set()
        stop.set()
        runner.join(30)
