"""The sweeper's reads: intents past their deadline, leases that expired.

Each comes whole (a batch), by id alone (for a batch that cannot be read
whole) and one by one (dispatch/sweep.py, dispatch/reconcile.py). The moves
themselves go through the ledger (store/ledger.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, fetch_all, fetch_one

Conn = psycopg.Connection[Any]
Ids = list[tuple[str, UUID]]


def passed_deadlines(conn: Conn, now: datetime, limit: int) -> list[Row]:
    return fetch_all(conn, "passed_deadlines", {"now": now, "limit": limit})


def passed_deadline_ids(conn: Conn, now: datetime, limit: int) -> Ids:
    rows = fetch_all(conn, "passed_deadline_ids", {"now": now, "limit": limit})
    return [(r["tenant_id"], r["id"]) for r in rows]


def passed_deadline_one(conn: Conn, tenant_id: str, intent_id: UUID, now: datetime) -> Row | None:
    return fetch_one(
        conn, "passed_deadline_one", {"tenant_id": tenant_id, "id": intent_id, "now": now}
    )


def expired_leases(conn: Conn, now: datetime, limit: int) -> list[Row]:
    return fetch_all(conn, "expired_leases", {"now": now, "limit": limit})


def expired_lease_ids(conn: Conn, now: datetime, limit: int) -> Ids:
    rows = fetch_all(conn, "expired_lease_ids", {"now": now, "limit": limit})
    return [(r["tenant_id"], r["id"]) for r in rows]


def expired_lease_one(conn: Conn, tenant_id: str, intent_id: UUID, now: datetime) -> Row | None:
    return fetch_one(
        conn, "expired_lease_one", {"tenant_id": tenant_id, "id": intent_id, "now": now}
    )
