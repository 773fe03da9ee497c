"""The per-tenant API request rate, shared by every API process.

Each tenant has one token bucket in PostgreSQL (`api_rate_buckets`):
`rate` tokens a second, at most `burst` saved up, one token a request.
Asking the database on every request would add a statement to the hot
path (`POST /v1/intents`), so each process takes tokens in small batches
and spends them locally; only every `batch`-th request of a tenant costs
a statement. A batch is a real withdrawal, so the processes together never
exceed the shared limit; what one process holds unspent for long is given
up (`HOLD`) so saved-up tokens cannot grow a burst.

Over the limit, the request is refused with 429 RATE_LIMITED and a
`Retry-After` computed from the bucket; the process then refuses that
tenant locally until then, so a client hammering past its limit costs
no statement per request either.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from tidings.api.problems import TooManyRequests
from tidings.client import Tidings
from tidings.store import api_rate
from tidings.store.database import Database

Conn = psycopg.Connection[Any]

# How long a process may sit on tokens it took and has not spent.
HOLD = timedelta(seconds=1)
# A batch is this share of a second's rate: small enough that what several
# processes hold unspent is a sliver of the limit.
BATCH_SHARE = 0.05


@dataclass
class _Local:
    tokens: int = 0
    expires_at: datetime = datetime(1970, 1, 1, tzinfo=UTC)
    refused_until: datetime | None = None


class TenantRateLimit:
    """Admit a tenant's request or raise 429; thread-safe, one per app."""

    def __init__(self, rate_per_second: float, burst: int) -> None:
        self.rate = rate_per_second
        self.burst = max(1, burst)
        self.batch = max(1, min(self.burst, math.floor(rate_per_second * BATCH_SHARE)))
        self._local: dict[str, _Local] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def admit(self, view: Tidings, now: datetime, conn: Conn | None = None) -> None:
        """Admit a request of the tenant `view` acts for, or raise 429.

        `conn`, in autocommit, is the caller's: a batch is taken on it
        rather than on a second connection it would wait for while holding
        one (with every pooled connection held so, none would come)."""

        def take() -> tuple[int, float]:
            return view.take_request_tokens(
                self.batch, rate=float(self.rate), burst=self.burst, now=now, conn=conn
            )

        retry_after = self._wait(view.tenant, now, take)
        if retry_after is not None:
            raise _refused(retry_after)

    def wait(
        self,
        db: Database,
        tenant: str,
        now: datetime,
        conn: psycopg.Connection[Any] | None = None,
    ) -> int | None:
        """Admit the request (None), or the seconds until the tenant may
        come back: `admit` without raising, for the console's pages, which
        run on the runtime's database rather than on the client."""
        return self._wait(tenant, now, lambda: self._take(db, tenant, now, conn))

    def _wait(
        self, tenant: str, now: datetime, take: Callable[[], tuple[int, float]]
    ) -> int | None:
        if not self.enabled:
            return None
        with self._lock:
            local = self._local.setdefault(tenant, _Local())
            if local.refused_until is not None and now < local.refused_until:
                return max(1, math.ceil((local.refused_until - now).total_seconds()))
            if self._spend_local(local, now):
                return None
        granted, tokens = take()
        with self._lock:
            if granted > 0:
                # Another thread may have taken a batch meanwhile: add to it,
                # unless what is held has lapsed.
                held = local.tokens if now < local.expires_at else 0
                local.tokens, local.expires_at = held + granted - 1, now + HOLD
                local.refused_until = None
                return None
            # The bucket refills at `rate`: the next whole token is this far off.
            retry_after = max(1, math.ceil((1 - tokens) / self.rate))
            local.refused_until = now + timedelta(seconds=retry_after)
        return retry_after

    def _spend_local(self, local: _Local, now: datetime) -> bool:
        if local.tokens > 0 and now < local.expires_at:
            local.tokens -= 1
            return True
        return False

    def _take(
        self, db: Database, tenant: str, now: datetime, conn: psycopg.Connection[Any] | None
    ) -> tuple[int, float]:
        if conn is not None:
            return self._take_on(conn, tenant, now)
        with db.statements() as own:  # one statement: no BEGIN and COMMIT
            return self._take_on(own, tenant, now)

    def _take_on(
        self, conn: psycopg.Connection[Any], tenant: str, now: datetime
    ) -> tuple[int, float]:
        return api_rate.take_tokens(
            conn, tenant, want=self.batch, rate=float(self.rate), burst=self.burst, now=now
        )


def _refused(retry_after: int) -> TooManyRequests:
    return TooManyRequests(
        "RATE_LIMITED",
        f"this tenant is over its API request rate; retry in {retry_after} s",
        retry_after,
    )
