"""Connections: one psycopg 3 pool per process, and the SQL helpers on it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from tidings.store.queries import q

Row = dict[str, Any]


class Database:
    """A pool plus the few ways the code base talks to PostgreSQL."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self.url = url
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"row_factory": dict_row, "autocommit": False},
            open=True,
            # A restarted server leaves dead connections in the pool; check
            # each on checkout instead of failing the request that gets it.
            check=ConnectionPool.check_connection,
            name="tidings",
        )

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def transaction(
        self, conn: psycopg.Connection[Any] | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """A transaction on our pool, or a savepoint inside the caller's."""
        if conn is not None:
            with conn.transaction():
                yield conn
            return
        with self.pool.connection() as own, own.transaction():
            yield own


def fetch_one(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> Row | None:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(q(name), _adapt(params), prepare=True)
        return cur.fetchone()


def fetch_all(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> list[Row]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(q(name), _adapt(params), prepare=True)
        return cur.fetchall()


def execute(conn: psycopg.Connection[Any], name: str, params: Mapping[str, Any]) -> int:
    with conn.cursor() as cur:
        cur.execute(q(name), _adapt(params), prepare=True)
        return cur.rowcount


def _adapt(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: Jsonb(v) if isinstance(v, dict) else v for k, v in params.items()}
