"""Waiting for the system to catch up after the faults: the backlog
drained (nothing overdue, no lost lease, no overdue check), then settled
(nothing in flight), so the rows and the provider's ledger can be compared.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg

DUE_SQL = (
    "SELECT count(*) FROM intents WHERE state IN ('pending', 'resend_due') AND next_due_at <= now()"
)
BACKLOG_SQL = """
SELECT
  (SELECT count(*) FROM intents WHERE state IN ('pending', 'resend_due')
     AND next_due_at < now() - interval '5 seconds') AS overdue,
  (SELECT count(*) FROM intents WHERE state = 'sending'
     AND lease_expires_at < now() - interval '5 seconds') AS lost_leases,
  (SELECT count(*) FROM attempts WHERE state IN ('sending', 'accepted', 'unknown')
     AND next_check_at < now() - interval '10 seconds') AS overdue_checks,
  (SELECT count(*) FROM intents WHERE state = 'sending') AS sending
"""


def backlog(db_url: str) -> dict[str, int]:
    with psycopg.connect(db_url, connect_timeout=5) as conn:
        cur = conn.execute(BACKLOG_SQL)
        row = cur.fetchone()
        assert row is not None and cur.description is not None
        return {d.name: int(v) for d, v in zip(cur.description, row, strict=True)}


def wait_until(
    db_url: str, predicate: Callable[[dict[str, int]], bool], timeout: float
) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if predicate(backlog(db_url)):
                return time.monotonic() - started
        except psycopg.OperationalError:
            pass
        time.sleep(0.5)  # polling real processes; bounded by the timeout
    return None


def wait_drained(db_url: str, timeout: float) -> float | None:
    """Every due intent claimed, every lost lease recovered, no check overdue."""
    return wait_until(
        db_url,
        lambda b: b["overdue"] == 0 and b["lost_leases"] == 0 and b["overdue_checks"] == 0,
        timeout,
    )


def wait_settled(db_url: str, timeout: float) -> float | None:
    """Nothing in flight, so the rows and the provider's ledger can be compared."""
    return wait_until(
        db_url, lambda b: b["sending"] == 0 and b["overdue"] == 0 and b["lost_leases"] == 0, timeout
    )
