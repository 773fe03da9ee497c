"""Rows a worker cannot read, parked one at a time so their batch goes on.

Claims and the deadline sweep read many tenants' rows in one statement. A
single row Python cannot hold (a time past year 9999, consent evidence
whose time cannot be parsed, JSON nested past the recursion limit) would
fail the whole statement, every round, for every tenant. The
bounds in domain/moments.py and the database's CHECK constraints keep such
rows out; this is the second line for any that get in around them.

When a batch cannot be read whole, it is read again by id only (ids always
decode), and each row is handled in its own transaction. A row that fails
alone is quarantined: a claimable intent moves to `failed` with the stable
code UNDECODABLE (one statement that reads nothing back), is counted by
`tidings_quarantined_intents_total` and raises the `quarantined` alert. A
claimed intent whose message cannot be built for the same reasons fails
with UNRENDERABLE. Nothing is sent for either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

import psycopg

from tidings.dispatch.claim import Claimed, ClaimRequest, claim_batch
from tidings.dispatch.gate import RecipientFacts
from tidings.dispatch.message import UNRENDERABLE
from tidings.store import claims, ledger
from tidings.store.database import Database
from tidings.store.isolation import UNREADABLE

log = logging.getLogger("tidings.quarantine")

UNDECODABLE = "UNDECODABLE"
QUARANTINE_CODES = (UNDECODABLE, UNRENDERABLE)


T = TypeVar("T")


def claim_row_by_row(
    db: Database, request: ClaimRequest, now: datetime, facts: RecipientFacts
) -> list[Claimed]:
    """The batch `claim_batch` could not read whole, one intent per transaction."""
    with db.transaction() as conn:
        ids = claims.due_ids(
            conn,
            channel=request.channel,
            now=now,
            limit=request.limit,
            account=request.provider,
            lanes=request.lanes,
        )

    def one(conn: psycopg.Connection[Any], tenant_id: str, intent_id: UUID) -> list[Claimed]:
        return claim_batch(conn, request, now, facts, only=(tenant_id, intent_id))

    claimed: list[Claimed] = []
    for found in each_alone(db, ids, one, now, f"worker:{request.owner}"):
        claimed.extend(found or [])
    return claimed


def each_alone(
    db: Database,
    ids: list[tuple[str, UUID]],
    work: Callable[[psycopg.Connection[Any], str, UUID], T],
    now: datetime,
    actor: str,
) -> list[T | None]:
    """`work` for each id in its own transaction; an unreadable one is quarantined."""
    results: list[T | None] = []
    for tenant_id, intent_id in ids:
        try:
            with db.transaction() as conn:
                results.append(work(conn, tenant_id, intent_id))
        except UNREADABLE as exc:
            quarantine(db, tenant_id, intent_id, now, actor=actor, error=exc)
            results.append(None)
    return results


def quarantine(
    db: Database,
    tenant_id: str,
    intent_id: UUID,
    now: datetime,
    *,
    actor: str,
    error: BaseException,
) -> bool:
    """Park one claimable intent as failed/UNDECODABLE; False if it was not claimable."""
    with db.transaction() as conn:
        # The kind of error only: its message may quote the value itself.
        moved = ledger.quarantine_intent(
            conn, tenant_id, intent_id, now, actor=actor, error=type(error).__name__
        )
    extra = {"tenant_id": tenant_id, "intent_id": str(intent_id), "error": type(error).__name__}
    if moved is None:
        log.warning("unreadable intent left as it is (not claimable)", extra=extra)
        return False
    log.error("intent quarantined: %s", UNDECODABLE, extra=extra)
    return True
