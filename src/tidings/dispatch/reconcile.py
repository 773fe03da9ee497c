"""Reconciliation: finding out what happened when nobody told us.

Two sources of work: attempts whose status check is due (bounded polling
on the schedule frozen in the intent's policy version), and `sending`
intents whose worker lease expired (a crash: the outcome is unknown and is
looked up before any new attempt). Provider calls happen outside any
transaction; each check is leased first by pushing its time forward.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.dispatch.gate import frozen_policy
from tidings.dispatch.observe import apply_observation, carry_settled_attempt
from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Attempt, Intent
from tidings.domain.schedules import next_check_at
from tidings.domain.states import AttemptState, IntentState
from tidings.domain.transitions import Event, allowed
from tidings.providers.base import Observation, ProviderAdapter, ProviderError
from tidings.store import ledger
from tidings.store.database import Database, execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]

# While one worker looks an attempt up, others leave it alone this long.
CHECK_LEASE_SECONDS = 30.0
UNAVAILABLE_RETRY_SECONDS = 15.0
# "The provider has no message under this key" proves absence only once no
# request for the attempt can still be on its way: a worker killed mid-call
# leaves one in flight, and a slow provider may record it long after the
# lease expired. Until then the lookup is repeated, never concluded.
NOT_RECEIVED_AFTER_SECONDS = 60.0


@dataclass(frozen=True)
class DueCheck:
    attempt: Attempt
    intent_state: IntentState


def recover_leases(conn: Conn, now: datetime, limit: int = 100) -> int:
    """Expired leases become unknown outcomes to reconcile, never resends."""
    rows = fetch_all(conn, "expired_leases", {"now": now, "limit": limit})
    for row in rows:
        intent = Intent.from_row(row)
        marked = fetch_one(
            conn,
            "attempt_settled",
            {
                "tenant_id": intent.tenant_id,
                "intent_id": intent.id,
                "n": intent.attempt_count,
                "state": "unknown",
                "code": "LEASE_EXPIRED",
                "now": now,
                "next_check_at": now,
                "checks_expire_at": now + timedelta(days=1),
                "from_states": ["sending"],
            },
        )
        moved = ledger.transition(
            conn,
            intent,
            Event.OUTCOME_UNKNOWN,
            now=now,
            actor="system:sweeper",
            move=ledger.Move(decision_code="LEASE_EXPIRED"),
            detail={"lease_owner": intent.lease_owner, "attempt": intent.attempt_count},
        )
        if marked is None:
            carry_settled_attempt(conn, moved, now)
    return len(rows)


def lease_checks(conn: Conn, now: datetime, limit: int) -> list[DueCheck]:
    rows = fetch_all(conn, "due_checks", {"now": now, "limit": limit})
    for row in rows:
        execute(
            conn,
            "attempt_checked",
            {
                "tenant_id": row["tenant_id"],
                "intent_id": row["intent_id"],
                "n": row["n"],
                "next_check_at": now + timedelta(seconds=CHECK_LEASE_SECONDS),
            },
        )
    # check_count was bumped above; the schedule below counts from the old value
    return [DueCheck(Attempt.from_row(r), IntentState(r["intent_state"])) for r in rows]


def run_checks(
    db: Database,
    adapters: Mapping[str, ProviderAdapter],
    now: datetime,
    rng: random.Random,
    limit: int = 100,
    not_received_after: float = NOT_RECEIVED_AFTER_SECONDS,
) -> int:
    with db.transaction() as conn:
        due = lease_checks(conn, now, limit)
    for check in due:
        adapter = adapters.get(check.attempt.provider)
        if adapter is not None:
            check_one(db, adapter, check, now, rng, not_received_after)
    return len(due)


def check_one(
    db: Database,
    adapter: ProviderAdapter,
    check: DueCheck,
    now: datetime,
    rng: random.Random,
    not_received_after: float = NOT_RECEIVED_AFTER_SECONDS,
) -> None:
    attempt = check.attempt
    try:
        found, looked = _look_up(adapter, attempt)
    except ProviderError:
        with db.transaction() as conn:
            _reschedule(conn, attempt, now + timedelta(seconds=UNAVAILABLE_RETRY_SECONDS))
        return
    with db.transaction() as conn:
        if found is not None:
            source = "lookup" if attempt.state is AttemptState.UNKNOWN else "poll"
            # Looked up for this tenant's attempt: it may settle nobody else's.
            apply_observation(conn, found, source, now, tenant_hint=attempt.tenant_id)
        elif looked and attempt.state is AttemptState.UNKNOWN:
            settled_by = attempt.created_at + timedelta(seconds=not_received_after)
            if now < settled_by:
                _reschedule(conn, attempt, settled_by)
            else:
                _not_received(conn, attempt, now)
            return
        _schedule_next(conn, attempt, now, rng)


def _look_up(adapter: ProviderAdapter, attempt: Attempt) -> tuple[Observation | None, bool]:
    """The provider's answer, and whether "nothing found" is proof of absence."""
    if attempt.provider_message_id and adapter.supports_lookup:
        return adapter.status(attempt.provider_message_id), False
    if attempt.state is AttemptState.UNKNOWN and adapter.supports_lookup_by_key:
        return adapter.find_by_key(attempt.attempt_key), True
    return None, False  # no lookup: wait for events until the budget ends


