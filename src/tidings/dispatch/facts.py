"""What the policy needs to know about a recipient, read in the claim
transaction: consent evidence, opt-out, suppression and recent sends.

Counting recent sends and opening the next attempt happen under a
per-recipient advisory lock held until the claim commits, so concurrent
workers can never both see room under a frequency cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.intent import Intent
from tidings.domain.policy import CapUsage, ConsentEvidence, PolicyRequest, cap_windows
from tidings.domain.policy_document import Policy
from tidings.store import contacts

Conn = psycopg.Connection[Any]


def recipient_facts(
    conn: Conn, intent: Intent, policy: Policy, now: datetime, row: Mapping[str, Any]
) -> PolicyRequest:
    """Facts from the claim's own row when it brought them, else read now."""
    if "fact_opted_out" in row:
        opted_out, suppressed = bool(row["fact_opted_out"]), row["fact_suppressed"]
        evidence = tuple(_evidence(intent.channel, c) for c in row["fact_consents"])
        contact_timezone = row["fact_contact_timezone"]
    else:
        blocks = contacts.blocks_for(
            conn, intent.tenant_id, intent.channel, intent.destination_hash or ""
        )
        opted_out, suppressed = blocks.opted_out, blocks.suppressed
        evidence = tuple(
            ConsentEvidence(
                r["channel"],
                r["purpose"],
                r["captured_at"],
                r["revoked_at"],
                evidence_id=r["id"],
                evidence_ref=r["evidence_ref"],
            )
            for r in contacts.consents_for(
                conn, intent.tenant_id, intent.recipient_ref, intent.channel
            )
        )
        contact_timezone = _contact_timezone(conn, intent)
    timezone = intent.timezone or contact_timezone
    source = "intent" if intent.timezone else "contact" if contact_timezone else None
    return PolicyRequest(
        channel=intent.channel,
        purpose=intent.purpose,
        event_class=intent.event_class,
        country=intent.country,
        timezone=timezone,
        timezone_source=source,
        consents=evidence,
        opted_out=opted_out,
        suppressed=suppressed is not None,
        suppression_reason=suppressed,
        now=now,
        expires_at=intent.expires_at,
        recent_sends=_recent_sends(conn, intent, policy, now),
        fallback_timezones=tuple(intent.candidate_timezones) if timezone is None else (),
    )


def _evidence(channel: str, item: Mapping[str, Any]) -> ConsentEvidence:
    revoked = item.get("revoked_at")
    return ConsentEvidence(
        channel,
        item["purpose"],
        datetime.fromisoformat(item["captured_at"]),
        datetime.fromisoformat(revoked) if revoked else None,
        evidence_id=item.get("id"),
        evidence_ref=item.get("evidence_ref"),
    )


def _contact_timezone(conn: Conn, intent: Intent) -> str | None:
    found = contacts.contact(conn, intent.tenant_id, intent.recipient_ref)
    return found["timezone"] if found else None


def _recent_sends(conn: Conn, intent: Intent, policy: Policy, now: datetime) -> dict[str, CapUsage]:
    windows = cap_windows(policy, intent.channel, intent.purpose, now)
    if not windows:
        return {}
    contacts.lock_recipient(conn, intent.tenant_id, intent.recipient_ref, intent.channel)
    usage = {}
    for window in windows:
        count, oldest_at = contacts.recent_sends(
            conn,
            intent.tenant_id,
            intent.recipient_ref,
            intent.channel,
            since=window.since,
            purposes=sorted(window.purposes) if window.purposes is not None else None,
        )
        usage[window.cap_id] = CapUsage(count, oldest_at)
    return usage
