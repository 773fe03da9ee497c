"""Which worker a fault takes (harness/reliability/faults.py), against real
processes: stand-ins that print the worker's ready line, then as much log
as a busy worker does, and exit 0 on SIGTERM, as `tidings worker` does,
without a database behind them."""

from __future__ import annotations

import random
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.netns import Host
from harness.reliability.faults import Injector
from harness.reliability.processes import READY_LINE, Fleet, Proc

from tests.lanes import starts_processes

STAND_IN = f"""
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print({READY_LINE!r}, flush=True)
for _ in range(20_000):
    print("a send's log line")
sys.stdout.flush()
while True:
    time.sleep(0.1)
"""


class StandInFleet(Fleet):
    def _proc(self, name: str, *args: str, host: Host | None = None) -> Proc:
        return Proc(name, [sys.executable, "-c", STAND_IN], {}, self.log_dir / f"{name}.log")


@pytest.fixture
@starts_processes
def fleet(tmp_path: Path) -> Iterator[StandInFleet]:
    fleet = StandInFleet(db_url="", home=tmp_path, secret="", log_dir=tmp_path)
    yield fleet
    for worker in fleet.workers:
        worker.signal(signal.SIGKILL)
        worker.stop(5)


def _injector(fleet: Fleet) -> Injector:
    none: Any = None  # worker_sigterm needs the fleet alone
    return Injector(fleet, none, none, none, random.Random(3), 0, 0)


def _until_ready(fleet: Fleet, count: int) -> None:
    deadline = time.monotonic() + 30
    while sum(w.ready() for w in fleet.workers) < count:
        assert time.monotonic() < deadline, "the stand-ins did not start"
        time.sleep(0.05)


def test_a_worker_that_logged_much_since_its_ready_line_is_still_ready(
    fleet: StandInFleet,
) -> None:
    worker = fleet.start_worker()
    _until_ready(fleet, 1)
    time.sleep(0.5)
    assert worker.log_path.stat().st_size > 300_000 and worker.ready()


def test_a_graceful_stop_is_injected_even_when_every_ready_worker_is_armed(
    fleet: StandInFleet,
) -> None:
    # As in a one-minute run where fault points come every 15 s: both
    # workers armed, so none may take a SIGTERM as it stands.
    for _ in range(2):
        fleet.start_worker(faults="after_claim:kill@5")
    _until_ready(fleet, 2)
    injector = _injector(fleet)

    detail = injector.worker_sigterm()
    for helper in injector._helpers:
        helper.join(30)

    stopped = [w for w in fleet.workers if w.pid in injector._terminated]
    assert len(stopped) == 1 and not stopped[0].faults, detail
    assert stopped[0].returncode() == 0 and not injector.problems
    killed = [e for e in fleet.exits if e.pid in injector._killed]
    assert len(killed) == 1 and killed[0].faults and killed[0].returncode == -signal.SIGKILL
