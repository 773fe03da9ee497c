"""The limit of the engine's own SQL: the statements one `notify` issues,
captured from a real call, replayed with fresh keys and no engine logic
(no parsing, no phone validation, no template or policy resolution, no
encryption), on one autocommit connection as the engine uses.

The call captured is a warm one, as every create but a process's first
(or the first after a publish) is: its template and policy come from the
process's cache, so it issues `create_intent` alone, whose check that
they are still current is part of the statement replayed.

This is what the creation could reach if everything but the database
round trips cost nothing; `notify` is reported as a share of it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from unittest import mock

from psycopg.types.json import Jsonb

from bench.seed import engine, request
from tidings.domain.ids import uuid7
from tidings.store import database, ledger
from tidings.store.database import fetch_one
from tidings.store.queries import q

Captured = list[tuple[str, dict[str, Any]]]


def capture_create(dsn: str) -> Captured:
    """The named queries and parameters of one `notify`, in order."""
    seen: Captured = []

    def recording(real: Any) -> Any:
        def call(conn: Any, name: str, params: Mapping[str, Any]) -> Any:
            seen.append((name, dict(params)))
            return real(conn, name, params)

        return call

    issued: list[str] = []  # every named query, by whichever helper it went through

    def naming(name: str) -> str:
        issued.append(name)
        return q(name)

    with engine(dsn, 2) as t:
        t.notify(**request(t, "capture-warm", 0))  # fills the cache, as any earlier create
        # The insert's parameters from the ledger's helper; every named query
        # by name, wherever issued, so another statement fails the check below.
        with (
            mock.patch.object(ledger, "fetch_one", recording(fetch_one)),
            mock.patch.object(database, "q", naming),
        ):
            t.notify(**request(t, "capture", 0))
    names = [name for name, _ in seen]
    # The waker's NOTIFY, on its own connection after the commit, is not the
    # create's (store/wakeups.py); the replay is the create's statement alone.
    issued = [name for name in issued if name != "wake_workers"]
    if names != ["create_intent"] or issued != names:
        raise RuntimeError(f"notify's statements changed: {issued}; update bench/same_sql.py")
    return seen


def create_limit(dsn: str, statements: Captured, count: int, seconds: float) -> float:
    """Creations per second replaying `statements` with a new id and key each."""
    ((create_name, create),) = statements
    create = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in create.items()}
    with engine(dsn, 2) as t, t.db.statements() as conn:
        started, done = time.perf_counter(), 0
        while done < count and time.perf_counter() - started < seconds:
            # ids as the engine makes them (time-ordered), so the index sees the same inserts
            key = f"same-sql:{done}"
            fresh = {**create, "id": uuid7(datetime.now(UTC)), "idempotency_key": key}
            row = fetch_one(conn, create_name, fresh)
            if row is None or not row["still_current"] or row["id"] is None:
                raise RuntimeError("the replayed create inserted nothing")
            done += 1
        return done / (time.perf_counter() - started)
