from __future__ import annotations

import threading
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import psycopg
import pytest

from tidings.store import evidence_partitions
from tidings.store import migrate as migrations

# Also run on the embedded PostgreSQL in CI, beside the smoke processes tests
# (tests/lanes.py).
pytestmark = pytest.mark.smoke

# A catalog description that two equal schemas share, whatever the order
# their objects were created in.
CATALOG = {
    "columns": """
        SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity
        FROM information_schema.columns WHERE table_schema = 'public'
          AND table_name <> 'schema_migrations' ORDER BY 1, 2""",
    "constraints": """
        SELECT conrelid::regclass::text, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
          AND conrelid::regclass::text <> 'schema_migrations' ORDER BY 1, 2""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'public' AND tablename <> 'schema_migrations' ORDER BY 1, 2""",
}


def describe(url: str) -> dict[str, list[Any]]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in CATALOG.items()}


def test_migrations_produce_the_declared_schema(db_url: str, fresh_db: str) -> None:
    declared = resources.files("tidings.store").joinpath("sql", "schema.sql").read_text()
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute(declared.encode())
        # The months of evidence partitions migrate() makes after migrating.
        evidence_partitions.ensure(evidence_partitions.OneConnection(conn), datetime.now(UTC))
    assert describe(db_url) == describe(fresh_db)


def current_version(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
        return int(row[0]) if row else 0


def test_migrating_twice_changes_nothing(fresh_db: str) -> None:
    first = migrations.migrate(fresh_db)
    assert [m.version for m in first] == [m.version for m in migrations.available()]
    assert migrations.migrate(fresh_db) == []
    assert current_version(fresh_db) == migrations.available()[-1].version


def test_two_processes_migrating_at_once_apply_each_migration_once(fresh_db: str) -> None:
    barrier = threading.Barrier(4)
    applied: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            applied.extend(m.version for m in migrations.migrate(fresh_db))
        except BaseException as exc:  # asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(applied) == [m.version for m in migrations.available()]


def test_an_edited_migration_is_refused(fresh_db: str) -> None:
    migrations.migrate(fresh_db)
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
    with pytest.raises(migrations.MigrationError, match="changed after it was applied"):
        migrations.migrate(fresh_db)


def test_every_key_starts_with_the_tenant(db_url: str) -> None:
    # Except the cluster's own bookkeeping, a few rows that a sharded
    # PostgreSQL keeps as reference tables (DESIGN.md, storage and scale).
    sql = """
        SELECT conrelid::regclass::text, conname,
               (SELECT attname FROM pg_attribute
                 WHERE attrelid = conrelid AND attnum = conkey[1])
        FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace AND contype IN ('p', 'u')
          AND conrelid::regclass::text NOT IN
              ('schema_migrations', 'alert_rounds', 'provider_pauses', 'evidence_months',
               'transition_audit_mark', 'canary_results')"""
    with psycopg.connect(db_url) as conn:
        keys = conn.execute(sql).fetchall()
    assert keys, "no keys found"
    assert [k for k in keys if k[2] != "tenant_id"] == []
