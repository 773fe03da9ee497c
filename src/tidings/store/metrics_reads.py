"""The ledger numbers the metrics scrape reads, from rows (metrics_reads.sql).

Each function runs one scan across every tenant and returns its rows as
they come, keyed by `tenant_id`; `observability/metrics.py` turns them into
series. Nothing is counted on the side (invariant 7) but the transition
audit, which store/transition_audit.py keeps from the transitions' rows
(it folds them before the scrape reads it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg

from tidings.store.database import Row, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


def limit_statement_time(conn: Conn, ms: int) -> None:
    """Give up the transaction's statements after `ms`: a scrape or an alert
    round must not hold a pooled connection while the tables are locked.
    JIT is off for the transaction too (metrics_reads.sql says why)."""
    fetch_one(conn, "metrics_statement_timeout", {"ms": str(ms)})


def intents_by_state(conn: Conn) -> list[Row]:
    """`tenant_id, state, n`."""
    return fetch_all(conn, "metrics_intents_by_state", {})


def intents_by_code(conn: Conn) -> list[Row]:
    """`tenant_id, code, n, suppressed`."""
    return fetch_all(conn, "metrics_intents_by_code", {})


def unknown(conn: Conn) -> list[Row]:
    """`tenant_id, provider, event_class, channel, n`: outcomes that stayed unknown."""
    return fetch_all(conn, "metrics_unknown", {})


def due(conn: Conn, now: datetime) -> list[Row]:
    """`tenant_id, channel, oldest, n`: intents a worker could claim now."""
    return fetch_all(conn, "metrics_due", {"now": now})


# How many index entries a read of the oldest intent in flight may walk
# (sql/fragments/unreconciled_oldest.sql): only entries claimed before the
# first one's call started are read, so this is only reached by a claim
# storm inside one call's start, and then the oldest is the oldest of these.
OLDEST_WALK_CAP = 10_000


def unreconciled(conn: Conn) -> list[Row]:
    """`tenant_id, event_class, channel, oldest, n`: sent, no terminal evidence
    yet; `n` exact (kept counts), `oldest` exact (the index's first entries)."""
    return fetch_all(conn, "metrics_unreconciled", {"cap": OLDEST_WALK_CAP})


def last_reconciliation(conn: Conn) -> list[Row]:
    """`tenant_id, channel, at`: the newest polled, looked-up or webhook observation."""
    return fetch_all(conn, "metrics_last_reconciliation", {})


def poll_lag(conn: Conn, now: datetime) -> list[Row]:
    """`tenant_id, oldest, n`: status checks due and not done."""
    return fetch_all(conn, "metrics_poll_lag", {"now": now})


def attempts_histogram(conn: Conn, bounds: Sequence[float]) -> list[Row]:
    """`tenant_id, channel, le, n, count, sum`: attempts per terminal intent."""
    return fetch_all(conn, "metrics_attempts_histogram", {"bounds": list(bounds)})


def accept_to_terminal_histogram(conn: Conn, bounds: Sequence[float]) -> list[Row]:
    """`tenant_id, channel, le, n, count, sum`: seconds from acceptance to evidence."""
    return fetch_all(conn, "metrics_accept_to_terminal_histogram", {"bounds": list(bounds)})


def transition_audit(conn: Conn, allowed: Mapping[str, list[str]]) -> list[Row]:
    """`tenant_id, lease_recoveries, impossible`, as kept by the last fold
    (store/transition_audit.py); `allowed` holds the transition table as
    parallel `froms`, `events` and `tos` lists."""
    return fetch_all(conn, "metrics_transition_audit", allowed)


def quarantined(conn: Conn) -> list[Row]:
    """`tenant_id, code, n`: intents failed alone as undecodable or unrenderable."""
    return fetch_all(conn, "metrics_quarantined", {})
