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
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.dispatch.gate import frozen_policy
from tidings.dispatch.observe import apply_observation, carry_settled_attempt
from tidings.domain.attempts import NOT_RECEIVED_FROM, STILL_OPEN
from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Attempt, Intent
from tidings.domain.schedules import next_check_at
from tidings.domain.states import AttemptState
from tidings.domain.transitions import Event, allowed
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import ProviderError
from tidings.providers.outcomes import Observation
from tidings.store import attempts, ledger
from tidings.store.attempts import AttemptRef, DueCheck
from tidings.store.database import Database, fetch_all

Conn = psycopg.Connection[Any]

# While one worker looks an attempt up, others leave it alone this long.
CHECK_LEASE_SECONDS = 30.0
UNAVAILABLE_RETRY_SECONDS = 15.0
# "The provider has no message under this key" proves absence only once no
# request for the attempt can still be on its way: a worker killed mid-call
# leaves one in flight, and a slow provider may record it long after the
# lease expired. Until then the lookup is repeated, never concluded.
NOT_RECEIVED_AFTER_SECONDS = 60.0


def recover_leases(conn: Conn, now: datetime, limit: int = 100) -> int:
    """Expired leases: a call that never started is due again at once; one
    that started is an unknown outcome to reconcile, never a resend."""
    rows = fetch_all(conn, "expired_leases", {"now": now, "limit": limit})
    for row in rows:
        intent = Intent.from_row(row)
        ref = AttemptRef(intent.tenant_id, intent.id, intent.attempt_count)
        attempt = attempts.lock_for_recovery(conn, ref)
        if attempt is not None and attempt.call_started_at is None:
            _call_not_started(conn, intent, attempt, now)
        else:
            _outcome_unknown(conn, intent, ref, now)
    return len(rows)


def _call_not_started(conn: Conn, intent: Intent, attempt: Attempt, now: datetime) -> None:
    """No call-started mark: nothing went out, so the claim is simply undone."""
    if not attempts.withdraw_unstarted(conn, AttemptRef.of(attempt)):
        # Settled meanwhile (the worker recorded a refusal before any call).
        _outcome_unknown(conn, intent, AttemptRef.of(attempt), now)
        return
    ledger.transition(
        conn,
        intent,
        Event.CALL_NOT_STARTED,
        now=now,
        actor="system:sweeper",
        move=ledger.Move(next_due_at=now, attempts_added=-1, decision_code="CALL_NOT_STARTED"),
        detail={"lease_owner": intent.lease_owner, "attempt": attempt.n},
    )


def _outcome_unknown(conn: Conn, intent: Intent, ref: AttemptRef, now: datetime) -> None:
    marked = attempts.settle(
        conn,
        ref,
        AttemptState.UNKNOWN,
        code="LEASE_EXPIRED",
        now=now,
        from_states={AttemptState.SENDING},
        next_check_at=now,
        checks_expire_at=now + timedelta(days=1),
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
    if not marked:
        carry_settled_attempt(conn, moved, now)


def lease_checks(conn: Conn, now: datetime, limit: int) -> list[DueCheck]:
    return attempts.lease_due_checks(
        conn, now, limit, lease_until=now + timedelta(seconds=CHECK_LEASE_SECONDS)
    )


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
    attempts.settle(
        conn,
        AttemptRef.of(attempt),
        AttemptState.FAILED,
        code="NOT_RECEIVED",
        now=now,
        from_states=NOT_RECEIVED_FROM,
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
    current = attempts.by_number(conn, AttemptRef.of(attempt))
    if current is None or current.state not in STILL_OPEN:
        return  # settled by what we just applied
    intent = ledger.get_intent(conn, attempt.tenant_id, attempt.intent_id)
    assert intent is not None
    schedule = frozen_policy(conn, intent, now).poll_schedule
    base = current.accepted_at or current.created_at
    following = next_check_at(schedule, base, current.check_count, rng)
    expired = current.checks_expire_at is not None and now >= current.checks_expire_at
    if following is None or expired:
        _exhausted(conn, attempt, intent, now)
    else:
        _reschedule(conn, attempt, max(following, now))


def _reschedule(conn: Conn, attempt: Attempt, at: datetime) -> None:
    attempts.reschedule_check(conn, AttemptRef.of(attempt), at)


def _exhausted(conn: Conn, attempt: Attempt, intent: Intent, now: datetime) -> None:
    """The budget ended without terminal evidence: unknown, visibly, never resent."""
    attempts.settle(
        conn,
        AttemptRef.of(attempt),
        AttemptState.UNKNOWN,
        code="CHECKS_EXHAUSTED",
        now=now,
        from_states=STILL_OPEN,
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
