"""Alerts and the sweeper's rounds: the one writer of `alerts` and
`alert_rounds` (alerts.sql).

`observability/alerts/` decides what holds; here it is stored, announced
and taken in turns. Rows come back as they are stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def try_lock(conn: Conn, lock: int) -> bool:
    """The transaction's advisory lock, or False when another worker holds it."""
    row = fetch_one(conn, "alerts_lock", {"lock": lock})
    return bool(row and row["locked"])


def claim_round(conn: Conn, scope: str, now: datetime, every: float, spacing: float) -> bool:
    """Take the periodic round of `scope` if it is due (see alerts.sql)."""
    params = {"scope": scope, "now": now, "every": every, "spacing": spacing}
    return fetch_one(conn, "alert_round_claim", params) is not None


def record_round_cost(conn: Conn, scope: str, took: float) -> None:
    execute(conn, "alert_round_cost", {"scope": scope, "took": took})


def record_failed_round(conn: Conn, scope: str, now: datetime, every: float, took: float) -> None:
    """Count a round whose scans failed, with what it took."""
    execute(conn, "alert_round_failed", {"scope": scope, "now": now, "every": every, "took": took})


def open_alerts(conn: Conn) -> list[Row]:
    """Every tenant's unresolved alerts."""
    return fetch_all(conn, "alerts_open_all", {})


def open_alert(
    conn: Conn,
    *,
    tenant_id: str,
    alert_id: UUID,
    key: str,
    condition: str,
    severity: str,
    summary: str,
    details: dict[str, Any],
    now: datetime,
) -> Row | None:
    """The new alert's row, or None when one with `key` is already open."""
    return fetch_one(
        conn,
        "alert_open",
        {
            "tenant_id": tenant_id,
            "key": key,
            "condition": condition,
            "severity": severity,
            "summary": summary,
            "details": details,
            "now": now,
            "id": alert_id,
        },
    )


def update_alert(
    conn: Conn,
    *,
    tenant_id: str,
    alert_id: UUID,
    severity: str,
    summary: str,
    details: dict[str, Any],
    now: datetime,
) -> Row | None:
    """The open alert's row after the update, or None once it was resolved."""
    return fetch_one(
        conn,
        "alert_update",
        {
            "tenant_id": tenant_id,
            "severity": severity,
            "summary": summary,
            "details": details,
            "now": now,
            "id": alert_id,
        },
    )


def resolve_alert(conn: Conn, tenant_id: str, alert_id: UUID, now: datetime) -> Row | None:
    """The resolved row, or None when it was resolved already."""
    return fetch_one(conn, "alert_resolve", {"tenant_id": tenant_id, "id": alert_id, "now": now})


def claim_notifications(
    conn: Conn, now: datetime, lease_until: datetime, resolved_since: datetime, limit: int
) -> list[Row]:
    """Up to `limit` announcements owed, leased to this worker until `lease_until`."""
    return fetch_all(
        conn,
        "alerts_claim_notifications",
        {"now": now, "lease_until": lease_until, "resolved_since": resolved_since, "limit": limit},
    )


def mark_notified(
    conn: Conn, tenant_id: str, alert_id: UUID, announced: str, severity: str, now: datetime
) -> None:
    """The announcement `announced` (opened, escalated, resolved) went out."""
    execute(
        conn,
        "alert_notified",
        {
            "tenant_id": tenant_id,
            "id": alert_id,
            "announced": announced,
            "severity": severity,
            "now": now,
        },
    )


def mark_notify_failed(conn: Conn, tenant_id: str, alert_id: UUID, retry_at: datetime) -> None:
    """The announcement failed: count it and try again at `retry_at`."""
    execute(
        conn,
        "alert_notify_failed",
        {"tenant_id": tenant_id, "id": alert_id, "retry_at": retry_at},
    )
