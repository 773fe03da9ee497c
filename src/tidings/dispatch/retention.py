"""Retention: recipient-level evidence goes when its policy says, aggregate
job facts stay. Each intent's retention comes from the policy version it
was decided under, never from whatever policy is current."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tidings.store import policies
from tidings.store.database import Database, execute, fetch_all

BATCH = 1000


def purge(db: Database, now: datetime) -> dict[str, int]:
    removed = {
        "intents": 0,
        "observations": 0,
        "job_recipients": 0,
        "audience_uploads": 0,
        "destinations": 0,
    }
    with db.transaction() as conn:
        groups = fetch_all(conn, "retention_groups", {})
    for group in groups:
        removed["intents"] += _purge_group(db, group, now)
    with db.transaction() as conn:
        oldest_kept = now - timedelta(days=_shortest_observation_days(conn, groups))
        removed["observations"] = execute(conn, "purge_observations", {"before": oldest_kept})
        removed["job_recipients"] = execute(conn, "purge_job_recipients", {"now": now})
        removed["audience_uploads"] = execute(conn, "purge_expired_uploads", {"now": now})
        removed["destinations"] = execute(conn, "purge_orphan_destinations", {})
    return removed


def _purge_group(db: Database, group: dict[str, Any], now: datetime) -> int:
    tenant, version = group["tenant_id"], group["policy_version"]
    with db.transaction() as conn:
        days = policies.by_version(conn, tenant, version).retention.attempt_evidence_days
        execute(conn, "snapshot_job_counts", {"tenant_id": tenant, "now": now})
    before = now - timedelta(days=days)
    if group["oldest"] >= before:
        return 0
    total = 0
    while True:
        with db.transaction() as conn:
            n = execute(
                conn,
                "purge_intents",
                {
                    "tenant_id": tenant,
                    "policy_version": version,
                    "before": before,
                    "limit": BATCH,
                },
            )
        total += n
        if n < BATCH:
            return total


def _shortest_observation_days(conn: Any, groups: list[dict[str, Any]]) -> int:
    days = [
        policies.by_version(conn, g["tenant_id"], g["policy_version"]).retention.observation_days
        for g in groups
    ]
    return min(days, default=90)
