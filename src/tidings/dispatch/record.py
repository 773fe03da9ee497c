"""Recording what a provider call returned, after the call.

The attempt row takes the fact whatever happened to the intent meanwhile;
the intent moves only if it is still at the version the claim produced. A
cancel or an expiry that committed during the call wins: the attempt shows
the acceptance, the intent stays canceled or expired (R000.6 in
docs/requirements.md).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import psycopg

from tidings.dispatch.claim import Claimed
from tidings.dispatch.feedback import learn_from_rejection
from tidings.dispatch.observe import carry_settled_attempt, recording_provider_ids, rematch
from tidings.domain.attempts import WORKER_SETTLES_FROM
from tidings.domain.errors import StaleTransition
from tidings.domain.limits import LimitCheck
from tidings.domain.schedules import next_check_at, retry_delay
from tidings.domain.states import AttemptState
from tidings.domain.transitions import Event
from tidings.observability.process_metrics import record_rate_limit_wait
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.store import attempts, ledger
from tidings.store.attempts import AttemptRef
from tidings.store.isolation import FAILS_ALONE, POLICY_UNREADABLE, note

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.dispatch")

# How long after an ambiguous call to look the message up: long enough for
# a request still in flight to land at the provider.
RECONCILE_GRACE_SECONDS = 5.0
# An attempt whose call never started because its intent moved first.
WITHDRAWN = "WITHDRAWN"


class IntentOutcome(StrEnum):
    """What recording did to the intent: it moved at the version the claim
    produced, or had moved on meanwhile (a cancel, an expiry) and kept its state."""

    MOVED = "moved"
    STALE = "stale"


def record_result(
    conn: Conn,
    claimed: Claimed,
    result: SendResult,
    now: datetime,
    rng: random.Random,
    *,
    segments: int | None = None,
    encoding: str | None = None,
) -> IntentOutcome:
    """Store the outcome; returns what happened to the intent."""
    if isinstance(result, Accepted):
        return _accepted_many(conn, [Sent(claimed, result, segments, encoding)], now, rng)[0]
    if segments is not None:
        attempts.record_segments(conn, _ref(claimed), segments, encoding)
    if result.response_body:
        attempts.record_response_body(conn, _ref(claimed), result.response_body)
    if isinstance(result, Retryable):
        return _deferred(conn, claimed, result, now, rng)
    if isinstance(result, Rejected):
        _settle(conn, claimed, AttemptState.FAILED, result.code.value, now)
        learn_from_rejection(conn, claimed, result, now)
        return _move(
            conn,
            claimed,
            Event.PROVIDER_REJECTED,
            now,
            ledger.Move(decision_code=result.code.value),
            {
                "code": result.code.value,
                "http_status": result.http_status,
                "provider_code": result.provider_code,
            },
        )
    return _indeterminate(conn, claimed, result, now)


@dataclass(frozen=True)
class Sent:
    """A provider call's answer, waiting to be recorded."""

    claimed: Claimed
    result: SendResult
    segments: int | None = None
    encoding: str | None = None
    # Its back-off answer already paused the account (dispatch/backoff.py,
    # `Pauses.note_at_once`): the group's record must not count it again.
    pause_noted: bool = False


def record_results(
    conn: Conn, sent: Sequence[Sent], now: datetime, rng: random.Random
) -> list[IntentOutcome]:
    """Store many outcomes in one transaction; aligned with `sent`.

    Acceptances, the common answer, take one statement for their attempts
    and one for their intents whatever the batch size; the rarer answers go
    one by one through `record_result`.
    """
    outcomes: dict[int, IntentOutcome] = {}
    accepted = [(i, s) for i, s in enumerate(sent) if isinstance(s.result, Accepted)]
    for i, item in enumerate(sent):
        if not isinstance(item.result, Accepted):
            outcomes[i] = record_result(
                conn,
                item.claimed,
                item.result,
                now,
                rng,
                segments=item.segments,
                encoding=item.encoding,
            )
    for (i, _), outcome in zip(
        accepted, _accepted_many(conn, [s for _, s in accepted], now, rng), strict=True
    ):
        outcomes[i] = outcome
    return [outcomes[i] for i in range(len(sent))]


