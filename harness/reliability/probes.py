"""After the faults: did each worker recover by itself?

A fleet can hide a broken member: if one worker's dispatch thread died
after a database restart, the others still drain the queue. So each live
worker is probed alone while the others are paused (SIGSTOP):

- dispatch: one SMS and one e-mail intent must be claimed by *this* worker
  (its pid is in the claim's actor) and reach the provider;
- maintenance: with the SMS kill switch on (so nothing claims it), an SMS
  intent whose deadline passes must be expired by the sweeper, which only
  this worker is running.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from tidings import Tidings

from .processes import Fleet, Proc
from .retry import retrying
from .workload import TEMPLATE, utcnow

DISPATCH_TIMEOUT_S = 30.0
SWEEP_TIMEOUT_S = 20.0


@dataclass
class ProbeResult:
    worker: str
    pid: int
    dispatch_s: float | None = None
    sweep_s: float | None = None
    failures: list[str] = field(default_factory=list)


def probe_all(fleet: Fleet, t: Tidings, tag: str) -> list[ProbeResult]:
    results = []
    for target in fleet.live_workers():
        others = [w for w in fleet.live_workers() if w is not target]
        for other in others:
            other.signal(signal.SIGSTOP)
        try:
            results.append(_probe(fleet, t, target, tag))
        finally:
            for other in others:
                other.signal(signal.SIGCONT)
    return results


def _probe(fleet: Fleet, t: Tidings, target: Proc, tag: str) -> ProbeResult:
    result = ProbeResult(target.name, target.pid)
    started = time.monotonic()
    sms = _notify(t, f"rel:{tag}:probe:{target.name}:sms", "sms", "+14155550142")
    email = _notify(t, f"rel:{tag}:probe:{target.name}:email", "email", "probe@example.org")
    if _wait(lambda: _claimed_by(fleet.db_url, [sms, email], target.pid), DISPATCH_TIMEOUT_S):
        result.dispatch_s = round(time.monotonic() - started, 2)
    else:
        result.failures.append(f"{target.name} did not dispatch both channels alone")
    retrying(lambda: t.set_control("kill_switch", True, channel="sms", actor="reliability-probe"))
    try:
        started = time.monotonic()
        doomed = _notify(
            t,
            f"rel:{tag}:probe:{target.name}:deadline",
            "sms",
            "+14155550143",
            expires_at=utcnow() + timedelta(seconds=1.5),
        )
        if _wait(lambda: _state(fleet.db_url, doomed) == "expired", SWEEP_TIMEOUT_S):
            result.sweep_s = round(time.monotonic() - started, 2)
        else:
            result.failures.append(f"{target.name}'s sweeper did not expire a passed deadline")
    finally:
        retrying(
            lambda: t.set_control("kill_switch", False, channel="sms", actor="reliability-probe")
        )
    return result


def _notify(t: Tidings, key: str, channel: str, to: str, **extra: Any) -> str:
    recipient = {"ref": key, "phone" if channel == "sms" else "email": to}
    intent = retrying(
        lambda: t.notify(
            idempotency_key=key,
            channel=channel,
            recipient=recipient,
            template=TEMPLATE,
            variables={"name": "probe", "booking": "P"},
            purpose="transactional",
            event_class="reliability_probe",
            **extra,
        )
    )
    return str(intent.id)


def _claimed_by(db_url: str, ids: list[str], pid: int) -> bool:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT intent_id) FROM transitions"
            " WHERE intent_id = ANY(%s::uuid[]) AND event = 'claim' AND actor LIKE %s",
            (ids, f"worker:%:{pid}:%"),
        ).fetchone()
        reached = conn.execute(
            "SELECT count(*) FROM intents WHERE id = ANY(%s::uuid[])"
            " AND state IN ('accepted', 'delivered', 'reconciling', 'resend_due')",
            (ids,),
        ).fetchone()
    return bool(row and reached and row[0] == len(ids) and reached[0] == len(ids))


def _state(db_url: str, intent_id: str) -> str | None:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT state FROM intents WHERE id = %s", (intent_id,)).fetchone()
    return None if row is None else str(row[0])


def _wait(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)  # polling real processes for a real outcome, bounded
    return False
