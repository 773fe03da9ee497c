"""A tenant's event webhook: its endpoint and secret, and the cursor of
what it has been pushed (dispatch/event_push.py does the pushing)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import Row, execute, fetch_all
from tidings.store.events import Cursor

Conn = psycopg.Connection[Any]


def set_webhook(conn: Conn, tenant_id: str, url: str, secret: bytes, now: datetime) -> None:
    """Point the tenant's pushes at `url`; `secret` is already encrypted."""
    execute(
        conn,
        "set_event_webhook",
        {"tenant_id": tenant_id, "url": url, "secret": secret, "now": now},
    )


def delete_webhook(conn: Conn, tenant_id: str) -> None:
    execute(conn, "delete_event_webhook", {"tenant_id": tenant_id})


def lease_due(conn: Conn, now: datetime, lease_until: datetime, limit: int) -> list[Row]:
    """Up to `limit` endpoints due now, leased until `lease_until`."""
    params = {"now": now, "lease_until": lease_until, "limit": limit}
    return fetch_all(conn, "due_event_webhooks", params)


def idle(conn: Conn, tenant_id: str, next_at: datetime) -> None:
    """Nothing to push: look again at `next_at`."""
    execute(conn, "event_webhook_idle", {"tenant_id": tenant_id, "next": next_at})


def delivered(conn: Conn, tenant_id: str, cursor: Cursor, now: datetime, next_at: datetime) -> None:
    """A page went through: move the cursor past it."""
    execute(
        conn,
        "event_webhook_delivered",
        {
            "tenant_id": tenant_id,
            "txid": str(cursor.txid),
            "id": cursor.id,
            "now": now,
            "next": next_at,
        },
    )


def failed(conn: Conn, tenant_id: str, error: str, now: datetime, next_at: datetime) -> None:
    """A push failed: keep the cursor, note why, try again at `next_at`."""
    execute(
        conn,
        "event_webhook_failed",
        {"tenant_id": tenant_id, "error": error, "now": now, "next": next_at},
    )
