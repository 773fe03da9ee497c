"""One embedded PostgreSQL per run, and a fresh database per measurement.

Every database is cloned with `CREATE DATABASE ... TEMPLATE` from a template
migrated once (or seeded once), so repetitions start from identical state
without paying for migrations or seeding again.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tidings.store.migrate import migrate

MIGRATED = "bench_migrated"


class Server:
    """The run's PostgreSQL, in a temporary directory removed at close;
    `settings` (postgresql.conf names) are set before anything is measured."""

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="tidings-bench-"))
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.home))
        import pgserver  # imported late: only the benchmark run needs a server

        self._pg = pgserver.get_server(self.home / "pgdata", cleanup_mode="delete")  # type: ignore[attr-defined]
        self.url: str = self._pg.get_uri()
        self.settings = dict(settings or {})
        if self.settings:
            self._configure()
        self._names = itertools.count(1)
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        self.version = f"PostgreSQL {row[0] if row else '?'}"
        self.create(MIGRATED)
        migrate(self.dsn(MIGRATED))

    def _configure(self) -> None:
        # ALTER SYSTEM, then a restart: shared_buffers takes nothing less.
        from pgserver._commands import pg_ctl  # type: ignore[import-untyped]

        with psycopg.connect(self.url, autocommit=True) as conn:
            for name, value in self.settings.items():
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)
                    )
                )
        pg = self._pg
        pg_ctl(
            ["-w", "-m", "fast", "-l", str(pg.log), "restart"],
            pgdata=pg.pgdata,
            user=pg.system_user,
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            for name, value in self.settings.items():
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
                if row is None or row[0] != value:
                    raise RuntimeError(f"the bench server's {name} is {row}, not {value}")

    def dsn(self, database: str) -> str:
        return make_conninfo(self.url, dbname=database)

    def admin(self, statement: sql.SQL | sql.Composed | str) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(statement)

    def create(self, name: str, template: str | None = None, *, big: bool = False) -> str:
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            query += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        if big:  # copy the files, not every block through the WAL (gigabytes of it)
            query += sql.SQL(" STRATEGY = FILE_COPY")
        self.admin(query)
        return self.dsn(name)

    def fresh(self, label: str, template: str = MIGRATED, *, big: bool = False) -> tuple[str, str]:
        """A new database cloned from `template`: (name, dsn)."""
        name = f"b{next(self._names)}_{label}"[:60]
        return name, self.create(name, template, big=big)

    def drop(self, name: str) -> None:
        # FORCE: a worker killed at its time limit may leave a session behind.
        self.admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def libpq_env(self, database: str) -> dict[str, str]:
        """The connection as PG* variables, for command-line tools like pgbench."""
        parts = conninfo_to_dict(self.dsn(database))
        names = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "dbname": "PGDATABASE"}
        env = {names[k]: str(v) for k, v in parts.items() if k in names and v}
        if parts.get("password"):
            env["PGPASSWORD"] = str(parts["password"])
        return env

    def bin_dir(self) -> Path | None:
        """The server's own bin directory (pgserver ships pgbench beside postgres)."""
        import pgserver

        found = Path(pgserver.__file__).parent / "pginstall" / "bin"
        return found if found.is_dir() else None

    def close(self) -> None:
        self._pg.cleanup()
        shutil.rmtree(self.home, ignore_errors=True)
