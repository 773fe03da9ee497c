"""The request edge: a create of a user-triggered class spends its bounds.

The policy's `user_triggered` (domain/request_limits.py) bounds how many
creates of an event class one destination and one number prefix may take
per window. The bounds are spent in the create's own transaction, after
the intent is inserted: a bound with no room raises `RequestLimited`, the
transaction rolls back, and neither the intent nor any counter stands. A
replayed key inserts nothing and so spends nothing: a client retrying its
own create is never refused by the bound.

Each counter is one conditional upsert (store/rate_counters.py): two
concurrent creates over the same prefix serialize on its row, and the
second sees the first's count, so no race passes the bound. Counters are
the tenant's own; the destination is counted by its keyed hash.

Every request of a bounded SMS class also counts in its country's and
prefix's hourly volume, a refused one too (after the rollback, in its own
statement): the anomaly alert reads it (observability/alerts/requests.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tidings.domain.errors import RequestLimited
from tidings.domain.limits import LimitKey
from tidings.domain.policy_document import Policy
from tidings.domain.request_limits import (
    UserTriggered,
    phone_prefix,
    request_keys,
    retry_after,
    scope_of,
    volume_key,
)
from tidings.intake.cache import Remembered
from tidings.intake.request import IntentRequest
from tidings.store import rate_counters

Conn = psycopg.Connection[Any]


@dataclass
class Edge:
    tenant: str
    request: IntentRequest
    destination_hash: str
    now: datetime
    volume: LimitKey | None = field(default=None, init=False)

    def may_bound(self, remembered: Remembered | None) -> bool:
        """Whether the create must run in a transaction of its own, so a
        refusal can undo its insert: the remembered policy bounds the
        class, or nothing is remembered yet (the insert will read it)."""
        return remembered is None or self.rule(remembered.policy) is not None

    def rule(self, policy: Policy | None) -> UserTriggered | None:
        return None if policy is None else policy.user_triggered.get(self.request.event_class)

    def admit(self, conn: Conn, policy: Policy | None, *, refuse: bool) -> None:
        """Spend the class's bounds for the intent just inserted, or raise
        RequestLimited. Without `refuse` (the insert ran outside a
        transaction: the policy bounding the class was published during
        the create) the bounds are counted, never refused."""
        rule = self.rule(policy)
        if rule is None:
            return
        prefix = self._prefix()
        self.volume = self._volume_key(prefix)
        keys = request_keys(rule, self.request.event_class, self.destination_hash, prefix)
        for key in keys:
            if not _take(conn, self.tenant, key, self.now) and refuse:
                raise RequestLimited(
                    self.request.event_class, scope_of(key), retry_after(key, self.now)
                )
        self.count_volume(conn)

    def count_volume(self, conn: Conn) -> None:
        """Count this request in its country's and prefix's hourly volume."""
        if self.volume is not None:
            _take(conn, self.tenant, self.volume, self.now)

    def _prefix(self) -> str | None:
        recipient = self.request.recipient
        return phone_prefix(recipient.destination) if recipient.channel.value == "sms" else None

    def _volume_key(self, prefix: str | None) -> LimitKey | None:
        country = self.request.recipient.country
        if prefix is None or country is None:
            return None
        return volume_key(self.request.event_class, country, prefix)


def _take(conn: Conn, tenant: str, key: LimitKey, now: datetime) -> bool:
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
