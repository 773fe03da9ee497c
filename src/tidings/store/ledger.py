"""The intent ledger: create, move and read intents on a caller's connection.

Every function takes the connection it works on, so the same code serves
the caller's own transaction (the outbox), the API and the workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Attempt, Intent, TimelineEntry
from tidings.domain.states import IntentState, is_terminal
from tidings.domain.transitions import Event, next_state
from tidings.store.database import Row, execute, fetch_all, fetch_one, records
from tidings.store.queries import q

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class Move:
    """What a transition changes besides the state."""

    next_due_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    attempts_added: int = 0
    decision_code: str | None = None
    policy_version: str | None = None
    cancel_reason: str | None = None


def ensure_tenant(conn: Conn, tenant_id: str) -> None:
    execute(conn, "ensure_tenant", {"tenant_id": tenant_id, "name": tenant_id})


def store_destination(
    conn: Conn, tenant_id: str, reference: str, channel: str, ciphertext: bytes, country: str | None
) -> None:
    execute(
        conn,
        "store_destination",
        {
            "tenant_id": tenant_id,
            "destination_hash": reference,
            "channel": channel,
            "ciphertext": ciphertext,
            "country": country,
        },
    )


def destination_ciphertext(conn: Conn, tenant_id: str, reference: str) -> bytes | None:
    row = fetch_one(
        conn, "destination_ciphertext", {"tenant_id": tenant_id, "destination_hash": reference}
    )
    return bytes(row["ciphertext"]) if row else None


@dataclass(frozen=True)
class Insert:
    """What `create_intent` did: nothing under a stale choice (`current`
    False); or, under a current one, the new intent, or None when the key
    was taken."""

    current: bool
    intent: Intent | None


def create_intent(conn: Conn, values: Mapping[str, Any]) -> Insert:
    """Insert the intent and its creation audit, only if `policy_version`
    and `newest_revision` are still current (ledger.sql explains)."""
    row = fetch_one(conn, "create_intent", values)
    assert row is not None  # the statement always answers one row
    created = Intent.from_row(row) if row["id"] is not None else None
    return Insert(bool(row["still_current"]), created)


def intent_by_key(conn: Conn, tenant_id: str, key: str) -> Intent | None:
    row = fetch_one(conn, "intent_by_key", {"tenant_id": tenant_id, "idempotency_key": key})
    return Intent.from_row(row) if row else None


def get_intent(
    conn: Conn, tenant_id: str, intent_id: UUID, *, with_attempts: bool = False
) -> Intent | None:
    row = fetch_one(conn, "intent_by_id", {"tenant_id": tenant_id, "id": intent_id})
    if row is None:
        return None
    attempts = attempts_of(conn, tenant_id, intent_id) if with_attempts else ()
    return Intent.from_row(row, attempts)


def attempts_of(conn: Conn, tenant_id: str, intent_id: UUID) -> tuple[Attempt, ...]:
    rows = fetch_all(conn, "attempts_of", {"tenant_id": tenant_id, "id": intent_id})
    return tuple(Attempt.from_row(r) for r in rows)


def provider_retries(conn: Conn, tenant_id: str, intent_id: UUID) -> int:
    """Retryable provider failures recorded for this intent so far."""
    row = fetch_one(conn, "provider_retries", {"tenant_id": tenant_id, "intent_id": intent_id})
    return int(row["count"]) if row else 0


def transition(
    conn: Conn,
    intent: Intent,
    event: Event,
    *,
    now: datetime,
    actor: str,
    move: Move = Move(),
    detail: Mapping[str, Any] | None = None,
) -> Intent:
    """Apply `event` to the intent at exactly the version we read.

    Raises InvalidTransition for a move the table forbids, and
    StaleTransition when the row changed since it was read.
    """
    [moved] = transition_many(conn, [Step(intent, event, actor, move, detail)], now=now)
    if moved is None:
        raise StaleTransition(
            f"intent {intent.id} moved on from version {intent.version} ({intent.state})"
        )
    return moved


@dataclass(frozen=True)
class Step:
    """One intent's move within a batch (see `transition_many`)."""

    intent: Intent
    event: Event
    actor: str
    move: Move = Move()
    detail: Mapping[str, Any] | None = None


def transition_many(conn: Conn, steps: Sequence[Step], *, now: datetime) -> list[Intent | None]:
    """Apply each step at exactly the version read, in one statement.

    The result is aligned with `steps`: the moved intent, or None where the
    row changed since it was read (that step's StaleTransition). A move the
    table forbids raises InvalidTransition before anything is written.
    """
    moved = _moved_rows(conn, steps, now)
    return [None if row is None else Intent.from_row(row) for row in moved]


