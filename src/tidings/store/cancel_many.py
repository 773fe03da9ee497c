"""The reads behind a bulk cancel: which open intents match its filter, and
how many matching were already final (cancel_many.sql).

Each filter left None does not filter; the cancels themselves go through
`ledger.transition`, one intent at a time.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def count_final_matching(
    conn: Conn,
    tenant: str,
    *,
    job_id: UUID | None,
    event_class: str | None,
    recipient_ref: str | None,
    correlation_id: str | None,
) -> int:
    row = fetch_one(
        conn,
        "count_final_matching",
        {
            "tenant_id": tenant,
            "job_id": job_id,
            "event_class": event_class,
            "recipient_ref": recipient_ref,
            "correlation_id": correlation_id,
        },
    )
    return int(row["n"]) if row else 0


def open_matching(
    conn: Conn,
    tenant: str,
    *,
    after: UUID,
    limit: int,
    job_id: UUID | None,
    event_class: str | None,
    recipient_ref: str | None,
    correlation_id: str | None,
) -> list[UUID]:
    """Up to `limit` ids of open matching intents after `after`, in id order."""
    rows = fetch_all(
        conn,
        "cancel_candidates",
        {
            "tenant_id": tenant,
            "after": after,
            "limit": limit,
            "job_id": job_id,
            "event_class": event_class,
            "recipient_ref": recipient_ref,
            "correlation_id": correlation_id,
        },
    )
    return [r["id"] for r in rows]
