"""Tenants, as far as the API asks about them (`ledger.ensure_tenant` makes one)."""

from __future__ import annotations

from typing import Any

import psycopg

from tidings.store.database import fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def exists(conn: Conn, tenant_id: str) -> bool:
    row = fetch_one(conn, "tenant_exists", {"tenant_id": tenant_id})
    return bool(row and row["found"])


def every_tenant(conn: Conn) -> list[str]:
    return [row["tenant_id"] for row in fetch_all(conn, "tenant_ids", {})]
