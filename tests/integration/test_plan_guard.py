"""The plan guard (issue 38, docs/testing.md): every read query of
`store/sql/queries/` costs its page or its key, on tables never analyzed.

The tables are loaded (plan_guard/load.sql: 120,000 intents with their
attempts, receipts, audit, events and job recipients, three tenants, four
jobs) with autovacuum off, so the planner sees them as a fresh job's
tables are seen in production: sized, never analyzed. Each read query runs
under EXPLAIN (ANALYZE, BUFFERS) with the parameters of plan_guard/params.py
(and again with each of its CASES there: the filters its defaults leave out);
then as much history again is loaded (plan_guard/grow.sql) and each query
runs again. A query fails when it reads more shared buffers than its bound
(a page of 50 rows: 1,000), or when the second load shows in what it reads:
its cost followed the tables, not its page or its key.

Queries that cannot be bounded are listed in params.py with the reason;
reads of a backlog, and reads that stop at a cap of rows, with their bound.

And no read is JIT-compiled where it runs with JIT on: the planner prices
some reads as if they read whole tables, and on a server with LLVM the
compiling alone took seconds (the claim in the hour's soak: 7.6 s of a
7.7 s claim). The reads whose transactions turn JIT off are named in
params.py (`WITHOUT_JIT`); on a server without LLVM (the embedded one)
nothing is ever compiled and the check holds trivially.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pglast
import psycopg
import pytest

from tests.databases import clone_database, drop_database

from .plan_guard.explain import explained, guarded, is_read, query_of
from .plan_guard.params import (
    BACKLOG,
    CAPPED,
    CASES,
    LEFT,
    NOT_PLANNED,
    UNBOUNDED,
    WITHOUT_JIT,
)

HERE = Path(__file__).parent / "plan_guard"
# A page of 50 rows read by index: a few hundred buffers. A scan of any of
# the loaded tables: thousands.
PAGE_BOUND = 1000
# What the second load may add to a query's reads: noise, not a table.
GROWTH = 1.25
GROWTH_SLACK = 50

Measured = dict[str, tuple[int, int]]
Compiled = dict[str, bool]  # JIT-compiled on the first or the second load


def _autovacuum_off(conn: psycopg.Connection[Any]) -> None:
    # Nothing may analyze the tables behind the guard's back: the plans
    # must be right on tables as young as a fresh job's.
    tables = conn.execute(
        "SELECT oid::regclass::text FROM pg_class WHERE relkind = 'r'"
        " AND relnamespace = 'public'::regnamespace"
    ).fetchall()
    for (table,) in tables:
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")


def _run_each(conn: psycopg.Connection[Any], script: Path) -> None:
    # A statement at a time, each its own transaction: one transaction for
    # the whole load would hold the server's oldest-transaction horizon for
    # half a minute, and tests beside it that wait for that horizon to pass
    # (observability_helpers.past_the_horizon) would give up.
    for statement in pglast.split(script.read_text()):
        conn.execute(statement.encode())


def _measure(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, bool]]:
    found = {}
    for name in guarded():
        explain = explained(conn, name)
        plan = explain["Plan"]
        found[name] = (plan["Shared Hit Blocks"] + plan["Shared Read Blocks"], "JIT" in explain)
    return found


@pytest.fixture(scope="module")
def loaded(pg_server_url: str, template_db: str) -> Iterator[tuple[Measured, Compiled]]:
    name, url = clone_database(pg_server_url, template_db)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _autovacuum_off(conn)
            _run_each(conn, HERE / "load.sql")
            first = _measure(conn)
            _run_each(conn, HERE / "grow.sql")
            second = _measure(conn)
            never = conn.execute(
                "SELECT count(*) FROM pg_stat_user_tables"
                " WHERE last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL"
            ).fetchone()
        assert never == (0,), "a table was analyzed during the guard"
        yield (
            {n: (first[n][0], second[n][0]) for n in first},
            {n: first[n][1] or second[n][1] for n in first},
        )
    finally:
        drop_database(pg_server_url, name)


def _cases() -> list[Any]:
    cases = []
    for name in guarded():
        marks = []
        if name in LEFT:
            marks.append(pytest.mark.xfail(strict=True, reason=LEFT[name]))
        cases.append(pytest.param(name, marks=marks, id=name))
    return cases


@pytest.fixture(scope="module")
def measured(loaded: tuple[Measured, Compiled]) -> Measured:
    return loaded[0]


@pytest.mark.parametrize("name", _cases())
def test_a_read_costs_its_page_not_its_tables(measured: Measured, name: str) -> None:
    first, second = measured[name]
    bound = CAPPED.get(name, BACKLOG.get(name, PAGE_BOUND))
    assert first <= bound, f"{name} read {first} buffers for one page (bound {bound})"
    assert second <= first * GROWTH + GROWTH_SLACK, (
        f"{name} read {first} buffers, then {second} with as much history again: "
        "it reads the tables, not its page"
    )


def test_no_read_is_compiled_where_jit_is_on(loaded: tuple[Measured, Compiled]) -> None:
    compiled = sorted(
        name
        for name, jit in loaded[1].items()
        if jit and not query_of(name).startswith(WITHOUT_JIT)
    )
    assert not compiled, f"JIT-compiled on the guard's tables: {compiled}"


def test_every_exception_names_a_query_and_a_reason() -> None:
    from tidings.store.queries import all_queries

    queries = all_queries()
    listed = set(NOT_PLANNED) | set(UNBOUNDED) | set(BACKLOG) | set(CAPPED) | set(LEFT)
    assert listed <= set(queries), listed - set(queries)
    assert not set(CAPPED) & set(BACKLOG), "a read is bounded by its cap or by its backlog"
    capped = set(UNBOUNDED) | set(BACKLOG) | set(CAPPED) | set(LEFT)
    assert all(is_read(queries[n]) for n in capped)
    assert all("%(cap)s" in queries[n] for n in CAPPED)
    assert all(reason for reason in {**NOT_PLANNED, **UNBOUNDED, **LEFT}.values())
    # Each case plans a query the guard plans, so none is silently skipped.
    assert {query for query, _ in CASES.values()} <= set(guarded())


def test_the_loads_are_packaged_beside_the_guard() -> None:
    # The .sql fixtures are read from the test's folder, not the package.
    assert (HERE / "load.sql").is_file() and (HERE / "grow.sql").is_file()
    assert resources.files("tidings.store").joinpath("sql", "queries").is_dir()
