"""Contacts, consent evidence, opt-outs and suppressions.

Destinations are stored once, encrypted, in `destinations`; everything here
refers to them by keyed hash. Opt-outs and suppressions are per channel and
destination, because a STOP or a bounce comes from an address, not a person.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.errors import InvalidInput
from tidings.domain.moments import check_moment, optional_moment
from tidings.domain.recipients import check_timezone, normalize_email, normalize_phone
from tidings.platform.vault import Vault
from tidings.store import ledger
from tidings.store.database import execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class ConsentRecord:
    channel: str
    purpose: str
    source: str
    captured_at: datetime
    evidence_ref: str | None = None
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class Blocks:
    opted_out: bool
    suppressed: str | None


def put_contact(
    conn: Conn,
    tenant: str,
    ref: str,
    vault: Vault,
    now: datetime,
    *,
    phone: str | None = None,
    email: str | None = None,
    timezone: str | None = None,
    locale: str | None = None,
    preferences: Mapping[str, Any] | None = None,
    consents: Sequence[ConsentRecord] = (),
) -> dict[str, Any]:
    for consent in consents:  # all of it valid before anything is written
        check_consent(consent)
    phone_hash = _store(conn, tenant, vault, "sms", phone) if phone else None
    email_hash = _store(conn, tenant, vault, "email", email) if email else None
    row = fetch_one(
        conn,
        "upsert_contact",
        {
            "tenant_id": tenant,
            "ref": ref,
            "phone_hash": phone_hash,
            "email_hash": email_hash,
            "timezone": check_timezone(timezone),
            "locale": locale,
            "preferences": dict(preferences or {}),
            "now": now,
        },
    )
    for consent in consents:
        record_consent(conn, tenant, ref, consent, now)
    assert row is not None
    return row


def _store(conn: Conn, tenant: str, vault: Vault, channel: str, raw: str) -> str:
    if channel == "sms":
        destination, country = normalize_phone(raw)
    else:
        destination, country = normalize_email(raw), None
    reference = vault.reference(channel, destination)
    ledger.store_destination(conn, tenant, reference, channel, vault.encrypt(destination), country)
    return reference


def record_consent(
    conn: Conn, tenant: str, ref: str, consent: ConsentRecord, now: datetime
) -> None:
    check_consent(consent)
    execute(
        conn,
        "record_consent",
        {
            "tenant_id": tenant,
            "ref": ref,
            "channel": consent.channel,
            "purpose": consent.purpose,
            "source": consent.source,
            "captured_at": consent.captured_at,
            "evidence_ref": consent.evidence_ref,
            "revoked_at": consent.revoked_at,
            "now": now,
        },
    )


def check_consent(consent: ConsentRecord) -> None:
    if consent.channel not in ("sms", "email"):
        raise InvalidInput("consents.channel", "use sms or email")
    # Bounded before it is stored: the claim reads consent evidence with
    # every tenant's intents, and a time it cannot decode must never get there.
    check_moment("consents.captured_at", consent.captured_at)
    optional_moment("consents.revoked_at", consent.revoked_at)


def contact(conn: Conn, tenant: str, ref: str) -> dict[str, Any] | None:
    return fetch_one(conn, "contact_by_ref", {"tenant_id": tenant, "ref": ref})


def consents_for(conn: Conn, tenant: str, ref: str, channel: str) -> list[dict[str, Any]]:
    return fetch_all(conn, "consents_for", {"tenant_id": tenant, "ref": ref, "channel": channel})


def opt_out(
    conn: Conn, tenant: str, channel: str, destination_hash: str, source: str, now: datetime
) -> None:
    execute(
        conn,
        "opt_out",
        {
            "tenant_id": tenant,
            "channel": channel,
            "destination_hash": destination_hash,
            "source": source,
            "now": now,
        },
    )


def opt_in(conn: Conn, tenant: str, channel: str, destination_hash: str) -> None:
    execute(
        conn,
        "opt_in",
        {"tenant_id": tenant, "channel": channel, "destination_hash": destination_hash},
    )


def suppress(
    conn: Conn, tenant: str, channel: str, destination_hash: str, reason: str, now: datetime
) -> None:
    execute(
        conn,
        "suppress",
        {
            "tenant_id": tenant,
            "channel": channel,
            "destination_hash": destination_hash,
            "reason": reason,
            "now": now,
        },
    )


def blocks_for(conn: Conn, tenant: str, channel: str, destination_hash: str) -> Blocks:
    row = fetch_one(
        conn,
        "blocks_for",
        {
            "tenant_id": tenant,
            "channel": channel,
            "destination_hash": destination_hash,
        },
    )
    assert row is not None
    return Blocks(bool(row["opted_out"]), row["suppressed"])


@dataclass(frozen=True)
class Evidence:
    """Which receipt blocked a destination: provider, attempt, raw status."""

    provider: str
    intent_id: Any
    attempt_n: int
    raw_status: str


def block_observed(
    conn: Conn,
    tenant: str,
    channel: str,
    destination_hash: str,
    reason: str | None,
    evidence: Evidence,
    now: datetime,
) -> bool:
    """An opt-out (`reason` None) or a suppression a receipt or a send's
    rejection proved; True when it is new (the first evidence for an
    address is the one kept)."""
    params = {
        "tenant_id": tenant,
        "channel": channel,
        "destination_hash": destination_hash,
        "provider": evidence.provider,
        "intent_id": evidence.intent_id,
        "attempt_n": evidence.attempt_n,
        "raw_status": evidence.raw_status,
        "now": now,
    }
    if reason is None:
        return fetch_one(conn, "opt_out_observed", params) is not None
    return fetch_one(conn, "suppress_observed", params | {"reason": reason}) is not None


def lift_suppression(
    conn: Conn, tenant: str, suppression_id: Any, why: str, actor: str, now: datetime
) -> bool:
    """Lift one active suppression, keeping it and its evidence with who
    lifted it, when and why; False when this tenant has no such active one."""
    params = {"tenant_id": tenant, "id": suppression_id, "why": why, "actor": actor, "now": now}
    return fetch_one(conn, "lift_suppression", params) is not None


def receipt_blocks(conn: Conn, tenant: str) -> list[dict[str, Any]]:
    """Blocks that receipts wrote: kind (opt_out, complaint, hard_bounce), provider, count."""
    return fetch_all(conn, "receipt_blocks", {"tenant_id": tenant})


def lock_recipient(conn: Conn, tenant: str, ref: str, channel: str) -> None:
    """Serialize claims for one recipient and channel until the transaction ends,
    so counting recent sends and opening the next attempt cannot interleave."""
    execute(conn, "lock_recipient", {"tenant_id": tenant, "ref": ref, "channel": channel})


def recent_sends(
    conn: Conn,
    tenant: str,
    ref: str,
    channel: str,
    *,
    since: datetime,
    purposes: Sequence[str] | None,
) -> tuple[int, datetime | None]:
    """Attempts that may have reached the provider since `since`: how many,
    and when the oldest was made."""
    row = fetch_one(
        conn,
        "recent_sends",
        {"tenant_id": tenant, "ref": ref, "channel": channel, "since": since, "purposes": purposes},
    )
    assert row is not None
    return int(row["count"]), row["oldest_at"]
