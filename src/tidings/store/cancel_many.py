"""The reads behind a bulk cancel: which open intents match its filter, and
how many matching were already final (cancel_many.sql).

Each filter left None does not filter; the cancels themselves go through
`ledger.transition`, one intent at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
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


_START = UUID(int=0)


@dataclass(frozen=True)
class Position:
    """Where the last batch ended: its last row's creation time and id.
    Empty (the start) before the first batch."""

    created_at: datetime | None = None
    id: UUID = _START


def open_matching(
    conn: Conn,
    tenant: str,
    *,
    after: Position,
    limit: int,
    job_id: UUID | None,
    event_class: str | None,
    recipient_ref: str | None,
    correlation_id: str | None,
) -> list[Position]:
    """Up to `limit` open matching intents after `after`: a job's in id
    order (intents_job), the others in (created_at, id) order, the order of
    the listing index each filter is found through (0048)."""
    params: dict[str, Any] = {
        "tenant_id": tenant,
        "after_at": after.created_at,
        "after_id": after.id,
        "limit": limit,
        "job_id": job_id,
        "event_class": event_class,
        "recipient_ref": recipient_ref,
        "correlation_id": correlation_id,
    }
    name = "cancel_candidates" if job_id is None else "cancel_candidates_in_job"
    return [Position(r["created_at"], r["id"]) for r in fetch_all(conn, name, params)]
