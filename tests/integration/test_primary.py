"""Waiting for a primary (store/primary.py): a connection that reaches a
read-only member or is lost says so once, in the logs and the process
metrics, and only a create keyed by its idempotency key is run again.

The read-only member is a real server session with
`default_transaction_read_only` on, as a hot standby answers; the lost
connection is one whose backend is terminated on the server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from prometheus_client import generate_latest
from psycopg.conninfo import make_conninfo

from tidings import Tidings
from tidings.client.base import Recorded
from tidings.domain.ids import uuid7
from tidings.domain.intent import Intent
from tidings.observability.process_metrics import PROCESS_REGISTRY
from tidings.store.database import Database
from tidings.store.primary import WATCH, ConnectionOutOfStep, PrimaryUnavailable

from .dispatch_helpers import offer_request, publish_offer_template


def waiting_gauge() -> float:
    for line in generate_latest(PROCESS_REGISTRY).decode().splitlines():
        if line.startswith("tidings_database_waiting_for_primary "):
            return float(line.split()[1])
    raise AssertionError("tidings_database_waiting_for_primary is not exported")


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url, max_size=2)
    with database.transaction() as conn:  # starts from a reached primary
        conn.execute("SELECT 1")
    yield database
    database.close()


def test_a_read_only_member_is_no_primary_and_its_connection_is_dropped(
    db: Database, db_url: str
) -> None:
    standby = Database(
        make_conninfo(db_url, options="-c default_transaction_read_only=on"), max_size=1
    )
    try:
        with pytest.raises(PrimaryUnavailable), standby.transaction() as conn:
            conn.execute("CREATE TEMPORARY TABLE t (x int)")
        assert WATCH.waiting
        assert waiting_gauge() == 1.0
        # The pool threw the connection away instead of handing it out again.
        assert (
            standby.pool.get_stats().get("connections_lost", 0)
            + standby.pool.get_stats().get("returns_bad", 0)
            >= 1
        )
    finally:
        standby.close()
    waits = WATCH.waits
    with db.transaction() as conn:
        conn.execute("SELECT 1")
    assert not WATCH.waiting and WATCH.waits == waits + 1
    assert waiting_gauge() == 0.0


def test_a_connection_out_of_step_is_no_primary_and_is_dropped(db: Database) -> None:
    """psycopg's own complaint that the server's answers did not match its
    command, as PgBouncer once produced for a `BEGIN` right after its server
    was killed (docs/reliability.md): the API must answer 503, not 500, and
    the pool must not hand the connection out again."""
    stats = db.pool.get_stats()
    dropped_before = stats.get("connections_lost", 0) + stats.get("returns_bad", 0)
    with pytest.raises(ConnectionOutOfStep) as raised, db.transaction():
        raise psycopg.InternalError("received 2 results from command 'BEGIN'")
    assert isinstance(raised.value, psycopg.OperationalError)
    assert WATCH.waiting
    stats = db.pool.get_stats()
    assert stats.get("connections_lost", 0) + stats.get("returns_bad", 0) > dropped_before
    with db.transaction() as conn:
        conn.execute("SELECT 1")
    assert not WATCH.waiting


def test_a_server_error_of_class_xx_is_about_the_statement(db: Database) -> None:
    """Only psycopg's own protocol errors (no SQLSTATE) are read as a lost
    connection; the server's internal errors keep their meaning."""
    with pytest.raises(psycopg.errors.InternalError) as raised, db.transaction() as conn:
        conn.execute("DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = 'XX000'; END $$")
    assert raised.value.sqlstate == "XX000"
    assert not isinstance(raised.value, psycopg.OperationalError)
    assert not WATCH.waiting


def test_a_lost_connection_is_run_again_when_the_work_is_safe_to_repeat(db: Database) -> None:
    runs: list[int] = []

    def work(conn: psycopg.Connection[Any]) -> int:
        runs.append(1)
        if len(runs) == 1:  # the server drops this session, as a dying primary does
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        row = conn.execute("SELECT 42 AS answer").fetchone()
        assert row is not None
        return int(row["answer"])

    assert db.statements_again(work) == 42
    assert len(runs) == 2
    assert not WATCH.waiting


def test_an_error_about_the_statement_is_not_run_again(db: Database) -> None:
    runs: list[int] = []

    def work(conn: psycopg.Connection[Any]) -> None:
        runs.append(1)
        conn.execute("SELECT 1 / 0")

    with pytest.raises(psycopg.errors.DivisionByZero):
        db.statements_again(work)
    assert len(runs) == 1
    assert not WATCH.waiting


def test_a_create_whose_commit_answer_was_lost_is_still_a_creation_when_run_again(
    tidings: Tidings,
) -> None:
    # The API chooses the id once and runs the create again on a lost
    # connection; the second run finds the first run's committed intent and
    # must answer 201 for it, not 200 as for a client's replay.
    publish_offer_template(tidings)
    chosen = uuid7(tidings.now())
    request = offer_request(tidings)
    runs: list[bool] = []

    def create(conn: psycopg.Connection[Any]) -> Recorded[Intent]:
        recorded = tidings.record_intent(actor="test", conn=conn, intent_id=chosen, **request)
        runs.append(recorded.created)
        if len(runs) == 1:  # committed (autocommit), then the answer is lost
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return recorded

    recorded = tidings.autocommit_again(create)
    assert runs == [True, True]
    assert recorded.created and recorded.item.id == chosen
    # A client's own replay of the same key is still a replay.
    again = tidings.record_intent(actor="test", **request)
    assert not again.created and again.item.id == chosen


def test_a_scrape_while_the_pool_is_busy_answers_ledger_down_and_blames_no_primary(
    db_url: str,
) -> None:
    # The scrape waits only briefly for a connection: during a failover it
    # must still answer with this process's series (the waiting gauge above
    # all). A busy pool is no news about the primary.
    from types import SimpleNamespace

    from tidings import ManualClock
    from tidings.observability.metrics import ledger_registry

    database = Database(db_url, max_size=1)
    try:
        runtime = SimpleNamespace(db=database, clock=ManualClock())
        with database.pool.connection():  # the pool's only connection, held
            body = generate_latest(ledger_registry(runtime)).decode()  # type: ignore[arg-type]
        assert "tidings_ledger_up 0.0" in body
        assert "tidings_database_waiting_for_primary 0.0" in body
        assert not WATCH.waiting
    finally:
        database.close()
