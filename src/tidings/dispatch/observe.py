"""Applying observations: append-only, deduplicated, monotonic.

An observation is stored once per provider event (its dedupe key); a
replay changes nothing. It may move its attempt only forward, and it moves
the intent only where the transition table allows: a late receipt after a
cancel updates the attempt, never the business outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from tidings.dispatch.boundaries import intent_context, note_receipt, receipt_span
from tidings.dispatch.feedback import learn
from tidings.domain.attempts import STILL_OPEN
from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Attempt, Intent
from tidings.domain.states import AttemptState, IntentState
from tidings.domain.transitions import Event, allowed, attempt_advances, on_undelivered
from tidings.providers.outcomes import Observation, ObservedStatus
from tidings.store import attempts, ledger
from tidings.store import observations as observation_store
from tidings.store.attempts import AttemptRef

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.observations")

_ATTEMPT_STATE = {
    ObservedStatus.accepted: AttemptState.ACCEPTED,
    ObservedStatus.delivered: AttemptState.DELIVERED,
    ObservedStatus.undelivered: AttemptState.UNDELIVERED,
    ObservedStatus.failed: AttemptState.FAILED,
}


def find_attempt(conn: Conn, obs: Observation, tenant: str | None = None) -> Attempt | None:
    """The one attempt this observation reports on, or None.

    Matched only among the attempts sent through the observation's own
    provider (account), by the reference of ours it echoes or by the
    provider's message id; a reference or id naming two attempts names none,
    and so do a reference and an id naming different ones. When the caller
    knows whose observation this is (`tenant`), another tenant's attempt is
    never returned: one tenant's receipts cannot land on another's intent.
    """
    by_reference = by_message_id = None
    if obs.attempt_key:
        by_reference = _only(attempts.by_reference(conn, obs.attempt_key, obs.provider))
    if obs.provider_message_id:
        by_message_id = _only(attempts.by_provider_id(conn, obs.provider, obs.provider_message_id))
    if by_reference and by_message_id and _identity(by_reference) != _identity(by_message_id):
        log.warning("observation names two attempts", extra={"provider": obs.provider})
        return None
    row = by_reference or by_message_id
    if row is None or (tenant is not None and row["tenant_id"] != tenant):
        return None
    return Attempt.from_row(row)


def _only(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return rows[0] if len(rows) == 1 else None


def _identity(row: dict[str, Any]) -> tuple[str, Any, int]:
    return row["tenant_id"], row["intent_id"], row["n"]


def apply_received(
    conn: Conn, observations: Sequence[Observation], source: str, now: datetime
) -> list[str]:
    """Store and apply what a provider pushed to us (a webhook's events).

    A receipt naming only a provider id can overtake the worker's record of
    that id: seen from here the id is on no attempt, and the record has
    already looked for early receipts. So a receipt whose id no attempt
    shows first waits for any record writing it (`provider_ids_recording`),
    then looks again; without that it was kept unmatched for good.
    """
    unseen = [o for o in observations if o.provider_message_id and find_attempt(conn, o) is None]
    if unseen:
        observation_store.note_unseen(conn, *_id_pairs(unseen))
    return [apply_observation(conn, obs, source, now) for obs in observations]


def recording_provider_ids(conn: Conn, ids: Sequence[tuple[str, str]]) -> None:
    """Before a worker writes the provider ids its calls got, as (provider, id)."""
    if ids:
        providers, names = zip(*ids, strict=True)
        observation_store.wait_for_recording(conn, providers, names)


def _id_pairs(unseen: Sequence[Observation]) -> tuple[list[str], list[str]]:
    return [o.provider for o in unseen], [o.provider_message_id or "" for o in unseen]


def apply_observation(
    conn: Conn, obs: Observation, source: str, now: datetime, tenant_hint: str | None = None
) -> str:
    """Store and apply one observation; returns its effect for the record.

    `tenant_hint` is whose observation this is when the caller knows it (a
    lookup made for one tenant's attempt): it then matches only that
    tenant's attempts, and is the tenant an unmatched one is kept under.
    """
    with receipt_span(obs, source) as span:
        attempt, effect = _store_and_apply(conn, obs, source, now, tenant_hint)
        note_receipt(span, attempt, effect)
    return effect


def _store_and_apply(
    conn: Conn, obs: Observation, source: str, now: datetime, tenant_hint: str | None
) -> tuple[Attempt | None, str]:
    attempt = find_attempt(conn, obs, tenant_hint)
    # Unmatched observations are kept too (tenant unknown yet: ''), apart,
    # and moved to the attempt's when its provider id is recorded.
    tenant = attempt.tenant_id if attempt else (tenant_hint or "")
    row = _row(obs, attempt, tenant, source, now)
    stored = observation_store.record(conn, row, matched=attempt is not None)
    if stored is None:
        return attempt, "duplicate"
    effect, intent = "unmatched", None
    if attempt:
        effect, intent = _apply(conn, attempt, obs, now)
        learn(conn, attempt, obs, now)
    _log_applied(conn, obs, attempt, intent, source, effect)
    observation_store.note_effect(
        conn, tenant, row["intent_id"], stored["id"], effect, matched=attempt is not None
    )
    return attempt, effect


def rematch(conn: Conn, provider: str, provider_message_id: str, now: datetime) -> int:
    """Apply observations that arrived before the attempt knew this provider id."""
    rows = observation_store.unmatched_for(conn, provider, provider_message_id)
    for row in rows:
        obs = _from_row(row)
        attempt = find_attempt(conn, obs, row["tenant_id"] or None)
        if attempt is None:
            continue
        with receipt_span(obs, "rematch") as span:
            effect, _ = _apply(conn, attempt, obs, now)
            learn(conn, attempt, obs, now)
            note_receipt(span, attempt, effect)
        observation_store.matched(
            conn,
            tenant_id=attempt.tenant_id,
            intent_id=attempt.intent_id,
            attempt_n=attempt.n,
            channel=attempt.channel,
            effect=effect,
            old_tenant_id=row["tenant_id"],
            id=row["id"],
        )
    return len(rows)


def _from_row(row: dict[str, Any]) -> Observation:
    return Observation(
        provider=row["provider"],
        provider_message_id=row["provider_message_id"],
        attempt_key=None,
        status=ObservedStatus(row["status"]),
        code=row["code"],
        raw_status=row["raw_status"] or "",
        occurred_at=row["occurred_at"],
        dedupe_key=row["dedupe_key"],
        raw=row["raw"],
    )


def _log_applied(
    conn: Conn,
    obs: Observation,
    attempt: Attempt | None,
    intent: Intent | None,
    source: str,
    effect: str,
) -> None:
    """The receipt boundary (R002.10): a matched observation's line carries
    its intent's fields, read here when applying it did not need them."""
    if not log.isEnabledFor(logging.INFO):
        return
    if attempt is not None and intent is None:
        intent = ledger.get_intent(conn, attempt.tenant_id, attempt.intent_id)
    extra = {
        "provider": obs.provider,
        "provider_message_id": obs.provider_message_id,
        "status": obs.status.value,
        "source": source,
        "effect": effect,
    }
    if intent is None:
        log.info("observation applied", extra=extra)
        return
    key = attempt.attempt_key if attempt else None
    with intent_context(intent, provider=obs.provider, attempt_key=key):
        log.info("observation applied", extra=extra)


def _apply(
    conn: Conn, attempt: Attempt, obs: Observation, now: datetime
) -> tuple[str, Intent | None]:
    """The effect, and the intent when it was read to settle it."""
    target = _ATTEMPT_STATE.get(obs.status)
    if target is None or not attempt_advances(attempt.state, target):
        return "no_change", None
    _advance_attempt(conn, attempt, target, obs, now)
    at = obs.occurred_at or now
    ledger.touch_status(conn, attempt.tenant_id, attempt.intent_id, at)
    intent = ledger.get_intent(conn, attempt.tenant_id, attempt.intent_id)
    assert intent is not None
    return settle_intent(conn, intent, attempt, target, obs, now), intent


def carry_settled_attempt(conn: Conn, intent: Intent, now: datetime) -> None:
    """A receipt reached the current attempt while the intent was `sending`
    (it could not move the intent then): what it proved settles the intent
    now, instead of leaving it waiting for a lookup nobody scheduled."""
    attempt = attempts.by_number(
        conn, AttemptRef(intent.tenant_id, intent.id, intent.attempt_count)
    )
    if attempt is None or attempt.state in (AttemptState.SENDING, AttemptState.UNKNOWN):
        return
    settle_intent(conn, intent, attempt, attempt.state, None, now)


def settle_intent(
    conn: Conn,
    intent: Intent,
    attempt: Attempt,
    target: AttemptState,
    obs: Observation | None,
    now: datetime,
) -> str:
    """Move the intent as far as what its attempt now shows allows."""
    event = _intent_event(conn, intent, attempt, target)
    if event is None or not allowed(intent.state, event):
        return "attempt_only"
    code = obs.code if obs else attempt.code
    try:
        ledger.transition(
            conn,
            intent,
            event,
            now=now,
            actor=f"provider:{obs.provider}" if obs else "system:reconciler",
            move=ledger.Move(next_due_at=now, decision_code=code),
            detail={"attempt": attempt.n, "status": target.value, "code": code},
        )
    except StaleTransition:
        return "attempt_only"
    return f"intent_{event.value}"


def _advance_attempt(
    conn: Conn, attempt: Attempt, target: AttemptState, obs: Observation, now: datetime
) -> None:
    ref = AttemptRef.of(attempt)
    if target is AttemptState.ACCEPTED:
        attempts.accept(
            conn,
            ref,
            obs.provider_message_id or attempt.provider_message_id,
            now,
            next_check_at=attempt.next_check_at or now,
            checks_expire_at=attempt.checks_expire_at,
        )
        return
    attempts.settle(
        conn,
        ref,
        target,
        code=obs.code,
        now=now,
        from_states=STILL_OPEN,
        provider_message_id=obs.provider_message_id,
    )


def _intent_event(
    conn: Conn, intent: Intent, attempt: Attempt, target: AttemptState
) -> Event | None:
    if target is AttemptState.DELIVERED:
        return Event.DELIVERED  # any attempt's delivery settles the business outcome
    if attempt.n != intent.attempt_count:
        return None  # an older attempt's bad news changes nothing now
    if target is AttemptState.ACCEPTED:
        return Event.PROVIDER_ACCEPTED if intent.state is IntentState.RECONCILING else None
    if target is AttemptState.FAILED:
        return Event.DELIVERY_FAILED
    return on_undelivered(
        intent.resend_budget, attempts.reached_provider(conn, intent.tenant_id, intent.id)
    )


def _row(
    obs: Observation, attempt: Attempt | None, tenant: str, source: str, now: datetime
) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "provider": obs.provider,
        "dedupe_key": obs.dedupe_key,
        "intent_id": attempt.intent_id if attempt else None,
        "attempt_n": attempt.n if attempt else None,
        "channel": attempt.channel if attempt else None,
        "provider_message_id": obs.provider_message_id,
        "status": obs.status.value,
        "code": obs.code,
        "raw_status": obs.raw_status,
        "source": source,
        "occurred_at": obs.occurred_at,
        "now": now,
        "raw": dict(obs.raw),
    }
