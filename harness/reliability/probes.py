"""After the faults: did each worker recover by itself?

A fleet can hide a broken member: if one worker's dispatch thread died
after a database restart, the others still drain the queue. So each live
worker is probed alone while the others are paused (SIGSTOP):

- dispatch: one SMS and one e-mail intent must be claimed by *this* worker
  (its pid is in the claim's actor) and reach the provider;
- maintenance: with the SMS kill switch on (so nothing claims it), an SMS
  intent whose deadline passes must be expired by the sweeper, which only
  this worker is running.

Two things the probe must not blame the worker for. A worker stopped in
the middle of a transaction keeps its row locks (a provider's back-off
count, a rate counter) and would block the probed worker's record of its
send: the others are stopped again until none of them holds a transaction
open. And a provider pause or a tenant's hold on the account, drawn by the
faults' last answers, rightly keeps the probe's SMS unclaimed until it
ends: the dispatch clock starts when it does. A worker still sending
the faults' retries ahead of the probe is given longer, as long as it
keeps claiming. A failure says what the intents went through, what was
held and who waited on whom.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, LiteralString

import psycopg

from tidings import Tidings

from .processes import Fleet, Proc
from .retry import retrying
from .workload import TEMPLATE, utcnow

DISPATCH_TIMEOUT_S = 30.0
# Sends of the faults' retries may still be due ahead of the probe's, and
# the account's rate spaces them: a worker that keeps claiming is working,
# one that claimed nothing for DISPATCH_TIMEOUT_S is not. Bounded here.
BUSY_TIMEOUT_S = 150.0
SWEEP_TIMEOUT_S = 20.0
QUIET_TRIES = 20
# A transaction open this long on a stopped process: the target's own are
# a few milliseconds, and it is the only worker running.
HELD_OPEN = "1 second"


@dataclass
class ProbeResult:
    worker: str
    pid: int
    held_s: float = 0.0  # how long a provider pause or a hold kept its SMS back
    dispatch_s: float | None = None
    sweep_s: float | None = None
    failures: list[str] = field(default_factory=list)


def probe_all(fleet: Fleet, t: Tidings, tag: str) -> list[ProbeResult]:
    results = []
    for target in fleet.live_workers():
        others = [w for w in fleet.live_workers() if w is not target]
        _stop_outside_transactions(fleet.db_url, others)
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
    result.held_s = _held_for(fleet.db_url, [sms, email])
    within = result.held_s + DISPATCH_TIMEOUT_S
    reached = _wait(lambda: _claimed_by(fleet.db_url, [sms, email], target.pid), within)
    while not reached and within < result.held_s + BUSY_TIMEOUT_S:
        if not _claimed_lately(fleet.db_url, target.pid, DISPATCH_TIMEOUT_S):
            break
        within += 5.0
        reached = _wait(lambda: _claimed_by(fleet.db_url, [sms, email], target.pid), 5.0)
    if reached:
        result.dispatch_s = round(time.monotonic() - started, 2)
    else:
        result.failures.append(
            f"{target.name} did not dispatch both channels alone within {within:.0f} s: "
            f"{_why(fleet.db_url, [sms, email])}"
        )
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


def _stop_outside_transactions(db_url: str, others: list[Proc]) -> None:
    """SIGSTOP the others at a moment none of them holds a transaction open."""
    for _ in range(QUIET_TRIES):
        for other in others:
            other.signal(signal.SIGSTOP)
        time.sleep(1.2)  # longer than HELD_OPEN: a running transaction ends by then
        if not others or _open_transactions(db_url) == 0:
            return
        for other in others:
            other.signal(signal.SIGCONT)
        time.sleep(0.3)  # let them finish what they hold before the next try


def _one(db_url: str, sql: LiteralString, params: tuple[Any, ...] = ()) -> Any:
    """The first column of the one row `sql` returns (None: no row)."""
    with psycopg.connect(db_url) as conn:
        row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def _open_transactions(db_url: str) -> int:
    found = _one(
        db_url,
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND xact_start < now() - %s::interval AND state <> 'active'",
        (HELD_OPEN,),
    )
    return int(found or 0)


def _held_for(db_url: str, ids: list[str]) -> float:
    """Seconds until the last pause of an account, or hold of the intents'
    tenant on one, ends (0: none)."""
    seconds = _one(
        db_url,
        "SELECT greatest(0, extract(epoch FROM greatest("
        " (SELECT max(paused_until) FROM provider_pauses),"
        " (SELECT max(b.held_until) FROM provider_backoffs b WHERE b.tenant_id IN"
        "   (SELECT tenant_id FROM intents WHERE id = ANY(%s::uuid[])))) - now()))",
        (ids,),
    )
    return round(float(seconds), 2) if seconds is not None else 0.0


def _why(db_url: str, ids: list[str]) -> dict[str, Any]:
    with psycopg.connect(db_url) as conn:
        steps = conn.execute(
            "SELECT intent_id::text, event, actor, coalesce(decision_code, '') FROM transitions"
            " WHERE intent_id = ANY(%s::uuid[]) ORDER BY at",
            (ids,),
        ).fetchall()
        states = conn.execute(
            "SELECT id::text, state, next_due_at FROM intents WHERE id = ANY(%s::uuid[])", (ids,)
        ).fetchall()
        waits = conn.execute(
            "SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid),"
            " now() - xact_start, left(query, 120) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND (xact_start IS NOT NULL OR wait_event_type = 'Lock')"
        ).fetchall()
        holds = conn.execute(
            "SELECT account, paused_until FROM provider_pauses WHERE paused_until > now()"
            " UNION ALL SELECT tenant_id || '@' || account, held_until FROM provider_backoffs"
            " WHERE held_until > now()"
        ).fetchall()
    return {"states": states, "transitions": steps, "transactions": waits, "holds": holds}


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


def _claimed_lately(db_url: str, pid: int, seconds: float) -> bool:
    return bool(
        _one(
            db_url,
            "SELECT EXISTS (SELECT 1 FROM transitions WHERE event = 'claim'"
            " AND at > now() - make_interval(secs => %s) AND actor LIKE %s)",
            (seconds, f"worker:%:{pid}:%"),
        )
    )


def _state(db_url: str, intent_id: str) -> str | None:
    state = _one(db_url, "SELECT state FROM intents WHERE id = %s", (intent_id,))
    return None if state is None else str(state)


def _wait(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)  # polling real processes for a real outcome, bounded
    return False
