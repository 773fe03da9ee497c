"""The purge door: every statement that deletes evidence past its clock.

Purges delete from most ledger tables (intents with their transitions,
events, attempts and observations; jobs, job recipients, uploads, orphan
destinations). They are kept here, apart from each table's own door,
because a purge changes no row's meaning: it only forgets rows whose
retention clock ran out, in batches and by the rules of docs/retention.md
(dispatch/retention.py and dispatch/retention_months.py decide when).
`snapshot_job_counts` is here too: it writes a job's final counts just
before the first of its evidence goes, and exists only for the purge.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

import psycopg

from tidings.store.database import Row, execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]
Evidence = Literal["attempts", "observations"]

# Each purge of one group's evidence takes the group's parameters
# (tenant_id, policy_version, now, limit, before), and, for a month kept
# whole, that month's id range (`low`, `high`).
Batch = Mapping[str, Any]

_KEPT_IN_MONTH = {
    "attempts": "month_attempt_evidence_kept",
    "observations": "month_observations_kept",
}


def groups(conn: Conn) -> list[Row]:
    """Each (tenant, policy version) with evidence, and its oldest end."""
    return fetch_all(conn, "retention_groups", {})


def snapshot_job_counts(
    conn: Conn, tenant_id: str, policy_version: str, now: datetime, attempts_before: datetime
) -> None:
    execute(
        conn,
        "snapshot_job_counts",
        {
            "tenant_id": tenant_id,
            "policy_version": policy_version,
            "now": now,
            "attempts_before": attempts_before,
        },
    )


def job_evidence_due(conn: Conn, group: Batch) -> bool:
    return fetch_one(conn, "job_evidence_due", group) is not None


def observations(conn: Conn, batch: Batch, *, in_month: bool) -> int:
    """One batch of a group's observations; in the default partition or a month's."""
    return execute(
        conn, "purge_observations_of" if in_month else "purge_observations_default", batch
    )


def attempt_evidence(conn: Conn, batch: Batch, *, in_month: bool) -> tuple[int, int]:
    """One batch of a group's attempt evidence: (attempts removed, intents visited)."""
    query = "purge_attempt_evidence" if in_month else "purge_attempt_evidence_default"
    row = fetch_one(conn, query, batch)
    assert row is not None
    return int(row["attempts"]), int(row["intents"])


def intents(conn: Conn, batch: Batch) -> int:
    """One batch of a group's ended intents, with their transitions and events."""
    return execute(conn, "purge_intents", batch)


def unmatched_observations(conn: Conn, before: datetime) -> int:
    return execute(conn, "purge_observations", {"before": before})


def job_recipients(conn: Conn, now: datetime) -> int:
    return execute(conn, "purge_job_recipients", {"now": now})


def jobs(conn: Conn, now: datetime) -> int:
    return execute(conn, "purge_jobs", {"now": now})


def expired_uploads(conn: Conn, now: datetime) -> int:
    return execute(conn, "purge_expired_uploads", {"now": now})


def rate_counters(conn: Conn, batch: Batch) -> int:
    """Rate windows that ended before `before`, at most `limit` of them."""
    return execute(conn, "purge_rate_counters", batch)


def orphan_destinations(conn: Conn) -> int:
    return execute(conn, "purge_orphan_destinations", {})


def kept_in_month(conn: Conn, evidence: Evidence, params: Mapping[str, Any]) -> list[Row]:
    """The intents of a month whose evidence of this kind must stay."""
    return fetch_all(conn, _KEPT_IN_MONTH[evidence], params)
