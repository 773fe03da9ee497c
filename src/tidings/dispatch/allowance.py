"""Consuming rate and spend allowance, atomically with the claim.

Each limit key is one counter row per fixed window (domain/limits.py); a
conditional upsert consumes it or returns nothing. All keys of one message
are consumed inside one savepoint, so a message that does not fit consumes
nothing anywhere. When capacity is short the intent stores the next
eligible time; nobody busy-polls for room.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.domain.intent import Intent
from tidings.domain.limit_keys import limit_keys
from tidings.domain.limits import SPEND_SCOPE, LimitCheck, LimitKey, check
from tidings.domain.policy_document import Policy
from tidings.store import rate_counters

Conn = psycopg.Connection[Any]


class _NoRoom(Exception):
    def __init__(self, key: LimitKey) -> None:
        self.key = key


def rate_keys(intent: Intent, policy: Policy, provider: str) -> list[LimitKey]:
    return [k for k in _keys(intent, policy, provider, 1) if k.scope != SPEND_SCOPE]


def spend_keys(intent: Intent, policy: Policy, provider: str, segments: int) -> list[LimitKey]:
    return [k for k in _keys(intent, policy, provider, segments) if k.scope == SPEND_SCOPE]


def _keys(intent: Intent, policy: Policy, provider: str, segments: int) -> list[LimitKey]:
    return limit_keys(
        policy,
        channel=intent.channel,
        recipient_ref=intent.recipient_ref,
        destination_hash=intent.destination_hash or "",
        job_id=str(intent.job_id) if intent.job_id else None,
        event_class=intent.event_class,
        tenant=intent.tenant_id,
        country=intent.country,
        provider_account=provider,
        segments=segments,
    )


def consume(conn: Conn, tenant: str, keys: Sequence[LimitKey], now: datetime) -> LimitCheck:
    """All or nothing: allowed, or the key that had no room and when it will."""
    if not keys:
        return LimitCheck(True)
    try:
        with conn.transaction():
            for key in keys:
                if not _take(conn, tenant, key, now):
                    raise _NoRoom(key)
    except _NoRoom as full:
        return check(full.key, now, full.key.limit)
    return LimitCheck(True)


def _take(conn: Conn, tenant: str, key: LimitKey, now: datetime) -> bool:
    if key.cost > key.limit:
        return False
    return rate_counters.take(
        conn,
        key.counted_for(tenant),
        scope=key.scope,
        key=key.key,
        window_start=key.window_start(now),
        window_end=key.window_start(now) + timedelta(seconds=key.per_seconds),
        cost=key.cost,
        limit=key.limit,
    )
