"""What the plan guard measures: the shared buffers one execution of a
named query touches, from EXPLAIN (ANALYZE, BUFFERS), on a rolled-back
transaction so a read that locks rows leaves nothing behind."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from tidings.store.queries import all_queries

from .params import CASES, NOT_PLANNED, UNBOUNDED, params_for, query_of

_PARAM = re.compile(r"%\((\w+)\)s")
_COMMENT = re.compile(r"--[^\n]*")
# What a statement writes with; a read may still lock (FOR UPDATE).
_WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE|COPY|CREATE|DROP|ALTER|TRUNCATE|LISTEN)\b")
_LOCKS = re.compile(r"\bFOR\s+(NO\s+KEY\s+)?UPDATE\b")


def is_read(sql: str) -> bool:
    body = _LOCKS.sub("", _COMMENT.sub("", sql)).upper()
    return _WRITES.search(body) is None


def guarded() -> list[str]:
    """Every read query the guard plans, and each of its CASES; those listed
    in `LEFT` xfail strictly."""
    names = [
        name
        for name, sql in all_queries().items()
        if is_read(sql) and name not in NOT_PLANNED and name not in UNBOUNDED
    ]
    return sorted(names + [case for case, (query, _) in CASES.items() if query in names])


def left_out() -> set[str]:
    return set(NOT_PLANNED) | set(UNBOUNDED)


def buffers(conn: psycopg.Connection[Any], name: str) -> tuple[int, dict[str, Any]]:
    """`name`: a query, or a case of CASES (`query[what]`)."""
    found = explained(conn, name)
    plan: dict[str, Any] = found["Plan"]
    return plan["Shared Hit Blocks"] + plan["Shared Read Blocks"], plan


def explained(conn: psycopg.Connection[Any], name: str) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of one execution: its plan, and its `JIT`
    when the server compiled it (a server with LLVM and JIT on)."""
    sql = all_queries()[query_of(name)]
    args = params_for(name, set(_PARAM.findall(sql)))
    with conn.transaction(force_rollback=True):
        row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", args).fetchone()
    assert row is not None
    found: dict[str, Any] = row[0][0]
    return found
