"""A worker's maintenance round: each step gets its turn whatever the others do.

Seen in the 1M-recipient benchmark: the alert scan ran into its statement
timeout, and with one `try` around the whole round, reconciliation and the
event push after it lost their turn every time the alerts were evaluated.
"""

from __future__ import annotations

import math
import threading

import psycopg
import pytest

from tidings import ManualClock, Tidings
from tidings.dispatch import runner

from .dispatch_helpers import simulator, worker


@pytest.mark.parametrize(
    "failure",
    [psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), KeyError("x")],
    ids=["database error", "bug"],
)
def test_a_failing_step_does_not_cost_the_later_steps_their_turn(
    tidings: Tidings, clock: ManualClock, failure: Exception
) -> None:
    w = worker(tidings, simulator(clock), maintenance_interval=0.01)
    reached = threading.Event()

    def failing_alerts(now: object) -> None:
        raise failure

    def reconcile(limit: int = 100) -> int:
        reached.set()
        return 0

    w.alerts.tick = failing_alerts  # type: ignore[method-assign]
    w.reconcile_once = reconcile  # type: ignore[method-assign]
    stop = threading.Event()
    loop = threading.Thread(target=w._maintain, args=(stop,))
    loop.start()
    try:
        assert reached.wait(10), "reconciliation never ran after the alerts failed"
    finally:
        stop.set()
        loop.join(10)


@pytest.mark.parametrize(("interval", "purges"), [(3600.0, True), (math.inf, False)])
def test_retention_runs_at_start_unless_the_worker_is_told_it_runs_elsewhere(
    tidings: Tidings,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    interval: float,
    purges: bool,
) -> None:
    w = worker(tidings, simulator(clock), maintenance_interval=0.01, purge_interval=interval)
    purged, rounds = threading.Event(), threading.Semaphore(0)
    monkeypatch.setattr(runner, "purge", lambda db, now: purged.set())
    w.heartbeat = rounds.release  # type: ignore[method-assign]
    stop = threading.Event()
    loop = threading.Thread(target=w._maintain, args=(stop,))
    loop.start()
    try:
        for _ in range(3):  # the first round decides; two more to be sure
            assert rounds.acquire(timeout=10)
    finally:
        stop.set()
        loop.join(10)
    assert purged.is_set() is purges
