"""Versioned SQL migrations, applied in order, once, each under an advisory lock.

Two processes migrating at once serialize on the lock; the second finds
nothing left to do. A migration file that changed after it was applied is
refused: history is not rewritten.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import psycopg

from tidings.store import evidence_partitions

# Any fixed 64-bit number works; this one spells "tidings" in ASCII.
MIGRATION_LOCK = 0x74696469_6E6773


class MigrationError(Exception):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available() -> list[Migration]:
    folder = resources.files("tidings.store").joinpath("sql", "migrations")
    found = []
    for item in folder.iterdir():
        if item.name.endswith(".sql"):
            number, _, rest = item.name.partition("_")
            found.append(Migration(int(number), rest.removesuffix(".sql"), item.read_text()))
    found.sort(key=lambda m: m.version)
    if len({m.version for m in found}) != len(found):
        raise MigrationError("two migrations share a version number")
    return found


def migrate(url: str) -> list[Migration]:
    """Apply every pending migration, then make the evidence tables' months
    up to a few ahead of now (store/evidence_partitions.py); returns the
    migrations applied now.

    Each migration runs in its own transaction under a transaction-scoped
    advisory lock, read again inside it: through a transaction pooler
    (PgBouncer) a session lock could be taken on one server connection and
    released on another, and the statements of one session are not pinned
    to one server connection either.
    """
    applied = []
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        for migration in available():
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                if _apply_if_pending(conn, migration):
                    applied.append(migration)
        evidence_partitions.ensure(evidence_partitions.OneConnection(conn), datetime.now(UTC))
    return applied


def _apply_if_pending(conn: psycopg.Connection[Any], migration: Migration) -> bool:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )
    row = conn.execute(
        "SELECT checksum FROM schema_migrations WHERE version = %s", (migration.version,)
    ).fetchone()
    if row is not None:
        if row[0] != migration.checksum:
            raise MigrationError(
                f"migration {migration.version} ({migration.name}) changed after it was applied"
            )
        return False
    conn.execute(migration.sql.encode())
    conn.execute(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
        (migration.version, migration.name, migration.checksum),
    )
    return True
