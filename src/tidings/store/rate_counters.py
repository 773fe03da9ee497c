"""Rate-limit counters: one row per limit key and fixed window.

The one door to `rate_counters`; dispatch/allowance.py decides which keys a
send spends and what a full window means.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import fetch_one

Conn = psycopg.Connection[Any]


def take(
    conn: Conn,
    tenant_id: str,
    *,
    scope: str,
    key: str,
    window_start: datetime,
    window_end: datetime,
    cost: int,
    limit: int,
) -> bool:
    """Spend `cost` from the window's counter; False (nothing spent) if it
    would pass `limit`. `window_end` is when retention may forget it."""
    row = fetch_one(
        conn,
        "consume_allowance",
        {
            "tenant_id": tenant_id,
            "scope": scope,
            "key": key,
            "window_start": window_start,
            "window_end": window_end,
            "cost": cost,
            "limit": limit,
        },
    )
    return row is not None
