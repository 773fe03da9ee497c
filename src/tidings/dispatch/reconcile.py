"""Reconciliation: finding out what happened when nobody told us.

Two sources of work: attempts whose status check is due (bounded polling
on the schedule frozen in the intent's policy version), and `sending`
intents whose worker lease expired (a crash: the outcome is unknown and is
looked up before any new attempt). Provider calls happen outside any
transaction; each check is leased first by pushing its time forward.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from concurrent.futures import Executor
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.dispatch.gate import sent_policy
from tidings.dispatch.lookup import Evidence, look_up
from tidings.dispatch.observe import apply_observation, carry_settled_attempt
from tidings.domain.attempts import NOT_RECEIVED_FROM, STILL_OPEN
from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Attempt, Intent
from tidings.domain.schedules import next_check_at
from tidings.domain.states import AttemptState
from tidings.domain.transitions import Event, allowed
from tidings.observability.process_metrics import record_lookup
from tidings.platform.vault import Vault
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import ProviderError, ProviderUnavailable
from tidings.store import attempts, ledger, sweeps
from tidings.store.attempts import AttemptRef, DueCheck
from tidings.store.database import Database
from tidings.store.isolation import FAILS_ALONE, note_alone, quarantine_sending

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.reconciler")

# While one worker looks an attempt up, others leave it alone this long.
CHECK_LEASE_SECONDS = 30.0
# After a failed lookup, the next check waits at least this long.
UNAVAILABLE_RETRY = timedelta(seconds=15)
# A list search's other open calls: started up to this long before ours too
# (their request may have reached the provider after ours).
RIVAL_LOOKBACK = timedelta(minutes=1)
# The lookups whose silence proves absence once `settled_by` has passed.
PROVING = frozenset({"key", "reference", "search"})
# "The provider has no message under this key" proves absence only once no
# request for the attempt can still be on its way: a worker killed mid-call
# leaves one in flight, and a slow provider may record it long after the
# lease expired. Until then the lookup is repeated, never concluded.
NOT_RECEIVED_AFTER_SECONDS = 60.0
SWEEPER = "system:sweeper"


def recover_leases(conn: Conn, now: datetime, limit: int = 100) -> int:
    """Expired leases: a call that never started is due again at once; one
    that started is an unknown outcome to reconcile, never a resend.

    Each intent in a savepoint of its own: one whose row or policy version
    cannot be used (missing, quarantined, past the limits) is quarantined
    alone (store/isolation.py) and the others are recovered."""
    rows = sweeps.expired_leases(conn, now, limit)
    return sum(recover_one(conn, row, now) for row in rows)


def recover_one(conn: Conn, row: Mapping[str, Any], now: datetime) -> bool:
    """Whether the intent was recovered (or quarantined); not while its
    worker holds its attempt, recording what the call did."""
    try:
        with conn.transaction():
            _recover(conn, Intent.from_row(row), now)
    except psycopg.errors.LockNotAvailable:
        return False  # the next sweep finds what the worker recorded
    except FAILS_ALONE as exc:
        with conn.transaction():
            quarantine_sending(conn, row["tenant_id"], row["id"], now, exc, SWEEPER)
    return True


def _recover(conn: Conn, intent: Intent, now: datetime) -> None:
    ref = AttemptRef(intent.tenant_id, intent.id, intent.attempt_count)
    attempt = attempts.lock_for_recovery(conn, ref)
    if attempt is not None and attempt.call_started_at is None:
        _call_not_started(conn, intent, attempt, now)
    else:
        _outcome_unknown(conn, intent, ref, now)


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
    give_up = sent_policy(conn, intent).poll_schedule.give_up_after_seconds
    marked = attempts.settle(
        conn,
        ref,
        AttemptState.UNKNOWN,
        code="LEASE_EXPIRED",
        now=now,
        from_states={AttemptState.SENDING},
        next_check_at=now,
        checks_expire_at=now + timedelta(seconds=give_up),
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
    vault: Vault | None = None,
    pool: Executor | None = None,
) -> int:
    """Look up the attempts whose check is due. `adapters` are by provider
    account (providers/accounts.py): an attempt goes to its own account's.
    With a `pool`, lookups run side by side: each is a round trip to the
    provider, and one after the other they fell behind a backlog."""

    def one(check: DueCheck) -> None:
        adapter = adapters.get(check.attempt.provider)
        try:
            check_one(db, adapter, check, now, rng, not_received_after, vault)
        except FAILS_ALONE as exc:  # its policy version unreadable (0027 quarantined it, say)
            attempt = check.attempt
            subject = f"intent:{attempt.intent_id}"
            note_alone(db, attempt.tenant_id, "reconcile", subject, exc, now)
        except Exception:  # its lease lapses and it is checked again; the others go on
            log.exception("status check failed", extra={"intent_id": str(check.attempt.intent_id)})

    with db.transaction() as conn:
        due = lease_checks(conn, now, limit)
    if pool is None:
        for check in due:
            one(check)
    else:
        list(pool.map(one, due))
    return len(due)


def check_one(
    db: Database,
    adapter: ProviderAdapter | None,
    check: DueCheck,
    now: datetime,
    rng: random.Random,
    not_received_after: float = NOT_RECEIVED_AFTER_SECONDS,
    vault: Vault | None = None,
) -> None:
    """One check, within the attempt's budget whatever the provider answers:
    a failed lookup, or an account nobody can look up any more, counts too."""
    attempt = check.attempt
    started = attempt.call_started_at or attempt.created_at
    settled_by = started + timedelta(seconds=not_received_after)
    try:
        if adapter is None:
            raise ProviderUnavailable(f"no adapter for provider account {attempt.provider!r}")
        found = look_up(adapter, attempt, now, settled_by, _evidence(db, vault, check))
    except ProviderError as exc:
        why = {"provider": attempt.provider, "intent_id": str(attempt.intent_id), "why": str(exc)}
        log.warning("lookup failed", extra=why)
        record_lookup(attempt.provider, "failed")
        with db.transaction() as conn:
            _schedule_next(conn, attempt, now, rng, not_before=now + UNAVAILABLE_RETRY)
        return
    record_lookup(attempt.provider, found.how)
    with db.transaction() as conn:
        if found.observation is not None:
            source = "lookup" if attempt.state is AttemptState.UNKNOWN else "poll"
            # Looked up for this tenant's attempt: it may settle nobody else's.
            apply_observation(conn, found.observation, source, now, tenant_hint=attempt.tenant_id)
        elif found.absent:
            _not_received(conn, attempt, now)
            return
        elif found.how in PROVING and now < settled_by:
            # Silence is no proof yet: a request may still be on its way.
            _reschedule(conn, attempt, settled_by)
            return
        _schedule_next(conn, attempt, now, rng, learnable=found.how != "none")


def _evidence(db: Database, vault: Vault | None, check: DueCheck) -> Evidence:
    attempt, hashed = check.attempt, check.destination_hash

    def destination() -> str | None:
        if vault is None or hashed is None:
            return None
        with db.statements() as conn:
            sealed = ledger.destination_ciphertext(conn, attempt.tenant_id, hashed)
        return vault.decrypt(sealed) if sealed else None

    def known(provider_message_id: str) -> bool:
        with db.statements() as conn:
            return bool(attempts.by_provider_id(conn, attempt.provider, provider_message_id))

    def rivals(since: datetime, until: datetime) -> int:
        if hashed is None:
            return 1  # nothing to compare destinations by: never certain
        with db.statements() as conn:
            return attempts.open_calls_to(conn, attempt, hashed, since - RIVAL_LOOKBACK, until)

    return Evidence(destination, known, rivals)


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


def _schedule_next(
    conn: Conn,
    attempt: Attempt,
    now: datetime,
    rng: random.Random,
    not_before: datetime | None = None,
    *,
    learnable: bool = True,
) -> None:
    """The next check on the frozen schedule, or the end of the budget.

    Where no lookup the provider offers fits the attempt (`learnable`
    False: receipts are all there is), polling on the schedule would learn
    nothing: the checks between now and the schedule's last one are
    counted as spent and only that last one is kept, to end the budget on
    time. Receipts settle the attempt meanwhile, as ever. Under a backlog
    of such attempts, a poller doing those empty checks fell behind the
    ones that can learn something (docs/reliability.md).
    """
    current = attempts.by_number(conn, AttemptRef.of(attempt))
    if current is None or current.state not in STILL_OPEN:
        return  # settled by what we just applied
    intent = ledger.get_intent(conn, attempt.tenant_id, attempt.intent_id)
    assert intent is not None
    schedule = sent_policy(conn, intent).poll_schedule
    base = _schedule_start(current, schedule.give_up_after_seconds)
    following = next_check_at(schedule, base, current.check_count, rng)
    expired = current.checks_expire_at is not None and now >= current.checks_expire_at
    if following is None or expired:
        _exhausted(conn, attempt, intent, now)
        return
    last = schedule.max_checks - 1
    final = None if learnable else next_check_at(schedule, base, last, rng)
    if final is not None and current.check_count < last:
        attempts.reschedule_check(conn, AttemptRef.of(attempt), max(final, now), checks_done=last)
    else:
        _reschedule(conn, attempt, max(following, now, not_before or now))


def _schedule_start(attempt: Attempt, give_up_after_seconds: float) -> datetime:
    """Where the attempt's check schedule counts from: its budget's end less
    the budget, so the schedule moves on with the budget when checks come
    late (store/sql/queries/attempts.sql, `due_checks`)."""
    if attempt.checks_expire_at is None:
        return attempt.accepted_at or attempt.created_at
    return attempt.checks_expire_at - timedelta(seconds=give_up_after_seconds)


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
