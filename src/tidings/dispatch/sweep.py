"""The sweeper: deadlines and abandoned leases, found by indexed due times."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.dispatch.quarantine import each_alone
from tidings.dispatch.reconcile import recover_leases, recover_one
from tidings.domain.errors import StaleTransition
from tidings.domain.intent import Intent
from tidings.domain.transitions import Event
from tidings.store import ledger, sweeps
from tidings.store.database import Database, Row
from tidings.store.isolation import UNREADABLE, quarantine_sending

Conn = psycopg.Connection[Any]
SWEEPER = "system:sweeper"


def expire_deadlines(conn: Conn, now: datetime, limit: int = 500) -> int:
    """Past its deadline an intent expires (and its offer is released), even
    mid-send: the worker's later update then finds a newer version and only
    records its attempt."""
    rows = sweeps.passed_deadlines(conn, now, limit)
    for row in rows:
        _expire(conn, row, now)
    return len(rows)


def expire_row_by_row(db: Database, now: datetime, limit: int = 500) -> int:
    """`expire_deadlines` for a batch that could not be read whole: each
    intent alone, an unreadable one quarantined (dispatch/quarantine.py)."""
    with db.transaction() as conn:
        ids = sweeps.passed_deadline_ids(conn, now, limit)

    def one(conn: Conn, tenant_id: str, intent_id: UUID) -> None:
        row = sweeps.passed_deadline_one(conn, tenant_id, intent_id, now)
        if row is not None:
            _expire(conn, row, now)

    each_alone(db, ids, one, now, SWEEPER)
    return len(ids)


def _expire(conn: Conn, row: Row, now: datetime) -> None:
    intent = Intent.from_row(row)
    with contextlib.suppress(StaleTransition):  # someone moved it first
        ledger.transition(
            conn,
            intent,
            Event.DEADLINE_PASSED,
            now=now,
            actor=SWEEPER,
            move=ledger.Move(decision_code="DEADLINE_PASSED"),
            detail={"expires_at": intent.expires_at.isoformat() if intent.expires_at else None},
        )


def sweep(db: Database, now: datetime) -> dict[str, int]:
    try:
        with db.transaction() as conn:
            expired = expire_deadlines(conn, now)
    except UNREADABLE:  # one row must not stop every tenant's deadlines
        expired = expire_row_by_row(db, now)
    try:
        with db.transaction() as conn:
            recovered = recover_leases(conn, now)
    except UNREADABLE:  # a row that cannot even be read: each alone
        recovered = recover_row_by_row(db, now)
    return {"expired": expired, "leases_recovered": recovered}


def recover_row_by_row(db: Database, now: datetime, limit: int = 100) -> int:
    """`recover_leases` for a batch that could not be read whole: each
    intent in its own transaction, one that cannot be read quarantined."""
    with db.transaction() as conn:
        ids = sweeps.expired_lease_ids(conn, now, limit)
    recovered = 0
    for tenant_id, intent_id in ids:
        try:
            with db.transaction() as conn:
                row = sweeps.expired_lease_one(conn, tenant_id, intent_id, now)
                if row is not None:
                    recovered += recover_one(conn, row, now)
        except UNREADABLE as exc:
            with db.transaction() as conn:
                quarantine_sending(conn, tenant_id, intent_id, now, exc, SWEEPER)
            recovered += 1
    return recovered
