"""Databases for tests: a real PostgreSQL, a database no other test left
anything in.

TIDINGS_TEST_DATABASE_URL names a server to use (a DSN to any database on
it; the role must be able to create databases). Without it the suite starts
its own embedded PostgreSQL from the pgserver wheel, the product's default.
The embedded server is shared by every xdist worker of a run (pgserver
counts its users and stops it after the last). Each worker migrates a
template once and clones one database from it, which its tests use one
after another, put back after each (tests/databases.py); a test marked
`own_database` gets a clone of its own.

Which tests run where (pure, database, processes, long): tests/lanes.py.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import make_conninfo

from tidings import ManualClock, Tidings
from tidings.policies import builtin_document
from tidings.store import policies as policy_store
from tidings.store.migrate import migrate

from .databases import (
    WorkerDatabase,
    admin,
    clone_database,
    collect_worker_use,
    drop_database,
    report_database_use,
    summarize_use,
)

pytest_plugins = ["tests.lanes"]

TEST_SECRET = "test-secret-key-0123456789abcdef"


def pytest_testnodedown(node: Any, error: Any) -> None:
    collect_worker_use(node)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    summarize_use(terminalreporter, config)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    configured = os.environ.get("TIDINGS_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    import pgserver

    # One server for the whole run: xdist's workers share its run id.
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    pgdata = Path(tempfile.gettempdir()) / f"tidings-test-pg-{run_id[:12]}"
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def template_db(pg_server_url: str) -> Iterator[str]:
    name = f"tidings_tpl_{os.getpid()}"
    admin(pg_server_url, f"DROP DATABASE IF EXISTS {name}")
    admin(pg_server_url, f"CREATE DATABASE {name}")
    migrate(make_conninfo(pg_server_url, dbname=name))
    yield name
    admin(pg_server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def worker_db(
    pg_server_url: str, template_db: str, pytestconfig: pytest.Config
) -> Iterator[WorkerDatabase]:
    shared = WorkerDatabase(pg_server_url, template_db).open()
    yield shared
    shared.close()
    report_database_use(pytestconfig, shared.resets, shared.clones)


@pytest.fixture
def fresh_db(pg_server_url: str) -> Iterator[str]:
    """An empty database (no migrations) for tests of migrating itself."""
    name = f"tidings_t_{uuid.uuid4().hex[:12]}"
    admin(pg_server_url, f"CREATE DATABASE {name}")
    yield make_conninfo(pg_server_url, dbname=name)
    admin(pg_server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def db_url(request: pytest.FixtureRequest, pg_server_url: str, template_db: str) -> Iterator[str]:
    """A migrated database for this test alone: the worker's, reset after
    the test (tests/databases.py), or a clone of its own for a test marked
    `own_database`."""
    # TIDINGS_TEST_DATABASE_PER_TEST=1: every test a clone of its own, as
    # before the reset (to compare the two, or to rule the reset out).
    # Parsed policies are kept per process by (tenant, version): immutable in
    # one database, but two tests may publish one version with other content.
    policy_store._cache.clear()
    alone = os.environ.get("TIDINGS_TEST_DATABASE_PER_TEST") == "1"
    if alone or request.node.get_closest_marker("own_database") is not None:
        name, url = clone_database(pg_server_url, template_db)
        yield url
        drop_database(pg_server_url, name)
        return
    shared: WorkerDatabase = request.getfixturevalue("worker_db")
    yield shared.url
    shared.reset()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


EXAMPLE_POLICY = "default"


def publish_example_policy(t: Tidings, tenant: str | None = None) -> str:
    """Publish the shipped example policy (tidings/policies/default.json) for
    `tenant` (the client's own by default); its version.

    A tenant with no published policy is denied everything (POLICY_MISSING),
    so every fixture that stands for "a tenant set up to send" calls this.
    """
    target = t if tenant is None else t.for_tenant(tenant)
    # Published a moment before "now", so a policy the test publishes itself
    # at the same (manual) instant is the newer one.
    target._ensure_tenant()
    with target.db.transaction() as conn:
        published_at = target.clock.now() - timedelta(seconds=1)
        return policy_store.publish(
            conn, target.tenant, builtin_document(EXAMPLE_POLICY), published_at, "test"
        ).version


def with_example_policy(t: Tidings) -> Tidings:
    """`t`, its tenant's example policy published (for setups that make their
    own client: e2e processes, several engines)."""
    publish_example_policy(t)
    return t


@pytest.fixture
def tidings(request: pytest.FixtureRequest, db_url: str, clock: ManualClock) -> Iterator[Tidings]:
    """A client of the `default` tenant, with the example policy published;
    mark a test `@pytest.mark.no_policy` for a tenant that has published none."""
    t = Tidings(db_url, clock=clock, secret_key=TEST_SECRET)
    if request.node.get_closest_marker("no_policy") is None:
        publish_example_policy(t)
    yield t
    t.close()