def _not_received(conn: Conn, attempt: Attempt, now: datetime) -> None:
    """The provider has no message under our key: the attempt never went out."""
    fetch_one(
        conn,
        "attempt_settled",
        {
            "tenant_id": attempt.tenant_id,
            "intent_id": attempt.intent_id,
            "n": attempt.n,
            "state": "failed",
            "code": "NOT_RECEIVED",
            "now": now,
            "next_check_at": None,
            "checks_expire_at": None,
            "from_states": ["unknown"],
        },
    )
    intent = ledger.get_intent(conn, attempt.tenant_id, attempt.intent_id)
    if (
        intent is None
        or intent.attempt_count != attempt.n
        or not allowed(intent.state, Event.NOT_RECEIVED)
    ):
        return
    with suppress(StaleTransition):
        ledger.transition(
            conn,
            intent,
            Event.NOT_RECEIVED,
            now=now,
            actor="system:reconciler",
            move=ledger.Move(next_due_at=now, decision_code="NOT_RECEIVED"),
            detail={"attempt": attempt.n, "attempt_key": attempt.attempt_key},
        )


def _schedule_next(conn: Conn, attempt: Attempt, now: datetime, rng: random.Random) -> None:
    current = fetch_one(
        conn,
        "attempt_by_number",
        {"tenant_id": attempt.tenant_id, "intent_id": attempt.intent_id, "n": attempt.n},
    )
    if current is None or current["state"] not in ("accepted", "unknown", "sending"):
        return  # settled by what we just applied
    intent = ledger.get_intent(conn, attempt.tenant_id, attempt.intent_id)
    assert intent is not None
    schedule = frozen_policy(conn, intent, now).poll_schedule
    base = current["accepted_at"] or current["created_at"]
    following = next_check_at(schedule, base, current["check_count"], rng)
    expired = current["checks_expire_at"] is not None and now >= current["checks_expire_at"]
    if following is None or expired:
        _exhausted(conn, attempt, intent, now)
    else:
        _reschedule(conn, attempt, max(following, now))


def _reschedule(conn: Conn, attempt: Attempt, at: datetime) -> None:
    execute(
        conn,
        "reschedule_check",
        {
            "tenant_id": attempt.tenant_id,
            "intent_id": attempt.intent_id,
            "n": attempt.n,
            "next_check_at": at,
        },
    )


def _exhausted(conn: Conn, attempt: Attempt, intent: Intent, now: datetime) -> None:
    """The budget ended without terminal evidence: unknown, visibly, never resent."""
    fetch_one(
        conn,
        "attempt_settled",
        {
            "tenant_id": attempt.tenant_id,
            "intent_id": attempt.intent_id,
            "n": attempt.n,
            "state": "unknown",
            "code": "CHECKS_EXHAUSTED",
            "now": now,
            "next_check_at": None,
            "checks_expire_at": None,
            "from_states": ["accepted", "unknown", "sending"],
        },
    )
    if intent.attempt_count != attempt.n or not allowed(
        intent.state, Event.RECONCILIATION_EXHAUSTED
    ):
        return
    with suppress(StaleTransition):
        ledger.transition(
            conn,
            intent,
            Event.RECONCILIATION_EXHAUSTED,
            now=now,
            actor="system:reconciler",
            move=ledger.Move(decision_code="CHECKS_EXHAUSTED"),
            detail={"attempt": attempt.n},
        )
