"""The limit of the engine's own SQL: the statements one `notify` issues,
captured from a real call, replayed with fresh keys and no engine logic
(no parsing, no phone validation, no template or policy resolution, no
encryption), on one autocommit connection as the engine uses.

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
from tidings import intake
from tidings.domain.ids import uuid7
from tidings.store import ledger
from tidings.store.database import fetch_all, fetch_one

Captured = list[tuple[str, dict[str, Any]]]


def capture_create(dsn: str) -> Captured:
    """The named queries and parameters of one `notify`, in order."""
    seen: Captured = []

    def recording(real: Any) -> Any:
        def call(conn: Any, name: str, params: Mapping[str, Any]) -> Any:
            seen.append((name, dict(params)))
            return real(conn, name, params)

        return call

    with (
        mock.patch.object(intake, "fetch_all", recording(fetch_all)),
        mock.patch.object(ledger, "fetch_one", recording(fetch_one)),
        engine(dsn, 2) as t,
    ):
        t.notify(**request(t, "capture", 0))
    names = [name for name, _ in seen]
    if names != ["intake_context", "create_intent"]:
        raise RuntimeError(f"notify's statements changed: {names}; update bench/same_sql.py")
    return seen


def create_limit(dsn: str, statements: Captured, count: int, seconds: float) -> float:
    """Creations per second replaying `statements` with a new id and key each."""
    (context_name, context), (create_name, create) = statements
    create = {k: Jsonb(v) if isinstance(v, dict) else v for k, v in create.items()}
    with engine(dsn, 2) as t, t.db.statements() as conn:
        started, done = time.perf_counter(), 0
        while done < count and time.perf_counter() - started < seconds:
            fetch_all(conn, context_name, context)
            # ids as the engine makes them (time-ordered), so the index sees the same inserts
            key = f"same-sql:{done}"
            fresh = {**create, "id": uuid7(datetime.now(UTC)), "idempotency_key": key}
            if fetch_one(conn, create_name, fresh) is None:
                raise RuntimeError("the replayed create inserted nothing")
            done += 1
        return done / (time.perf_counter() - started)
