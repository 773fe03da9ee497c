"""The claim: due intents of one channel, locked for this worker's batch.

The one place the claim's SQL is named (dispatch/claim.py decides what to do
with what it returns; the moves go through store/ledger.py). A claim is one
round trip: the row carries what the gate and the send need.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class Lanes:
    """How a claim shares its batch (docs/concepts/lanes.md): the most single
    intents may take, and how near a job intent's deadline puts it first."""

    urgent_limit: int
    horizon_seconds: float


def _params(channel: str, now: datetime, limit: int, account: str, lanes: Lanes) -> dict[str, Any]:
    return {
        "channel": channel,
        "now": now,
        "limit": limit,
        "account": account,
        "urgent_limit": lanes.urgent_limit,
        "horizon": lanes.horizon_seconds,
    }


def due(
    conn: Conn, *, channel: str, now: datetime, limit: int, account: str, lanes: Lanes
) -> list[Row]:
    """The due batch, taken by lane (sql/fragments/due_lanes.sql) and locked
    (SKIP LOCKED: workers share the lanes), in the order to gate it."""
    _without_jit(conn)
    return fetch_all(conn, "claim_due", _params(channel, now, limit, account, lanes))


def one(
    conn: Conn,
    tenant_id: str,
    intent_id: UUID,
    *,
    channel: str,
    now: datetime,
    limit: int,
    account: str,
) -> list[Row]:
    """That one intent, locked, if it is due (a batch claimed row by row)."""
    params = {
        **_params(channel, now, limit, account, Lanes(0, 0.0)),
        "tenant_id": tenant_id,
        "id": intent_id,
    }
    _without_jit(conn)
    return fetch_all(conn, "claim_one", params)


def due_ids(
    conn: Conn, *, channel: str, now: datetime, limit: int, account: str, lanes: Lanes
) -> list[tuple[str, UUID]]:
    """What `due` would take, by id alone: no column a worker might fail to decode."""
    _without_jit(conn)
    rows = fetch_all(conn, "claim_due_ids", _params(channel, now, limit, account, lanes))
    return [(r["tenant_id"], r["id"]) for r in rows]


def _without_jit(conn: Conn) -> None:
    """No JIT for the rest of the claim's transaction (claims.sql says why)."""
    fetch_one(conn, "claim_without_jit", {})
