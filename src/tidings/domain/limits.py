"""Pure rate-limit and spend-limit math for the claim transaction.

Limits are fixed windows aligned to the Unix epoch: one counter row per
(key, window_start). That shape lets SQL consume allowance and claim the
intent in one statement, with no read-then-write race:

    INSERT INTO rate_windows (tenant_id, key, window_start, used)
    VALUES ($tenant, $key, $window_start, $cost)
    ON CONFLICT (tenant_id, key, window_start)
    DO UPDATE SET used = rate_windows.used + EXCLUDED.used
    WHERE rate_windows.used + EXCLUDED.used <= $limit
    RETURNING used;

Zero rows returned means no room: store `window_start + per_seconds` as
the intent's next eligible time instead of polling for capacity. Fixed
windows can admit up to twice the limit around a boundary; we accept that
for an atomic single-row update (a sliding log would need a row per send).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

Scope = Literal[
    "recipient", "destination", "job", "event_class", "tenant", "country", "provider_account"
]
SCOPES: Final[tuple[Scope, ...]] = (
    "recipient",
    "destination",
    "job",
    "event_class",
    "tenant",
    "country",
    "provider_account",
)
SPEND_SCOPE: Final = "country_spend"
# A provider account is one account for every tenant: its counters are
# kept once for the deployment, so two tenants under an account's limit
# share it instead of each spending all of it.
DEPLOYMENT_SCOPES: Final[frozenset[str]] = frozenset({"provider_account"})
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class RateLimitRule:
    """At most `limit` messages per `per_seconds` per value of `scope`."""

    scope: Scope
    limit: int
    per_seconds: int
    channel: str | None = None

    def __post_init__(self) -> None:
        _positive(limit=self.limit, per_seconds=self.per_seconds)


@dataclass(frozen=True)
class SpendLimit:
    """At most `segments` SMS segments per `per_seconds` to one country."""

    segments: int
    per_seconds: int

    def __post_init__(self) -> None:
        _positive(segments=self.segments, per_seconds=self.per_seconds)


def _positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1")


@dataclass(frozen=True)
class LimitKey:
    scope: str
    key: str
    limit: int
    per_seconds: int
    cost: int

    def window_start(self, now: datetime) -> datetime:
        return window_start(self.per_seconds, now)

    def counted_for(self, tenant: str) -> str:
        """Whose counter this key spends: the tenant's, or the deployment's
        (""), which no tenant id can name."""
        return "" if self.scope in DEPLOYMENT_SCOPES else tenant


@dataclass(frozen=True)
class LimitCheck:
    """allowed, or when to try again; next_eligible_at None when denied
    means the cost alone exceeds the limit and waiting cannot help."""

    allowed: bool
    next_eligible_at: datetime | None = None
    key: LimitKey | None = None


def window_start(per_seconds: int, now: datetime) -> datetime:
    elapsed = int((now - EPOCH).total_seconds())
    return EPOCH + timedelta(seconds=elapsed - elapsed % per_seconds)


def check(key: LimitKey, now: datetime, used: int) -> LimitCheck:
    """Would consuming `key.cost` now fit, given `used` in the current window?"""
    if key.cost > key.limit:
        return LimitCheck(False, None, key)
    if used + key.cost <= key.limit:
        return LimitCheck(True, None, key)
    return LimitCheck(False, key.window_start(now) + timedelta(seconds=key.per_seconds), key)
