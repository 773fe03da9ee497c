"""Reading alerts and metrics in a test, without a worker's round or a port."""

from __future__ import annotations

import time
from datetime import datetime

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from tidings.observability.alerts import evaluate_each
from tidings.observability.alerts.config import AlertConfig
from tidings.observability.alerts.rules import Alert
from tidings.observability.metrics import ledger_registry
from tidings.runtime import Runtime
from tidings.store.database import Database

# How long a test waits for the server's other sessions (another xdist
# worker's tests, in another database) to end the transactions they hold.
HORIZON_WAIT_SECONDS = 30.0


def past_the_horizon(db: Database) -> None:
    """Wait until every transaction committed so far is older than all
    running ones. The transition audit folds only those (its cursor must
    not pass a transaction that commits late, store/transition_audit.py),
    and on a shared server any session's open transaction holds it back.
    A database out of reach has nothing to wait for: the caller reports it."""
    try:
        with db.transaction() as conn:
            row = conn.execute("SELECT pg_current_xact_id() AS mine").fetchone()
    except psycopg.Error:
        return
    assert row is not None
    deadline = time.monotonic() + HORIZON_WAIT_SECONDS
    while True:
        with db.transaction() as conn:
            passed = conn.execute(
                "SELECT pg_snapshot_xmin(pg_current_snapshot()) > %s::xid8 AS passed",
                (str(row["mine"]),),
            ).fetchone()
        if passed is not None and passed["passed"]:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"a transaction on the server stayed open for 30 s: {_held(db)}")
        time.sleep(0.05)


def _held(db: Database) -> list[tuple[object, ...]]:
    """The sessions holding the horizon back, oldest first: whose, since when, doing what."""
    with db.transaction() as conn:
        rows = conn.execute(
            """SELECT datname, application_name, state, now() - xact_start AS open_for,
                      left(query, 200) AS query
               FROM pg_stat_activity
               WHERE (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)
                 AND pid <> pg_backend_pid()
               ORDER BY xact_start LIMIT 5"""
        ).fetchall()
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]


def evaluate_alerts(db: Database, now: datetime, config: AlertConfig | None = None) -> list[Alert]:
    """Every condition that holds now, across all tenants (nothing is stored),
    once what committed before the call can be audited."""
    past_the_horizon(db)
    with db.transaction() as conn:
        return evaluate_each(conn, now, config or AlertConfig.from_env()).alerts


def render_metrics(runtime: Runtime) -> tuple[bytes, str]:
    """The Prometheus text `tidings serve --metrics-port` serves: ledger rows
    plus this process, once what committed before the call can be audited."""
    past_the_horizon(runtime.db)
    return generate_latest(ledger_registry(runtime)), CONTENT_TYPE_LATEST
