"""Receipts feed suppression: what a provider reports about a destination
(an unsubscribe, a STOP it saw, a spam complaint, a hard bounce) blocks the
next send to it, written in the transaction that stores the observation.

The block is per channel and destination hash, like every opt-out and
suppression, and keeps its evidence (provider, attempt, raw status). It is
learned from every newly stored observation that matched an attempt, even
one that cannot move the attempt: a complaint arrives after delivery.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.feedback import lesson
from tidings.domain.intent import Attempt
from tidings.providers.outcomes import Observation
from tidings.store import contacts, ledger

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.feedback")


def learn(conn: Conn, attempt: Attempt, obs: Observation, now: datetime) -> str | None:
    """Write the block this observation proves; returns its kind when new."""
    found = lesson(obs.status.value, obs.code)
    if found is None:
        return None
    intent = ledger.get_intent(conn, attempt.tenant_id, attempt.intent_id)
    if intent is None or intent.destination_hash is None:
        return None
    evidence = contacts.Evidence(obs.provider, attempt.intent_id, attempt.n, _raw(obs))
    if not contacts.block_observed(
        conn, intent.tenant_id, intent.channel, intent.destination_hash, found.reason, evidence, now
    ):
        return None
    kind = found.reason or found.kind
    log.info(
        "destination blocked by a receipt",
        extra={
            "tenant": intent.tenant_id,
            "intent_id": str(intent.id),
            "attempt": attempt.n,
            "provider": obs.provider,
            "channel": intent.channel,
            "block": kind,
        },
    )
    return kind


def _raw(obs: Observation) -> str:
    """The provider's own words for the evidence: its status, and its code
    when it has one of its own (Postmark's `Bounce:Blocked` against
    `Bounce:HardBounce`), so an operator can tell them apart (0035)."""
    if obs.raw_code and obs.raw_code != obs.raw_status:
        return f"{obs.raw_status}:{obs.raw_code}"
    return obs.raw_status
