"""Receipts feed suppression: what a provider reports about a destination
(an unsubscribe, a STOP it saw, a spam complaint, a hard bounce) blocks the
next send to it, written in the transaction that stores the observation.

The block is per channel and destination hash, like every opt-out and
suppression, and keeps its evidence (provider, attempt, raw status). It is
learned from every newly stored observation that matched an attempt, even
one that cannot move the attempt: a complaint arrives after delivery.

A send's permanent rejection teaches the same way (`learn_from_rejection`):
only one about the recipient blocks; one about our request, sender or
account is logged for operators and raises `provider_refused`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import psycopg

from tidings.dispatch.claim import Claimed
from tidings.domain.feedback import INVALID, lesson, refusal_alert_key, send_lesson
from tidings.domain.intent import Attempt
from tidings.providers.outcomes import Observation, Rejected
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


def learn_from_rejection(conn: Conn, claimed: Claimed, result: Rejected, now: datetime) -> None:
    """Only a rejection about the recipient (an opt-out the provider holds,
    an address that does not exist) blocks the next send too; one about the
    request, sender or account blocks nobody (domain/feedback.py)."""
    intent = claimed.intent
    alert = refusal_alert_key(intent.channel, claimed.provider, result.code.value)
    if alert is not None:
        # Our request, sender or account is wrong: no resend or suppression
        # fixes it, an operator must (no destination or body is logged). The
        # alert round raises `provider_refused` from the failed attempts
        # (observability/alerts/refusals.py); an account restriction also
        # pauses the account (dispatch/backoff.py).
        log.warning(
            "provider refused our request",
            extra={"alert": alert, "provider": claimed.provider, "intent_id": str(intent.id)},
        )
    found = send_lesson(result.code.value)
    if intent.destination_hash is None or found is None:
        return
    if found.kind == "opt_out":
        contacts.opt_out(
            conn,
            intent.tenant_id,
            intent.channel,
            intent.destination_hash,
            f"provider:{claimed.provider}",
            now,
        )
    else:
        # With its evidence (0035), so an operator reviewing suppressions
        # sees which provider and attempt said the address does not exist.
        evidence = contacts.Evidence(claimed.provider, intent.id, claimed.n, result.code.value)
        contacts.block_observed(
            conn, intent.tenant_id, intent.channel, intent.destination_hash, INVALID, evidence, now
        )
