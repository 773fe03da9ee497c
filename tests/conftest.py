"""Databases for tests: a real PostgreSQL, a fresh database per test.

TIDINGS_TEST_DATABASE_URL names a server to use (a DSN to any database on
it; the role must be able to create databases). Without it the suite starts
its own embedded PostgreSQL from the pgserver wheel, the product's default.
Each test gets a database cloned from a template migrated once per run.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tidings import ManualClock, Tidings
from tidings.policies import builtin_document
from tidings.store import policies as policy_store
from tidings.store.migrate import migrate

TEST_SECRET = "test-secret-key-0123456789abcdef"


def _admin(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def clone_database(server_url: str, template: str) -> tuple[str, str]:
    """A new database copied from `template`: (its name, a DSN to it)."""
    name = f"tidings_t_{uuid.uuid4().hex[:12]}"
    _admin(server_url, f"CREATE DATABASE {name} TEMPLATE {template}")
    return name, make_conninfo(server_url, dbname=name)


def drop_database(server_url: str, name: str) -> None:
    _admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    configured = os.environ.get("TIDINGS_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    import pgserver

    pgdata = Path(tempfile.mkdtemp(prefix="tidings-test-pg-"))
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def template_db(pg_server_url: str) -> Iterator[str]:
    name = f"tidings_tpl_{os.getpid()}"
    _admin(pg_server_url, f"DROP DATABASE IF EXISTS {name}")
    _admin(pg_server_url, f"CREATE DATABASE {name}")
    migrate(make_conninfo(pg_server_url, dbname=name))
    yield name
    _admin(pg_server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def fresh_db(pg_server_url: str) -> Iterator[str]:
    """An empty database (no migrations) for tests of migrating itself."""
    name = f"tidings_t_{uuid.uuid4().hex[:12]}"
    _admin(pg_server_url, f"CREATE DATABASE {name}")
    yield make_conninfo(pg_server_url, dbname=name)
    _admin(pg_server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def db_url(pg_server_url: str, template_db: str) -> Iterator[str]:
    name, url = clone_database(pg_server_url, template_db)
    yield url
    drop_database(pg_server_url, name)


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
