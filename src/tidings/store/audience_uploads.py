"""Audience uploads: staged recipients waiting to become a job's audience.

The one door to `audience_uploads` and `audience_upload_members` besides
the retention purge (store/retention.py). The members themselves arrive by
COPY (jobs/uploads.py); these are the statements around them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, execute, fetch_one
from tidings.store.queries import q

Conn = psycopg.Connection[Any]


def pending_count(conn: Conn, tenant_id: str, now: datetime) -> int:
    """How many uploads the tenant holds that no job has used and that have not expired."""
    row = fetch_one(conn, "count_pending_audience_uploads", {"tenant_id": tenant_id, "now": now})
    assert row is not None  # a count always has its row
    return int(row["n"])


def insert(
    conn: Conn, tenant_id: str, upload_id: UUID, actor: str, now: datetime, expires_at: datetime
) -> None:
    execute(
        conn,
        "insert_audience_upload",
        {
            "tenant_id": tenant_id,
            "id": upload_id,
            "actor": actor,
            "now": now,
            "expires_at": expires_at,
        },
    )


def duplicate(conn: Conn, tenant_id: str, upload_id: UUID) -> Row | None:
    """The first recipient ref that appears twice, with both positions."""
    return fetch_one(conn, "audience_upload_duplicate", {"tenant_id": tenant_id, "id": upload_id})


def settle(conn: Conn, tenant_id: str, upload_id: UUID, size: int, version: str) -> Row | None:
    return fetch_one(
        conn,
        "settle_audience_upload",
        {"tenant_id": tenant_id, "id": upload_id, "size": size, "version": version},
    )


def lock(conn: Conn, tenant_id: str, upload_id: UUID, now: datetime) -> Row | None:
    return fetch_one(
        conn, "lock_audience_upload", {"tenant_id": tenant_id, "id": upload_id, "now": now}
    )


def consume(conn: Conn, tenant_id: str, upload_id: UUID, job_id: UUID, now: datetime) -> None:
    execute(
        conn,
        "consume_audience_upload",
        {"tenant_id": tenant_id, "id": upload_id, "job_id": job_id, "now": now},
    )


def discard(conn: Conn, tenant_id: str, upload_id: UUID) -> None:
    execute(conn, "discard_audience_upload", {"tenant_id": tenant_id, "id": upload_id})


def copy_members(conn: Conn, rows: Iterable[tuple[Any, ...]]) -> None:
    """A chunk of an upload's members, in the columns of `copy_audience_upload_members`."""
    with conn.cursor().copy(q("copy_audience_upload_members")) as copy:
        for row in rows:
            copy.write_row(row)
