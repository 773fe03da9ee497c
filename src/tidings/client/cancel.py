"""Canceling many intents at once: a whole job, or every open intent of an
event class, a recipient or a correlation id (seed 000 cancels a class or a
member).

Each intent moves by the same version-checked transition as a single
cancel (`cancel_intent` below), so the cancellation race rules hold
unchanged: a claim that committed first sends, one that had not is stale.
The work goes in batches, each its own transaction, so canceling a
100,000-recipient job never holds one huge transaction or its row locks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.errors import AlreadyTerminal, InvalidInput, NotFound, StaleTransition
from tidings.domain.intent import Intent
from tidings.domain.transitions import Event
from tidings.store import cancel_many as matching
from tidings.store import ledger
from tidings.store.database import Database

BATCH_SIZE = 500


@dataclass(frozen=True)
class CancelFilter:
    job_id: UUID | None = None
    event_class: str | None = None
    recipient_ref: str | None = None
    correlation_id: str | None = None

    def params(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "event_class": self.event_class,
            "recipient_ref": self.recipient_ref,
            "correlation_id": self.correlation_id,
        }

    def check(self) -> CancelFilter:
        if all(v is None for v in self.params().values()):
            # Never "cancel everything" by leaving the filter out.
            raise InvalidInput(
                "filter", "give at least one of job_id, event_class, recipient_ref, correlation_id"
            )
        return self


@dataclass(frozen=True)
class CancelCounts:
    canceled: int
    already_final: int


def cancel_many(
    db: Database,
    tenant: str,
    which: CancelFilter,
    reason: str,
    now: datetime,
    actor: str,
    batch_size: int = BATCH_SIZE,
) -> CancelCounts:
    which.check()
    with db.transaction() as conn:
        already_final = matching.count_final_matching(conn, tenant, **which.params())
    canceled, after = 0, matching.Position()
    while True:
        with db.transaction() as conn:
            found = matching.open_matching(
                conn, tenant, after=after, limit=batch_size, **which.params()
            )
            for position in found:
                try:
                    cancel_intent(conn, tenant, position.id, reason, now, actor)
                    canceled += 1
                except AlreadyTerminal:  # finished between the read and the move
                    already_final += 1
        if len(found) < batch_size:
            return CancelCounts(canceled, already_final)
        after = found[-1]


# A cancel retries when it loses a race to a worker; each retry re-reads the
# committed state, so a handful always suffices unless something is broken.
CANCEL_RETRIES = 8


def cancel_intent(
    conn: psycopg.Connection[Any],
    tenant: str,
    intent_id: UUID,
    reason: str,
    now: datetime,
    actor: str,
) -> Intent:
    for _ in range(CANCEL_RETRIES):
        intent = ledger.get_intent(conn, tenant, intent_id)
        if intent is None:
            raise NotFound(f"no intent {intent_id}")
        if intent.terminal:
            raise AlreadyTerminal(intent.state.value)
        try:
            move = ledger.Move(cancel_reason=reason)
            return ledger.transition(
                conn,
                intent,
                Event.CANCEL,
                now=now,
                actor=actor,
                move=move,
                detail={"reason": reason},
            )
        except StaleTransition:
            continue
    raise StaleTransition(f"intent {intent_id} kept changing; cancel not applied")
