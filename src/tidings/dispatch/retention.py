"""Retention: four clocks, each honoured on its own (docs/retention.md).

Receipts go at `observation_days`, an intent's attempts, transitions and
events at `attempt_evidence_days` after it ended, the recipient decision
(the intent, and a job's frozen recipients) at `recipient_evidence_days`
(a job's `evidence_expires_at`), and a job's own facts, with the final
counts kept on it, at `job_facts_days` (its `facts_expire_at`). Each
clock comes from the policy version the evidence was decided under, never
from whatever policy is current.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tidings.domain.policy_document import Retention
from tidings.store import policies
from tidings.store.database import Database, execute, fetch_all, fetch_one

BATCH = 1000


def purge(db: Database, now: datetime) -> dict[str, int]:
    removed = dict.fromkeys(
        (
            "intents",
            "attempts",
            "observations",
            "job_recipients",
            "jobs",
            "audience_uploads",
            "destinations",
        ),
        0,
    )
    with db.transaction() as conn:
        groups = fetch_all(conn, "retention_groups", {})
        clocks = {
            (g["tenant_id"], g["policy_version"]): policies.by_version(
                conn, g["tenant_id"], g["policy_version"]
            ).retention
            for g in groups
        }
    for group in groups:
        key = (group["tenant_id"], group["policy_version"])
        for kind, n in _purge_group(db, key, clocks[key], group["oldest"], now).items():
            removed[kind] += n
    shortest = min((c.observation_days for c in clocks.values()), default=90)
    with db.transaction() as conn:
        before = now - timedelta(days=shortest)
        removed["observations"] += execute(conn, "purge_observations", {"before": before})
        removed["job_recipients"] = execute(conn, "purge_job_recipients", {"now": now})
        removed["jobs"] = execute(conn, "purge_jobs", {"now": now})
        removed["audience_uploads"] = execute(conn, "purge_expired_uploads", {"now": now})
        removed["destinations"] = execute(conn, "purge_orphan_destinations", {})
    return removed


def _purge_group(
    db: Database, key: tuple[str, str], clock: Retention, oldest: datetime, now: datetime
) -> dict[str, int]:
    tenant, version = key
    group = {"tenant_id": tenant, "policy_version": version, "now": now, "limit": BATCH}
    attempts_before = now - timedelta(days=clock.attempt_evidence_days)
    with db.transaction() as conn:
        execute(conn, "snapshot_job_counts", {**group, "attempts_before": attempts_before})
    removed = {"observations": 0, "attempts": 0, "intents": 0}
    if oldest >= now - timedelta(days=min(_days(clock))) and not _job_evidence_due(db, group):
        return removed  # nothing of this group is old enough for any clock
    observations_before = now - timedelta(days=clock.observation_days)
    removed["observations"] = _in_batches(
        db, "purge_observations_of", {**group, "before": observations_before}
    )
    while True:
        with db.transaction() as conn:
            row = fetch_one(conn, "purge_attempt_evidence", {**group, "before": attempts_before})
        assert row is not None
        removed["attempts"] += int(row["attempts"])
        if int(row["intents"]) < BATCH:
            break
    recipients_before = now - timedelta(days=clock.recipient_evidence_days)
    removed["intents"] = _in_batches(db, "purge_intents", {**group, "before": recipients_before})
    return removed


def _job_evidence_due(db: Database, group: dict[str, Any]) -> bool:
    # A job's recipients go at its own evidence_expires_at, which no
    # intent's end time bounds.
    with db.transaction() as conn:
        return fetch_one(conn, "job_evidence_due", group) is not None


def _days(clock: Retention) -> tuple[int, ...]:
    return (clock.observation_days, clock.attempt_evidence_days, clock.recipient_evidence_days)


def _in_batches(db: Database, query: str, params: dict[str, Any]) -> int:
    total = 0
    while True:
        with db.transaction() as conn:
            n = execute(conn, query, params)
        total += n
        if n < BATCH:
            return total
