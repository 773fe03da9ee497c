"""The job's status projection and its recipients by cursor, from rows.

A job's numbers are kept, not recounted (migrations/0033_job_counts.sql):
the schema's triggers add every change of its intents and attempts to a
few striped rows in the transaction that makes it, so a status read sums
one job's rows whatever its audience, and the numbers stay when retention
takes the evidence (docs/jobs.md). Recipient listings walk the frozen
audience by its sequence number, a stable cursor.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.errors import NotFound
from tidings.domain.job_status import derived_status, poll_after_seconds
from tidings.store import job_counts, jobs
from tidings.store.database import Row

Conn = psycopg.Connection[Any]

# Intents a policy kept from sending: not eligible, cost nothing.
EXCLUSIONS = {"suppressed", "no_permitted_channel"}


def job_status(conn: Conn, tenant: str, job_id: UUID, now: datetime) -> dict[str, Any]:
    job = jobs.by_id(conn, tenant, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    rows = job_counts.of_job(conn, tenant, job_id)
    intents = [r for r in rows if r["state"] and r["intents"]]
    counts: Counter[str] = Counter()
    by_channel: dict[str, Counter[str]] = {}
    by_code: Counter[str] = Counter()
    for row in intents:
        counts[row["state"]] += row["intents"]
        by_channel.setdefault(row["channel"], Counter())[row["state"]] += row["intents"]
        if row["code"]:
            by_code[row["code"]] += row["intents"]
    updated = max([job["updated_at"], *(r["updated_at"] for r in rows)])
    status = derived_status(job["status"], counts)
    return {
        "id": job["id"],
        "status": status,
        # Set when its preparation was set aside (store/isolation.py).
        "quarantine_code": job["quarantine_code"],
        "counts": dict(+counts),
        "counts_by_channel": {c: dict(+v) for c, v in by_channel.items() if +v},
        "counts_by_code": dict(+by_code),
        "updated_at": updated,
        "poll_after_seconds": poll_after_seconds(status, updated, now),
        "audience_size": job["audience_size"],
        "audience_version": job["audience_version"],
        "policy_version": job["policy_version"],
        "template": {"name": job["template_name"], "revisions": job["template_revisions"]},
        "event_class": job["event_class"],
        "report": {"id": job["report_id"], "revision": job["report_revision"]}
        if job["report_id"]
        else None,
        "expires_at": job["expires_at"],
        "evidence_expires_at": job["evidence_expires_at"],
        "facts_expire_at": job["facts_expire_at"],
        "created_at": job["created_at"],
        "cost": _cost(job, rows, counts),
    }


def _cost(job: Row, rows: list[Row], counts: Counter[str]) -> dict[str, Any]:
    """Seed 003's bill: attempts = eligible recipients x permitted channels
    + retries, per channel; SMS segments; the bytes of evidence the job
    holds, and until when (the later of its two retention clocks)."""
    channels: dict[str, dict[str, int]] = {}
    for row in rows:
        if not row["channel"]:
            continue
        c = channels.setdefault(
            row["channel"], {"eligible_intents": 0, "attempts": 0, "retries": 0, "segments": 0}
        )
        if row["state"] and row["state"] not in EXCLUSIONS:
            c["eligible_intents"] += row["intents"]
        c["attempts"] += row["attempts"]
        c["retries"] += row["retries"]
        c["segments"] += row["segments"]
    clocks = [t for t in (job["evidence_expires_at"], job["facts_expire_at"]) if t is not None]
    return {
        "eligible_intents": sum(n for s, n in counts.items() if s not in EXCLUSIONS),
        "attempts": sum(r["attempts"] for r in rows),
        "retries": sum(r["retries"] for r in rows),
        "attempts_reached_provider": sum(r["reached_provider"] for r in rows),
        "sms_segments": sum(r["segments"] for r in rows),
        "by_channel": channels,
        "retained_bytes": sum(r["retained_bytes"] for r in rows),
        "retained_until": max(clocks) if clocks else None,
    }


def job_recipients(conn: Conn, tenant: str, job_id: UUID, after: int, limit: int) -> dict[str, Any]:
    if jobs.by_id(conn, tenant, job_id) is None:
        raise NotFound(f"no job {job_id}")
    rows = jobs.recipient_states(conn, tenant, job_id, after, limit)
    items = [
        {
            "recipient_ref": r["recipient_ref"],
            "channel": r["channel"],
            "state": r["state"] or "queued",
            "code": r["code"],
            "intent_id": r["intent_id"],
        }
        for r in rows
    ]
    last = rows[-1]["seq"] if rows else None
    more = last is not None and len({r["seq"] for r in rows}) >= limit
    return {"items": items, "next": str(last) if more else None}
