"""The per-country spend breakers as an operator reads them (issue #41).

A policy's `country_spend_limits` give each country a budget of SMS
segments per fixed window; the claim spends it (dispatch/allowance.py)
and holds sends to a country whose budget is spent until the window ends.
Here, for the console: each breaker's window, what it has spent and
whether it is tripped. Pure: the caller reads the counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from tidings.domain.limit_keys import spend_key
from tidings.domain.limits import LimitKey
from tidings.domain.policy_document import Policy

BreakerState = Literal["ok", "near", "tripped"]
NEAR: Final = 0.8  # spent this share of the budget: shown as near


@dataclass(frozen=True)
class SpendBreaker:
    channel: str
    country: str
    key: LimitKey
    window_start: datetime
    used: int

    @property
    def limit(self) -> int:
        return self.key.limit

    @property
    def resets_at(self) -> datetime:
        return self.window_start + timedelta(seconds=self.key.per_seconds)

    @property
    def state(self) -> BreakerState:
        if self.used >= self.limit:
            return "tripped"
        return "near" if self.used >= self.limit * NEAR else "ok"


def breaker_keys(policy: Policy) -> list[tuple[str, str, LimitKey]]:
    """(channel, country, counter key) of every spend limit, by country."""
    found = []
    for channel, countries in sorted(policy.country_spend_limits.items()):
        for country in sorted(countries):
            key = spend_key(policy, channel, country, 1)
            if key is not None:
                found.append((channel, country, key))
    return found


def breakers(
    policy: Policy, now: datetime, used: Mapping[tuple[str, datetime], int]
) -> list[SpendBreaker]:
    """Each breaker in its current window; `used` by (counter key, window start)."""
    out = []
    for channel, country, key in breaker_keys(policy):
        start = key.window_start(now)
        out.append(SpendBreaker(channel, country, key, start, used.get((key.key, start), 0)))
    return out
