"""The job's status projection and its recipients by cursor, from rows.

Nothing here is cached: counts come from the job's intents, so a status can
never disagree with the rows it summarises, until retention takes them;
then the final counts it kept on the job are served (docs/retention.md). Recipient listings walk the
frozen audience by its sequence number, a stable cursor.
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.errors import NotFound
from tidings.domain.states import TERMINAL_INTENT, IntentState
from tidings.store import jobs

Conn = psycopg.Connection[Any]

# Terminal outcomes that mean a recipient did not get the message it was
# meant to get; exclusions decided by policy are reported, not failures.
FAILURES = {IntentState.FAILED, IntentState.EXPIRED, IntentState.UNKNOWN}


def job_status(conn: Conn, tenant: str, job_id: UUID) -> dict[str, Any]:
    job = jobs.by_id(conn, tenant, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    counts: Counter[str] = Counter()
    by_channel: dict[str, Counter[str]] = {}
    if job["final_counts"] is not None:
        # Kept by retention before the first of the job's evidence went.
        counts.update(job["final_counts"])
        for channel, states in (job["final_counts_by_channel"] or {}).items():
            by_channel[channel] = Counter(states)
        cost: dict[str, Any] = job["final_cost"] or {}
        updated = job["updated_at"]
    else:
        rows = jobs.counts(conn, tenant, job_id)
        for row in rows:
            counts[row["state"]] += row["n"]
            by_channel.setdefault(row["channel"], Counter())[row["state"]] += row["n"]
        cost = jobs.segments(conn, tenant, job_id) or {}
        updated = max([job["updated_at"], *(r["updated_at"] for r in rows)])
    return {
        "id": job["id"],
        "status": _status(job["status"], counts),
        # Set when its preparation was set aside (store/isolation.py).
        "quarantine_code": job["quarantine_code"],
        "counts": dict(counts),
        "counts_by_channel": {c: dict(v) for c, v in by_channel.items()},
        "updated_at": updated,
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
        "cost": {
            "eligible_intents": sum(
                n for s, n in counts.items() if s not in ("suppressed", "no_permitted_channel")
            ),
            "attempts": int(cost.get("attempts", 0)),
            "attempts_reached_provider": int(cost.get("reached_provider", 0)),
            "sms_segments": int(cost.get("segments", 0)),
        },
    }


def _status(stored: str, counts: Counter[str]) -> str:
    if stored == "preparing":
        return "preparing"
    if any(IntentState(s) not in TERMINAL_INTENT for s in counts):
        return "dispatching"
    if any(IntentState(s) in FAILURES for s in counts):
        return "complete_with_failures"
    return "complete"


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
