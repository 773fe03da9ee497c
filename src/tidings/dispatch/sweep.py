"""The sweeper: deadlines and abandoned leases, found by indexed due times."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from tidings.dispatch.reconcile import recover_leases
from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Intent
from tidings.domain.transitions import Event
from tidings.store import ledger
from tidings.store.database import Database, fetch_all

Conn = psycopg.Connection[Any]


def expire_deadlines(conn: Conn, now: datetime, limit: int = 500) -> int:
    """Past its deadline an intent expires (and its offer is released), even
    mid-send: the worker's later update then finds a newer version and only
    records its attempt."""
    rows = fetch_all(conn, "passed_deadlines", {"now": now, "limit": limit})
    for row in rows:
        intent = Intent.from_row(row)
        try:
            ledger.transition(
                conn,
                intent,
                Event.DEADLINE_PASSED,
                now=now,
                actor="system:sweeper",
                move=ledger.Move(decision_code="DEADLINE_PASSED"),
                detail={"expires_at": intent.expires_at.isoformat() if intent.expires_at else None},
            )
        except StaleTransition:
            continue
    return len(rows)


def sweep(db: Database, now: datetime) -> dict[str, int]:
    with db.transaction() as conn:
        expired = expire_deadlines(conn, now)
    with db.transaction() as conn:
        recovered = recover_leases(conn, now)
    return {"expired": expired, "leases_recovered": recovered}
