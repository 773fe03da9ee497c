"""Controls: the kill switch and shadow mode, per tenant, channel, country,
notification purpose and event class.

A scope is stored with '' for "all" (the primary key cannot hold NULLs);
the country is kept upper-case.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.errors import CohortShrink
from tidings.domain.rollout import Scope, ShadowControl
from tidings.store.database import Row, fetch_all, fetch_one

Conn = psycopg.Connection[Any]
KINDS = ("kill_switch", "shadow_mode")


def set_control(
    conn: Conn,
    tenant_id: str,
    kind: str,
    enabled: bool,
    *,
    scope: Scope,
    now: datetime,
    actor: str,
    live_percent: int | None = None,
) -> int:
    """Set one control; its live percent as stored after. A live percent
    smaller than the stored one is refused (CohortShrink)."""
    key = {
        "tenant_id": tenant_id,
        "kind": kind,
        "channel": scope.channel,
        "country": scope.country.upper(),
        "purpose": scope.purpose,
        "event_class": scope.event_class,
    }
    row = fetch_one(
        conn,
        "set_control",
        {**key, "enabled": enabled, "now": now, "actor": actor, "live_percent": live_percent},
    )
    if row is None:
        stored = fetch_one(conn, "control_live_percent", key)
        assert stored is not None  # the upsert matched it, and refused
        raise CohortShrink(stored["live_percent"], live_percent or 0)
    return int(row["live_percent"])


def controls_of(conn: Conn, tenant_id: str) -> list[Row]:
    """Every control the tenant ever set, on or off, by kind and scope."""
    return fetch_all(conn, "controls_of", {"tenant_id": tenant_id})


def shadow_controls(conn: Conn, tenants: Collection[str]) -> list[ShadowControl]:
    """The shadow controls of these tenants that are on, or were on once."""
    rows = fetch_all(conn, "shadow_controls", {"tenants": sorted(tenants)})
    return [
        ShadowControl(
            r["tenant_id"],
            Scope(r["channel"], r["country"], r["purpose"], r["event_class"]),
            r["live_percent"],
            None if r["enabled"] else (r["enabled_at"], r["disabled_at"]),
        )
        for r in rows
    ]


def shadow_control(conn: Conn, tenant_id: str, scope: Scope) -> Row | None:
    """The shadow control of exactly this scope, on or off, if ever set."""
    key = {
        "tenant_id": tenant_id,
        "kind": "shadow_mode",
        "channel": scope.channel,
        "country": scope.country.upper(),
        "purpose": scope.purpose,
        "event_class": scope.event_class,
    }
    return fetch_one(conn, "control_live_percent", key)
