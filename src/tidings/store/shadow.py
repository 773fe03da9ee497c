"""What shadow-mode claims decided, for the shadow-rollout report (shadow.sql)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, fetch_all

Conn = psycopg.Connection[Any]


def decisions(
    conn: Conn, tenant: str, since: datetime, until: datetime, after: UUID, limit: int
) -> list[Row]:
    """One keyset page of decisions made in [since, until), by intent id after
    `after`: `id, idempotency_key, event_class, channel, country, at,
    policy_version, code, would, would_action`."""
    return fetch_all(
        conn,
        "shadow_decisions",
        {
            "tenant_id": tenant,
            "since": since,
            "until": until,
            "after": after,
            "limit": limit,
        },
    )
