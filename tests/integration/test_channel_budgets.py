"""A throttled channel cannot starve the other: each channel has its own
dispatch loop and concurrency budget."""

from __future__ import annotations

import threading
import time

import psycopg

from tidings import Tidings
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .conftest_helpers import make_tidings


def states(db_url: str, channel: str) -> dict[str, int]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT state, count(*) FROM intents WHERE channel = %s GROUP BY state", (channel,)
        )
        return {r[0]: r[1] for r in rows}


def test_a_slow_sms_provider_does_not_hold_up_email(db_url: str) -> None:
    t: Tidings = make_tidings(db_url, clock=None)
    t.publish_template("note", channel="sms", body="note")
    t.publish_template("note", channel="email", subject="note", body="note")
    for n in range(6):
        t.notify(
            idempotency_key=f"sms:{n}",
            channel="sms",
            template="note",
            purpose="transactional",
            event_class="note",
            recipient={"ref": f"s{n}", "phone": "+14155550123"},
        )
    for n in range(30):
        t.notify(
            idempotency_key=f"email:{n}",
            channel="email",
            template="note",
            purpose="transactional",
            event_class="note",
            recipient={"ref": f"e{n}", "email": f"e{n}@example.com"},
        )
    slow = SimulatorCore()
    slow.configure({"latency_ms": 3000})
    sms = InProcessSimulatorAdapter(slow, honor_latency=True)
    email = InProcessSimulatorAdapter(SimulatorCore(), honor_latency=True)
    config = WorkerConfig(concurrency={"sms": 2, "email": 4}, idle_wait=0.1, maintenance_interval=5)
    w = Worker(t.runtime, {"sms": sms, "email": email}, config=config)
    stop = threading.Event()
    runner = threading.Thread(target=w.run, args=(stop,))
    runner.start()
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline and states(db_url, "email").get("accepted", 0) < 30:
            time.sleep(0.05)  # real threads sending; poll their committed results
        assert states(db_url, "email") == {"accepted": 30}
        assert states(db_url, "sms").get("accepted", 0) <= 2
    finally:
        stop.set()
        runner.join(timeout=30)
        t.close()
    assert states(db_url, "sms").get("sending", 0) == 0  # stopping recorded what was in flight
