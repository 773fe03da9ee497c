"""What a server built on the client needs beyond the library calls.

The HTTP API (api/) reaches the engine only through `Tidings`; these are
the methods it uses that a library caller seldom does: a create that says
whether it created or replayed (201 or 200), API-key authentication and
the shared request rate on one connection in autocommit, the event feed,
the health probe, and which tenants an inbound message is for. Its other
needs sit with their concept: `record_job` and `begin_upload` in
`jobs.py`, the API keys in `keys.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

import psycopg

from tidings.client.base import ClientBase, Recorded
from tidings.domain.intent import Intent
from tidings.intake.create import create_or_replay
from tidings.intake.request import IntentRequest
from tidings.store import api_keys, api_rate, events, ledger, tenants
from tidings.store.api_keys import Principal, Refusal
from tidings.store.events import MAX_LIMIT as MAX_EVENTS_PAGE
from tidings.store.events import START, Cursor, Page

T = TypeVar("T")

Conn = psycopg.Connection[Any]

__all__ = ["MAX_EVENTS_PAGE", "Principal", "Refusal", "ServingMethods"]


class ServingMethods(ClientBase):
    def now(self) -> datetime:
        """The engine's time (its clock: the database's, the system's or a test's)."""
        return self.clock.now()

    @contextmanager
    def autocommit(self) -> Iterator[Conn]:
        """A pooled connection in autocommit, for several calls that each take
        `conn=` (a key check and a create, say) without a transaction around them."""
        with self.db.statements() as conn:
            yield conn

    def autocommit_again(self, work: Callable[[Conn], T]) -> T:
        """`work` on a connection in autocommit (as `autocommit()`), run again
        on a new one while it fails for want of a primary (a failover takes
        seconds: docs/scaling.md). Only for work that comes out the same run
        once or twice: a create under its idempotency key, or reads."""
        return self.db.statements_again(work)

    def record_intent(
        self, *, actor: str, conn: Conn | None = None, intent_id: UUID | None = None, **fields: Any
    ) -> Recorded[Intent]:
        """`notify` for a server: the same fields, and whether it created.

        On `conn` when given, which must be in autocommit (`autocommit()`):
        the create is one statement. A replay returns the first intent as it
        is now, attempts included. The tenant must exist already (an API
        key's does), so nothing is spent making sure of it. `intent_id`, chosen
        once by a caller that may run the create again (`autocommit_again`),
        makes finding that run's own intent a creation, not a replay.
        """
        request = IntentRequest.parse(now=self.now(), **fields)
        with self.autocommit() if conn is None else _given(conn) as tx:
            waker = self.runtime.waker
            intent, created = create_or_replay(
                tx,
                self.tenant,
                request,
                self.vault,
                self.now(),
                actor,
                self.runtime.intake,
                wake=waker.due if waker else None,
                intent_id=intent_id,
            )
            if not created:  # the first intent as it is now, attempts included
                current = ledger.get_intent(tx, self.tenant, intent.id, with_attempts=True)
                intent = current or intent
        return Recorded(intent, created)

    @staticmethod
    def api_key_id(key: str) -> str | None:
        """The id part of an API key (`tdg_<id>_<secret>`); None if it is not
        shaped like one. Nothing is read: it names the key's failure budget."""
        return api_keys.key_id_of(key)

    def check_api_key(
        self, key: str, *, now: datetime, conn: Conn | None = None
    ) -> Principal | Refusal:
        """Who the API key is (its tenant, scopes and actor), or why it is
        refused (unknown, revoked, expired). Any tenant's key: the engine's
        own tenant plays no part. On `conn` when given, else in autocommit."""
        with self.autocommit() if conn is None else _given(conn) as reading:
            return api_keys.check(reading, key, now, self.vault)

    def take_request_tokens(
        self, want: int, *, rate: float, burst: int, now: datetime, conn: Conn | None = None
    ) -> tuple[int, float]:
        """Take up to `want` tokens from this tenant's request bucket, shared
        by every API process (`rate` a second, at most `burst` saved): how
        many were granted, and the tokens the bucket held. On `conn` when
        given, which must be in autocommit: one statement."""
        with self.autocommit() if conn is None else _given(conn) as tx:
            return api_rate.take_tokens(tx, self.tenant, want=want, rate=rate, burst=burst, now=now)

    def ping(self, timeout: float) -> None:
        """Check that the database answers within `timeout` seconds; raises
        the psycopg error (a pool timeout, a closed pool) otherwise."""
        pool = self.db.pool
        with pool.connection(timeout=timeout) as conn:
            pool.check_connection(conn)

    def events(self, after: str | None = None, limit: int = 100) -> Page:
        """This tenant's events after the cursor `after` (the `next` of the
        last page, encoded), oldest first, at most `limit` (up to
        `MAX_EVENTS_PAGE`); a page with no items means caught up."""
        cursor = Cursor.decode(after) if after else START
        with self.db.transaction() as conn:
            return events.page(conn, self.tenant, cursor, limit)

    def existing_tenants(self, names: Iterable[str]) -> list[str]:
        """Those of `names` that are tenants already, in order; none is created."""
        with self.db.transaction() as conn:
            return [t for t in names if tenants.exists(conn, t)]


@contextmanager
def _given(conn: Conn) -> Iterator[Conn]:
    yield conn