def move_many(conn: Conn, steps: Sequence[Step], *, now: datetime) -> list[bool]:
    """`transition_many` for a caller that needs only which intents moved:
    reading back each moved intent was a tenth of a worker's time."""
    return [row is not None for row in _moved_rows(conn, steps, now)]


def _moved_rows(conn: Conn, steps: Sequence[Step], now: datetime) -> list[Row | None]:
    if not steps:
        return []
    batch = []
    for step in steps:
        target = next_state(step.intent.state, step.event)
        params = _transition_params(
            step.intent, step.event, target, now, step.actor, step.move, step.detail
        )
        del params["now"]
        batch.append(params)
    rows = fetch_all(conn, "transition_many", {**records(batch), "now": now})
    moved = {(r["tenant_id"], r["id"]): r for r in rows}
    return [moved.get((s.intent.tenant_id, s.intent.id)) for s in steps]


def _transition_params(
    intent: Intent,
    event: Event,
    target: IntentState,
    now: datetime,
    actor: str,
    move: Move,
    detail: Mapping[str, Any] | None,
) -> dict[str, Any]:
    return {
        "tenant_id": intent.tenant_id,
        "id": intent.id,
        "version": intent.version,
        "from_state": intent.state.value,
        "to_state": target.value,
        "event": event.value,
        "terminal": is_terminal(target),
        "now": now,
        "actor": actor,
        "input": dict(detail or {}),
        "next_due_at": move.next_due_at,
        "lease_owner": move.lease_owner,
        "lease_expires_at": move.lease_expires_at,
        "attempts_added": move.attempts_added,
        "decision_code": move.decision_code,
        "policy_version": move.policy_version,
        "cancel_reason": move.cancel_reason,
    }


def timeline(conn: Conn, tenant_id: str, intent_id: UUID) -> list[TimelineEntry]:
    rows = fetch_all(conn, "timeline", {"tenant_id": tenant_id, "id": intent_id})
    return [TimelineEntry(**r) for r in rows]


def intake_context(
    conn: Conn, tenant_id: str, name: str, channel: str, revision: int | None
) -> list[Row]:
    """The current policy and a template's candidates, in one round trip."""
    return fetch_all(
        conn,
        "intake_context",
        {"tenant_id": tenant_id, "name": name, "channel": channel, "revision": revision},
    )


def touch_status(conn: Conn, tenant_id: str, intent_id: UUID, at: datetime) -> None:
    """Note when the intent's delivery status last changed."""
    execute(conn, "touch_status", {"tenant_id": tenant_id, "id": intent_id, "at": at})


def heartbeat(conn: Conn, owner: str, ids: Sequence[UUID], lease_expires_at: datetime) -> int:
    """Extend the leases this owner still holds; returns how many it held."""
    return execute(
        conn,
        "heartbeat",
        {"owner": owner, "ids": ids, "lease_expires_at": lease_expires_at},
    )


def quarantine_intent(
    conn: Conn, tenant_id: str, intent_id: UUID, now: datetime, *, actor: str, error: str
) -> Row | None:
    """Park one claimable intent as failed/UNDECODABLE; None if it was not claimable."""
    return fetch_one(
        conn,
        "quarantine_intent",
        {"tenant_id": tenant_id, "id": intent_id, "now": now, "actor": actor, "error": error},
    )


def insert_job_page(conn: Conn, rows: Iterable[tuple[Any, ...]], excluded_inputs: Any) -> None:
    """A job page's intents, with their transitions and events: COPYed into a
    scratch table (rows in the columns of `copy_staged_intents`), then moved
    in one statement; the decision inputs of the excluded ones ride along as
    one JSON value."""
    conn.execute(q("create_staged_intents"))
    with conn.cursor().copy(q("copy_staged_intents")) as copy:
        for row in rows:
            copy.write_row(row)
    fetch_one(conn, "move_staged_intents", {"inputs": excluded_inputs})
    conn.execute(q("drop_staged_intents"))


def store_job_destinations(conn: Conn, rows: Iterable[tuple[Any, ...]]) -> None:
    """A job's own sealed destinations, each stored once: COPYed into a scratch
    table (rows in the columns of `copy_staged_destinations`), since COPY
    cannot skip the ones already known, then inserted from it."""
    conn.execute(q("create_staged_destinations"))
    with conn.cursor().copy(q("copy_staged_destinations")) as copy:
        for row in rows:
            copy.write_row(row)
    conn.execute(q("store_staged_destinations"))
    conn.execute(q("drop_staged_destinations"))


def store_upload_destinations(
    conn: Conn, tenant_id: str, upload_id: UUID, job_id: UUID, now: datetime
) -> None:
    """An audience upload's sealed destinations, kept for the job it becomes."""
    execute(
        conn,
        "store_upload_destinations",
        {"tenant_id": tenant_id, "id": upload_id, "job_id": job_id, "now": now},
    )
