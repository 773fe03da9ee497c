"""Controls: the kill switch and shadow mode, per tenant, channel and country.

A scope is stored with '' for "all" (the primary key cannot hold NULLs);
the country is kept upper-case.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import Row, execute, fetch_all

Conn = psycopg.Connection[Any]
KINDS = ("kill_switch", "shadow_mode")


def set_control(
    conn: Conn,
    tenant_id: str,
    kind: str,
    enabled: bool,
    *,
    channel: str | None,
    country: str | None,
    now: datetime,
    actor: str,
) -> None:
    execute(
        conn,
        "set_control",
        {
            "tenant_id": tenant_id,
            "kind": kind,
            "channel": channel or "",
            "country": (country or "").upper(),
            "enabled": enabled,
            "now": now,
            "actor": actor,
        },
    )


def controls_of(conn: Conn, tenant_id: str) -> list[Row]:
    """Every control the tenant ever set, on or off, by kind and scope."""
    return fetch_all(conn, "controls_of", {"tenant_id": tenant_id})


def shadow_scopes(conn: Conn, tenants: Collection[str]) -> set[tuple[str, str, str]]:
    """The (tenant, channel, country) scopes in shadow mode among these tenants."""
    rows = fetch_all(conn, "shadow_controls", {"tenants": sorted(tenants)})
    return {(r["tenant_id"], r["channel"], r["country"]) for r in rows}