def _accepted_many(
    conn: Conn, sent: Sequence[Sent], now: datetime, rng: random.Random
) -> list[IntentOutcome]:
    if not sent:
        return []
    acceptances = []
    for item in sent:
        first_check, give_up = _poll_plan(conn, item.claimed, now, rng)
        acceptances.append(
            attempts.Acceptance(
                _ref(item.claimed),
                _message_id(item),
                next_check_at=first_check,
                checks_expire_at=give_up,
                segments=item.segments,
                encoding=item.encoding,
            )
        )
    recording_provider_ids(conn, [(item.claimed.provider, _message_id(item)) for item in sent])
    settled = attempts.accept_many(conn, acceptances, now)
    steps = [
        ledger.Step(
            item.claimed.intent,
            Event.PROVIDER_ACCEPTED,
            f"worker:{item.claimed.intent.lease_owner}",
            ledger.Move(),
            {"provider_message_id": _message_id(item), "attempt": item.claimed.n},
        )
        for item in sent
    ]
    moved = ledger.move_many(conn, steps, now=now)
    outcomes = []
    for item, intent_moved in zip(sent, moved, strict=True):
        c = item.claimed
        accepted = settled.get(_ref(c))
        if accepted is None and item.segments is not None:  # the cost is a fact all the same
            attempts.record_segments(conn, _ref(c), item.segments, item.encoding)
        if accepted is None or accepted.has_unmatched:
            rematch(conn, c.provider, _message_id(item), now)
        if intent_moved and accepted is None:  # a receipt settled the attempt first
            _carry(conn, c, now)
        outcomes.append(IntentOutcome.MOVED if intent_moved else IntentOutcome.STALE)
    return outcomes


def _poll_plan(
    conn: Conn, claimed: Claimed, now: datetime, rng: random.Random | None
) -> tuple[datetime | None, datetime | None]:
    """The first status check and the give-up time of an accepted attempt.

    The policy's bounds keep this arithmetic safe (domain/policy_bounds.py);
    should it still fail for one tenant's schedule, the acceptance (a fact:
    the provider has the message) is recorded all the same, without a poll
    plan, receipts alone settling it, and the tenant is alerted. One
    batch's recording never fails for everyone on one tenant's numbers."""
    schedule = claimed.policy.poll_schedule
    try:
        first = None if rng is None else next_check_at(schedule, now, 0, rng)
        return first, now + timedelta(seconds=schedule.give_up_after_seconds)
    except FAILS_ALONE as exc:
        with conn.transaction():
            note(conn, claimed.intent.tenant_id, "record", f"intent:{claimed.intent.id}", exc, now,
                 code=POLICY_UNREADABLE)  # fmt: skip
        return None, None


def _message_id(item: Sent) -> str:
    assert isinstance(item.result, Accepted)
    return item.result.provider_message_id


def record_limit_deferred(
    conn: Conn, claimed: Claimed, room: LimitCheck, now: datetime
) -> IntentOutcome:
    """The rendered message would break a spend limit: nothing was sent."""
    code = "SPEND_LIMIT"
    _settle(conn, claimed, AttemptState.FAILED, code, now)
    if room.next_eligible_at is None:  # larger than the whole limit: waiting cannot help
        return _move(
            conn,
            claimed,
            Event.PREPARE_FAILED,
            now,
            ledger.Move(decision_code=code),
            {"code": code},
        )
    move = ledger.Move(next_due_at=room.next_eligible_at, decision_code=code)
    detail = {"code": code, "key": room.key.key if room.key else None}
    return _move(conn, claimed, Event.LIMIT_DEFERRED, now, move, detail)


def record_released(
    conn: Conn,
    claimed: Claimed,
    now: datetime,
    *,
    code: str = "WORKER_STOPPED",
    due_at: datetime | None = None,
) -> IntentOutcome:
    """A claim let go before its call started: by a stopping worker, or by
    one that found a kill switch covering it, its deadline passed or its
    provider account paused. Due again (at `due_at`, else now), nothing sent."""
    _settle(conn, claimed, AttemptState.FAILED, code, now)
    move = ledger.Move(next_due_at=due_at or now, decision_code=code)
    return _move(conn, claimed, Event.RELEASED, now, move, {"code": code})


