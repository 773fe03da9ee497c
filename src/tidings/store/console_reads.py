"""What the console's pages read from one tenant's rows (console_reads.sql).

Only states, codes, times, ids and counts: no destination, token, link,
variables or rendered body is read here. `console/data.py` shapes these
rows into pages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.store.database import Row, fetch_all, fetch_one
from tidings.store.metrics_reads import OLDEST_WALK_CAP

Conn = psycopg.Connection[Any]


def without_jit(conn: Conn) -> None:
    """No JIT for the rest of the transaction (console_reads.sql says why)."""
    fetch_one(conn, "console_without_jit", {})


def state_counts(conn: Conn, tenant: str) -> dict[str, int]:
    """Intents per current state."""
    return {r["state"]: r["n"] for r in fetch_all(conn, "console_counts", {"tenant_id": tenant})}


def codes(conn: Conn, tenant: str) -> list[Row]:
    """`code, state, n`: intents per decision code, most first."""
    return fetch_all(conn, "console_codes", {"tenant_id": tenant})


# The console counts due intents up to here and says "more than" past it:
# the oldest is what an operator acts on, and a million counted exactly
# would cost the page a scan of the backlog.
DUE_COUNT_CAP = 10_000


def due(conn: Conn, tenant: str, now: datetime) -> list[Row]:
    """`channel, lane, oldest, n, more`: intents due now and not claimed; `n`
    stops at DUE_COUNT_CAP, with `more` when there are more."""
    rows = fetch_all(conn, "console_due", {"tenant_id": tenant, "now": now, "cap": DUE_COUNT_CAP})
    return [{**r, "n": min(r["n"], DUE_COUNT_CAP), "more": r["n"] > DUE_COUNT_CAP} for r in rows]


def unreconciled(conn: Conn, tenant: str) -> list[Row]:
    """`event_class, channel, oldest, n`: sent, no terminal evidence yet; `n`
    exact (kept counts) and `oldest` exact (the index's first entries)."""
    params = {"tenant_id": tenant, "cap": OLDEST_WALK_CAP}
    return fetch_all(conn, "console_unreconciled", params)


def last_reconciliation(conn: Conn, tenant: str) -> dict[str, datetime]:
    """Per channel, the newest polled, looked-up or webhook observation."""
    rows = fetch_all(conn, "console_last_reconciliation", {"tenant_id": tenant})
    return {r["channel"]: r["at"] for r in rows}


def alerts(conn: Conn, tenant: str, since: datetime) -> list[Row]:
    """Open alerts and those resolved since `since`, open and paging first."""
    return fetch_all(conn, "console_alerts", {"tenant_id": tenant, "since": since})


def oldest(conn: Conn, tenant: str, limit: int) -> list[Row]:
    """The oldest nonterminal intents: where an operator starts reading."""
    return fetch_all(conn, "console_oldest", {"tenant_id": tenant, "limit": limit})


def state_changes(conn: Conn, tenant: str, since: datetime) -> list[Row]:
    """`minute, from_state, to_state, n`: transitions per minute since `since`."""
    return fetch_all(conn, "console_state_changes", {"tenant_id": tenant, "since": since})


def jobs_table_present(conn: Conn) -> bool:
    return bool((fetch_one(conn, "console_jobs_table", {}) or {}).get("present"))


def recent_jobs(conn: Conn, tenant: str, limit: int) -> list[dict[str, Any]]:
    """The newest jobs, each its whole row as a JSON object."""
    rows = fetch_all(conn, "console_jobs", {"tenant_id": tenant, "limit": limit})
    return [r["job"] for r in rows]


def spend_used(
    conn: Conn, tenant: str, windows: list[tuple[str, datetime]]
) -> dict[tuple[str, datetime], int]:
    """Segments spent per (country spend key, window start) asked for."""
    params = {
        "tenant_id": tenant,
        "keys": [k for k, _ in windows],
        "windows": [w for _, w in windows],
    }
    rows = fetch_all(conn, "console_spend_used", params)
    return {(r["key"], r["window_start"]): r["used"] for r in rows}


def event_classes(conn: Conn, tenant: str) -> list[Row]:
    """`event_class, channel, state, n, last_at` from the kept counts."""
    return fetch_all(conn, "console_event_classes", {"tenant_id": tenant})


def cancellation(conn: Conn, tenant: str, intent_id: UUID) -> Row | None:
    """`at, actor` of the intent's cancel, if it was canceled."""
    return fetch_one(conn, "console_cancellation", {"tenant_id": tenant, "id": intent_id})


def last_observation(conn: Conn, tenant: str, intent_id: UUID) -> Row | None:
    """The newest provider observation of the intent, without its payload."""
    return fetch_one(conn, "console_last_observation", {"tenant_id": tenant, "id": intent_id})
