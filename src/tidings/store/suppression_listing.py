"""Reading a tenant's suppressions, active or lifted, a page at a time
(docs/providers.md, "Reviewing and lifting suppressions"); writes nothing.
Lifts are written by the suppressions' door, store/contacts.py."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.listing import Cursor, Page
from tidings.domain.suppressions import Suppression, SuppressionFilter
from tidings.store.database import fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def list_suppressions(
    conn: Conn, tenant_id: str, which: SuppressionFilter, after: Cursor | None, size: int
) -> Page[Suppression]:
    # One row more than the page says whether another page follows.
    params: dict[str, Any] = {
        **asdict(which),
        "tenant_id": tenant_id,
        "after_at": after.created_at if after else None,
        "after_id": after.id if after else None,
        "limit": size + 1,
    }
    query = "list_suppression_lifts" if which.lifted else "list_suppressions"
    rows = fetch_all(conn, query, params)
    items = [Suppression.from_row(row) for row in rows[:size]]
    last = items[-1] if len(rows) > size else None
    return Page(tuple(items), Cursor(last.created_at, last.id).encode() if last else None)


def suppression(conn: Conn, tenant_id: str, suppression_id: UUID) -> Suppression | None:
    """The suppression `suppression_id` of this tenant, active or lifted."""
    params = {"tenant_id": tenant_id, "id": suppression_id}
    row = fetch_one(conn, "suppression_by_id", params)
    row = row or fetch_one(conn, "suppression_lift_by_id", params)
    return Suppression.from_row(row) if row else None
