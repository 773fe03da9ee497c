"""Reads of the claim's lanes for metrics, alerts and the console
(docs/concepts/lanes.md); the claim itself is sql/fragments/due_lanes.sql."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import fetch_all

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class LaneQueue:
    tenant_id: str
    channel: str
    lane: str  # "urgent" (no job) or "bulk" (a job's)
    due: int
    oldest_due_at: datetime
    oldest_retry_due_at: datetime | None


def queues(conn: Conn, now: datetime) -> list[LaneQueue]:
    """Every lane with intents due now."""
    return [
        LaneQueue(r["tenant_id"], r["channel"], r["lane"], r["n"], r["oldest"], r["oldest_retry"])
        for r in fetch_all(conn, "lanes_due", {"now": now})
    ]


def urgent_backlog(conn: Conn, now: datetime) -> list[dict[str, Any]]:
    """Single intents due and unclaimed, per tenant and channel."""
    return fetch_all(conn, "lanes_urgent_backlog", {"now": now})


def expired_unsent(conn: Conn) -> list[dict[str, Any]]:
    """Per tenant and event class: intents that expired with no call made."""
    return fetch_all(conn, "lanes_expired_unsent", {})


def suppression_lists(conn: Conn) -> list[dict[str, Any]]:
    """Per tenant, channel and reason: destinations suppressed or opted out."""
    return fetch_all(conn, "lanes_suppression_lists", {})