def record_withdrawn(conn: Conn, claimed: Claimed, now: datetime) -> IntentOutcome:
    """The intent moved after the claim and before the call (a cancel, an
    expiry, a lease recovered): the call never started. The attempt says
    so; the intent is someone else's now."""
    _settle(conn, claimed, AttemptState.FAILED, WITHDRAWN, now)
    return IntentOutcome.STALE


def record_prepare_failure(conn: Conn, claimed: Claimed, code: str, now: datetime) -> IntentOutcome:
    _settle(conn, claimed, AttemptState.FAILED, code, now)
    return _move(
        conn, claimed, Event.PREPARE_FAILED, now, ledger.Move(decision_code=code), {"code": code}
    )


def _carry(conn: Conn, claimed: Claimed, now: datetime) -> None:
    intent = ledger.get_intent(conn, claimed.intent.tenant_id, claimed.intent.id)
    if intent is not None:
        carry_settled_attempt(conn, intent, now)


def _deferred(
    conn: Conn, claimed: Claimed, result: Retryable, now: datetime, rng: random.Random
) -> IntentOutcome:
    _settle(conn, claimed, AttemptState.FAILED, result.code.value, now)
    intent = claimed.intent
    failures = ledger.provider_retries(conn, intent.tenant_id, intent.id) + 1
    if claimed.policy.retry.exhausted(failures):
        ended = {"code": result.code.value, "failures": failures, "http_status": result.http_status}
        move = ledger.Move(decision_code=result.code.value)
        return _move(conn, claimed, Event.RETRIES_EXHAUSTED, now, move, ended)
    remaining = (intent.expires_at - now).total_seconds() if intent.expires_at else None
    delay = retry_delay(result.retry_after_seconds, claimed.policy.retry, claimed.n, rng, remaining)
    if delay is None:  # no useful validity left: the deadline sweep expires it
        delay = remaining or 0.0
    if result.code is RejectCode.RATE_LIMITED:
        record_rate_limit_wait("provider", delay)
    due = now + timedelta(seconds=delay)
    move = ledger.Move(next_due_at=due, decision_code=result.code.value)
    detail = {
        "code": result.code.value,
        "retry_after": result.retry_after_seconds,
        "delay": round(delay, 3),
        "failures": failures,
        "next_attempt_at": due.isoformat(),
    }
    return _move(conn, claimed, Event.PROVIDER_DEFERRED, now, move, detail)


def _indeterminate(
    conn: Conn, claimed: Claimed, result: Indeterminate, now: datetime
) -> IntentOutcome:
    check_at = now + timedelta(seconds=RECONCILE_GRACE_SECONDS)
    marked = _settle(
        conn,
        claimed,
        AttemptState.UNKNOWN,
        result.code.value,
        now,
        next_check=check_at,
        expire=_poll_plan(conn, claimed, now, None)[1],
    )
    moved = _move(
        conn,
        claimed,
        Event.OUTCOME_UNKNOWN,
        now,
        ledger.Move(decision_code=result.code.value),
        {"code": result.code.value, "http_status": result.http_status},
    )
    if moved is IntentOutcome.MOVED and not marked:  # a receipt settled the attempt first
        _carry(conn, claimed, now)
    return moved


def _settle(
    conn: Conn,
    claimed: Claimed,
    state: AttemptState,
    code: str | None,
    now: datetime,
    *,
    next_check: datetime | None = None,
    expire: datetime | None = None,
) -> bool:
    return attempts.settle(
        conn,
        _ref(claimed),
        state,
        code=code,
        now=now,
        from_states=WORKER_SETTLES_FROM,
        next_check_at=next_check,
        checks_expire_at=expire,
    )


def _move(
    conn: Conn,
    claimed: Claimed,
    event: Event,
    now: datetime,
    move: ledger.Move,
    detail: dict[str, Any],
) -> IntentOutcome:
    try:
        ledger.transition(
            conn,
            claimed.intent,
            event,
            now=now,
            actor=f"worker:{claimed.intent.lease_owner}",
            move=move,
            detail=detail,
        )
    except StaleTransition:
        return IntentOutcome.STALE
    return IntentOutcome.MOVED


def _ref(claimed: Claimed) -> AttemptRef:
    return AttemptRef(claimed.intent.tenant_id, claimed.intent.id, claimed.n)
