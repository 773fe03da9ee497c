"""One database per test worker, put back as the template left it after
each test, instead of a database cloned and dropped for every test.

Dropping a database makes the server write a checkpoint, so a clone and a
drop per test cost the whole server about 0.2 s (docs/testing.md has the
figures). A reset costs one query when the test wrote nothing, and a
DELETE of each table it wrote otherwise.

What a reset restores: every table's rows (the template's seed rows are
copied back), every sequence's value. What it cannot restore, a change to
the schema (a test that made or dropped a partition, an index, a table),
is noticed by comparing the catalogue with the template's, and the
worker's database is then cloned afresh. Tests that need a database no
other test has touched are marked `own_database` and get a clone of
their own, as every test used to.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

# Dead rows a table may pile up before the reset vacuums it: a VACUUM
# costs milliseconds, a bloated index costs every later test's queries.
VACUUM_AFTER_DEAD_ROWS = 5_000
DEAD_TABLES = """
SELECT relname FROM pg_stat_user_tables
WHERE schemaname = 'public' AND n_dead_tup >= %s
"""

# The catalogue of the public schema, to notice a test that changed it.
SCHEMA = """
SELECT md5(string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public'
"""
# Tables that hold rows (leaves and plain tables; a partitioned table's
# rows are in its partitions).
TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY c.relname
"""
SEQUENCES = """
SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'
"""


def report_database_use(config: pytest.Config, resets: int, clones: int) -> None:
    """Hands this process's counts to the run's summary (the xdist
    controller's, or its own)."""
    output: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if output is not None:
        output["tidings_databases"] = (resets, clones)
    else:
        config.stash[_USE] = (resets, clones)


_USE = pytest.StashKey[tuple[int, int]]()
_TOTALS = pytest.StashKey[list[tuple[int, int]]]()


def collect_worker_use(node: Any) -> None:
    """On the xdist controller, as a worker ends: its counts."""
    used = node.workeroutput.get("tidings_databases")
    if used is not None:
        node.config.stash.setdefault(_TOTALS, []).append(used)


def summarize_use(terminalreporter: Any, config: pytest.Config) -> None:
    totals = list(config.stash.get(_TOTALS, []))
    if _USE in config.stash:
        totals.append(config.stash[_USE])
    if totals:
        resets, clones = (sum(t[i] for t in totals) for i in (0, 1))
        terminalreporter.write_line(
            f"databases: {resets} tests on a worker's database put back after them;"
            f" {clones} clones ({len(totals)} for the workers, the rest after a schema change)"
        )


def admin(url: str, statement: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


def clone_database(server_url: str, template: str) -> tuple[str, str]:
    """A new database copied from `template`: (its name, a DSN to it)."""
    name = f"tidings_t_{uuid.uuid4().hex[:12]}"
    admin(server_url, f"CREATE DATABASE {name} TEMPLATE {template}")
    return name, make_conninfo(server_url, dbname=name)


def drop_database(server_url: str, name: str) -> None:
    admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@dataclass
class Snapshot:
    """What the template holds that a reset puts back."""

    schema: str
    tables: list[str]
    seeds: dict[str, bytes]  # table -> its rows in COPY's binary format
    sequences: list[tuple[str, int | None]]  # last_value: None before the first


def snapshot(url: str) -> Snapshot:
    with psycopg.connect(url) as conn:
        schema = str(conn.execute(SCHEMA).fetchone()[0])  # type: ignore[index]
        tables = [r[0] for r in conn.execute(TABLES)]
        seeds: dict[str, bytes] = {}
        for table in (t for t in tables if _has_rows(conn, t)):
            query = sql.SQL("COPY {} TO STDOUT (FORMAT binary)").format(sql.Identifier(table))
            with conn.cursor().copy(query) as copy:
                seeds[table] = b"".join(bytes(chunk) for chunk in copy)
        sequences = [(r[0], r[1]) for r in conn.execute(SEQUENCES)]
    return Snapshot(schema, tables, seeds, sequences)


def _has_rows(conn: psycopg.Connection[tuple[object, ...]], table: str) -> bool:
    query = sql.SQL("SELECT EXISTS (SELECT FROM {})").format(sql.Identifier(table))
    return bool(conn.execute(query).fetchone()[0])  # type: ignore[index]


@dataclass
class WorkerDatabase:
    """The one database a test worker's tests share, one test at a time."""

    server_url: str
    template: str
    name: str = ""
    url: str = ""
    clones: int = 0
    resets: int = 0
    _template: Snapshot | None = field(default=None, repr=False)

    def open(self) -> WorkerDatabase:
        self._template = snapshot(make_conninfo(self.server_url, dbname=self.template))
        self._clone()
        return self

    def close(self) -> None:
        if self.name:
            drop_database(self.server_url, self.name)

    def reset(self) -> None:
        """Back to the template's rows, or a fresh clone if the schema moved."""
        assert self._template is not None
        admin(
            self.server_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE datname = '{self.name}' AND pid <> pg_backend_pid()",
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            schema = conn.execute(SCHEMA).fetchone()[0]  # type: ignore[index]
            if schema != self._template.schema:
                written: list[str] | None = None
            else:
                written = self._written(conn)
                if written or self._sequences_moved(conn):
                    self._restore(conn, written)
                    self._vacuum_dead(conn)
        if written is None:
            drop_database(self.server_url, self.name)
            self._clone()
        self.resets += 1

    def _clone(self) -> None:
        self.name, self.url = clone_database(self.server_url, self.template)
        self.clones += 1

    def _written(self, conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
        """The tables whose rows differ from the template's: any with rows
        but the seeded ones, which are always rewritten."""
        assert self._template is not None
        checks = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT {} WHERE EXISTS (SELECT FROM {})").format(
                sql.Literal(t), sql.Identifier(t)
            )
            for t in self._template.tables
            if t not in self._template.seeds
        )
        return [r[0] for r in conn.execute(checks)] + list(self._template.seeds)

    def _sequences_moved(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        assert self._template is not None
        now = [(r[0], r[1]) for r in conn.execute(SEQUENCES)]
        return sorted(now) != sorted(self._template.sequences)

    def _vacuum_dead(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        """VACUUM the tables whose dead rows (the tests' updates, the resets'
        deletes) have piled up. A server with autovacuum off (CI's is) never
        reclaims them: after a thousand tests `intents` held 100,000 dead
        rows, and each claim walked them in its indexes, 1.5 s a claim
        (docs/testing.md)."""
        for (table,) in conn.execute(DEAD_TABLES, (VACUUM_AFTER_DEAD_ROWS,)).fetchall():
            conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(str(table))))

    def _restore(self, conn: psycopg.Connection[tuple[object, ...]], tables: list[str]) -> None:
        assert self._template is not None
        with conn.transaction():
            # Neither foreign keys nor the tables' own triggers fire: every
            # table is emptied whole, so nothing is left half-referenced.
            conn.execute("SET LOCAL session_replication_role = replica")
            for table in tables:
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(table)))
            for table, data in self._template.seeds.items():
                query = sql.SQL("COPY {} FROM STDIN (FORMAT binary)").format(sql.Identifier(table))
                with conn.cursor().copy(query) as copy:
                    copy.write(data)
            for name, value in self._template.sequences:
                conn.execute(
                    "SELECT setval(%s::regclass, %s, %s)",
                    (name, 1 if value is None else value, value is not None),
                )
