"""Reports registered by reference; attempts attach them at send time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import Row, execute, fetch_one

Conn = psycopg.Connection[Any]


def register(
    conn: Conn,
    tenant_id: str,
    report_id: str,
    revision: int,
    *,
    filename: str,
    content_type: str,
    location: str,
    size_bytes: int | None,
    now: datetime,
) -> None:
    execute(
        conn,
        "insert_report",
        {
            "tenant_id": tenant_id,
            "id": report_id,
            "revision": revision,
            "filename": filename,
            "content_type": content_type,
            "location": location,
            "size_bytes": size_bytes,
            "now": now,
        },
    )


def by_id(conn: Conn, tenant_id: str, report_id: str, revision: int) -> Row | None:
    return fetch_one(
        conn, "report_by_id", {"tenant_id": tenant_id, "id": report_id, "revision": revision}
    )
