"""Reading pages of a tenant's intents (docs/finding.md); writes nothing."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import psycopg

from tidings.domain.intent import Intent
from tidings.domain.listing import Cursor, IntentFilter, Page
from tidings.store.database import fetch_all

Conn = psycopg.Connection[Any]


def list_intents(
    conn: Conn, tenant_id: str, which: IntentFilter, after: Cursor | None, size: int
) -> Page[Intent]:
    # One row more than the page says whether another page follows, without
    # a count of the tenant's intents.
    params: dict[str, Any] = {
        **asdict(which),
        "tenant_id": tenant_id,
        "after_at": after.created_at if after else None,
        "after_id": after.id if after else None,
        "limit": size + 1,
    }
    rows = fetch_all(conn, "list_intents", params)
    items = [Intent.from_row(row) for row in rows[:size]]
    more = len(rows) > size
    last = items[-1] if more else None
    return Page(tuple(items), Cursor(last.created_at, last.id).encode() if last else None)
