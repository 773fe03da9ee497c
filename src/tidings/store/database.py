"""Connections: one psycopg 3 pool per process, and the SQL helpers on it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any, TypeVar
from uuid import UUID
from weakref import WeakKeyDictionary

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from tidings.store.primary import (
    WATCH,
    ConnectionOutOfStep,
    PrimaryUnavailable,
    out_of_step,
    read_only,
    without_primary,
)
from tidings.store.queries import planned_each_time, q

Row = dict[str, Any]
# How long after its last transaction a pooled connection is taken as alive.
RECENTLY = 1.0
# The longest a caller waits for a connection: with the database down, an
# API request answers 503 after this, instead of psycopg_pool's 30 s.
CONNECTION_WAIT_SECONDS = 10.0
# Between two runs of work that failed for want of a primary.
AGAIN_PAUSE_SECONDS = 0.2
T = TypeVar("T")


class _Pool(ConnectionPool[psycopg.Connection[Any]]):
    """psycopg_pool's pool, noting when each connection came back.

    Noted as it is returned rather than by a `reset` callback: given one,
    the pool hands every returned connection to one of its worker threads,
    which costs each checkout a wake-up of another thread and a turn of the
    GIL; without one, a connection in a clean state goes straight back into
    the pool (docs/benchmarks.md, "The HTTP path, profiled").
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.returned_at: WeakKeyDictionary[psycopg.Connection[Any], float] = WeakKeyDictionary()
        super().__init__(*args, **kwargs)

    def putconn(self, conn: psycopg.Connection[Any]) -> None:
        self.returned_at[conn] = time.monotonic()
        super().putconn(conn)


class Database:
    """A pool plus the few ways the code base talks to PostgreSQL."""

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 10, prepare: bool = True
    ) -> None:
        self.url = url
        self.pool = _Pool(
            url,
            min_size=min_size,
            max_size=max_size,
            # No prepared statements through a transaction pooler: the next
            # transaction may run on a server connection that lacks them.
            kwargs={
                "row_factory": dict_row,
                "autocommit": False,
                **({} if prepare else {"prepare_threshold": None}),
            },
            open=True,
            check=self._check,
            name="tidings",
            timeout=CONNECTION_WAIT_SECONDS,
        )

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        # A restarted server leaves dead connections in the pool; check one
        # on checkout instead of failing the request that gets it. One that
        # just came back from a working transaction is skipped: the check
        # is a round trip, as dear as the statements of a small transaction.
        if time.monotonic() - self.pool.returned_at.get(conn, -RECENTLY) >= RECENTLY:
            ConnectionPool.check_connection(conn)

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def transaction(
        self, conn: psycopg.Connection[Any] | None = None, *, wait: float | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """A transaction on our pool, or a savepoint inside the caller's.
        `wait`: at most this long for a connection (else the pool's own)."""
        if conn is not None:
            with conn.transaction():
                yield conn
            return
        # A short wait's timeout says the pool is busy, not that no primary answers.
        with self._primary(wait, timeout_is_news=wait is None) as own, own.transaction():
            yield own

    @contextmanager
    def statements(self, *, wait: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in autocommit: each statement commits alone.

        For work whose one write is a single statement (creating an intent):
        it saves the BEGIN and COMMIT round trips of a transaction. `wait`:
        the longest wait for a connection, if not CONNECTION_WAIT_SECONDS.
        """
        with self._primary(wait) as own:
            own.autocommit = True
            try:
                yield own
            finally:
                if not own.closed:
                    own.autocommit = False

    def statements_again(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`work` in autocommit (`statements`), run again on a new connection
        while it fails for want of a primary, for as long as a caller waits
        for a connection (a failover takes seconds: docs/scaling.md).

        Only for work that comes out the same run once or twice: one
        statement under the caller's idempotency key (a create: run again
        after a commit whose answer was lost, it finds the first intent), or
        reads. Never work that calls a provider: a call that may have
        reached one is reconciled, not repeated.
        """
        deadline = time.monotonic() + CONNECTION_WAIT_SECONDS
        while True:
            conn = None
            try:
                with self.statements(wait=max(0.0, deadline - time.monotonic())) as conn:
                    return work(conn)
            except psycopg.Error as exc:
                if not without_primary(exc, conn) or time.monotonic() >= deadline:
                    raise
            time.sleep(AGAIN_PAUSE_SECONDS)  # the pool is reconnecting; bounded by the deadline

    @contextmanager
    def _primary(
        self, wait: float | None = None, *, timeout_is_news: bool = True
    ) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection, with what its errors say about the primary
        noted (store/primary.py): waiting for one, or reached again. Without
        `timeout_is_news`, a wait for a connection that times out is not
        taken to mean the primary is gone."""
        own = None
        try:
            with self.pool.connection(timeout=wait) as own:
                try:
                    yield own
                except psycopg.Error as exc:
                    if out_of_step(exc):
                        own.close()  # its next answer could belong to another command
                        raise ConnectionOutOfStep(f"out of step: {exc}") from exc
                    if not read_only(exc):
                        raise
                    own.close()  # a standby: the pool must not hand it out again
                    raise PrimaryUnavailable(f"the database is read-only: {exc}") from exc
        except psycopg.Error as exc:
            timed_out = own is None and isinstance(exc, PoolTimeout)
            if without_primary(exc, own) and (timeout_is_news or not timed_out):
                WATCH.lost(exc, self.url)
            raise
        WATCH.reached(self.url)


def fetch_one(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> Row | None:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(q(name), _adapt(params), prepare=_prepared(name))
        return cur.fetchone()


def fetch_all(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> list[Row]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(q(name), _adapt(params), prepare=_prepared(name))
        return cur.fetchall()


def execute(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> int:
    with conn.cursor() as cur:
        cur.execute(q(name), _adapt(params), prepare=_prepared(name))
        return cur.rowcount


def _prepared(name: str) -> bool:
    """Named queries are prepared once per connection, but for the few
    planned each time (queries.PLAN_EACH_TIME)."""
    return name not in planned_each_time()


def records(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The parameters of a batch statement: `rows`, one JSON array for its
    `jsonb_to_recordset`, and `count`, for the `LIMIT` that tells the
    planner how many rows come.

    One json.dumps in C, where psycopg dumps an array per column element by
    element in Python, several times slower for a transition's 16 fields
    (docs/benchmarks.md, "Measurements behind the code").
    """
    return {"rows": Jsonb(list(rows), dumps=_dumps), "count": len(rows)}


def _plain(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_dumps = partial(json.dumps, default=_plain)


def _adapt(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: Jsonb(v) if isinstance(v, dict) else v for k, v in params.items()}
