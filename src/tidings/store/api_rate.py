"""The API's per-tenant rate buckets, shared by every API process."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import fetch_one

Conn = psycopg.Connection[Any]


def take_tokens(
    conn: Conn, tenant_id: str, *, want: int, rate: float, burst: int, now: datetime
) -> tuple[int, float]:
    """Refill the tenant's bucket and take up to `want` tokens in one
    statement: how many were granted (0: empty), and how many are left."""
    params = {"tenant_id": tenant_id, "want": want, "rate": rate, "burst": burst, "now": now}
    row = fetch_one(conn, "take_api_tokens", params)
    assert row is not None
    return int(row["granted"]), float(row["tokens"])
