"""Preparing a frozen job: each recipient resolved to its channel(s) and
turned into intents, or terminal exclusions, in keyset pages.

A page is one transaction that also records how far preparation got, so a
crash resumes where it stopped and the intents' unique keys make a replayed
page insert nothing twice. Memory is bounded by the page, not the audience.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tidings.domain.channels import ChannelFacts, Mode, Outcome, resolve
from tidings.domain.decision_inputs import decision_inputs
from tidings.domain.ids import uuid7
from tidings.domain.keys import job_recipient_key, report_key
from tidings.domain.policy import CapUsage, ConsentEvidence, PolicyRequest, cap_windows, evaluate
from tidings.domain.policy_document import Policy
from tidings.platform.logging import job_context, log_context
from tidings.store import jobs, ledger, policies
from tidings.store.database import Database
from tidings.store.isolation import FAILS_ALONE, quarantine_job

log = logging.getLogger("tidings.jobs")
Conn = psycopg.Connection[Any]

PAGE_SIZE = 2000

INTENT_COLUMNS = (
    "tenant_id",
    "id",
    "idempotency_key",
    "request_hash",
    "channel",
    "state",
    "recipient_ref",
    "destination_hash",
    "country",
    "timezone",
    "locale",
    "template_name",
    "template_revision",
    "variables",
    "purpose",
    "event_class",
    "job_id",
    "job_seq",
    "policy_version",
    "decision_code",
    "resend_budget",
    "expires_at",
    "next_due_at",
    "created_by",
    "created_at",
    "terminal_at",
    "updated_at",
    "report_id",
    "report_revision",
)
KEY_COLUMN = INTENT_COLUMNS.index("idempotency_key")


@dataclass(frozen=True)
class PageFacts:
    # (channel, destination hash) -> (opted out, suppression reason or None)
    blocks: Mapping[tuple[str, str], tuple[bool, str | None]]
    consents: Mapping[tuple[str, str], list[ConsentEvidence]]  # (ref, channel)


def prepare_next(
    db: Database, now: datetime, budget_seconds: float | None = None
) -> dict[str, Any] | None:
    """Prepare one waiting job; None when no job waits.

    Completely, or with `budget_seconds` until a page ends past the budget:
    the job is then returned still `preparing`, and the next call (here or
    in any other worker) goes on from the page it reached.
    """
    with db.transaction() as conn:
        job = jobs.claim_preparing(conn)
    if job is None:
        return None
    context = job_context(job["id"], job.get("report_id"), job.get("report_revision"))
    with log_context(tenant_id=job["tenant_id"], **context):
        try:
            return _prepare_claimed(db, job, now, budget_seconds)
        except FAILS_ALONE as exc:
            # Its policy version missing or unreadable, or a row that cannot
            # be written (a value past an int4 column): this job alone is set
            # aside, or it would be first in line again every round, for
            # every tenant (store/isolation.py).
            quarantine_job(db, job["tenant_id"], job["id"], now, exc)
            return job


def _prepare_claimed(
    db: Database, job: dict[str, Any], now: datetime, budget_seconds: float | None
) -> dict[str, Any]:
    until = None if budget_seconds is None else time.monotonic() + budget_seconds
    while True:
        with db.transaction() as conn:
            locked = jobs.lock(conn, job["tenant_id"], job["id"])
            assert locked is not None
            job = locked
            if job["status"] != "preparing":
                return job
            _, done = prepare_page(conn, job, job["prepared_through"], now)
            if done:
                jobs.prepared(conn, job["tenant_id"], job["id"], now)
                log.info("job prepared", extra={"audience_size": job["audience_size"]})
                return job
        if until is not None and time.monotonic() >= until:
            return job


def prepare_page(conn: Conn, job: Mapping[str, Any], after: int, now: datetime) -> tuple[int, bool]:
    rows = jobs.recipients_page(conn, job["tenant_id"], job["id"], after, PAGE_SIZE)
    if not rows:
        return after, True
    policy = policies.by_version(conn, job["tenant_id"], job["policy_version"])
    facts = _page_facts(conn, job["tenant_id"], rows)
    staged = [i for r in rows for i in _intents_for(job, r, policy, facts, now)]
    # An exclusion's decision inputs ride along as one JSON parameter: few
    # rows of a page have them, so they need no table of their own.
    excluded = [
        {"idempotency_key": s.row[KEY_COLUMN], "inputs": s.inputs}
        for s in staged
        if s.inputs is not None
    ]
    ledger.insert_job_page(conn, (s.row for s in staged), Jsonb(excluded))
    last = rows[-1]["seq"]
    jobs.progress(conn, job["tenant_id"], job["id"], last, now)
    jobs.notify_due_channels(conn, job["channels"])
    return last, len(rows) < PAGE_SIZE


def _page_facts(conn: Conn, tenant: str, rows: list[dict[str, Any]]) -> PageFacts:
    hashes = sorted({h for r in rows for h in (r["phone_hash"], r["email_hash"]) if h})
    blocks: dict[tuple[str, str], tuple[bool, str | None]] = {}
    for b in jobs.blocks_for_page(conn, tenant, hashes):
        where = (b["channel"], b["destination_hash"])
        opted_out, reason = blocks.get(where, (False, None))
        if b["kind"] == "opt_out":
            blocks[where] = (True, reason)
        else:
            blocks[where] = (opted_out, b["reason"])
    consents: dict[tuple[str, str], list[ConsentEvidence]] = defaultdict(list)
    refs = [r["recipient_ref"] for r in rows]
    for c in jobs.consents_for_refs(conn, tenant, refs):
        consents[(c["ref"], c["channel"])].append(
            ConsentEvidence(
                c["channel"],
                c["purpose"],
                c["captured_at"],
                c["revoked_at"],
                evidence_id=c["id"],
                evidence_ref=c["evidence_ref"],
            )
        )
    return PageFacts(blocks, consents)


def _intents_for(
    job: Mapping[str, Any], row: Mapping[str, Any], policy: Policy, facts: PageFacts, now: datetime
) -> list[Staged]:
    channels = list(job["channels"])
    evaluated = {c: _channel_facts(job, row, c, policy, facts, now) for c in channels}
    facts_by_channel = {c: f for c, (f, _) in evaluated.items()}
    outcomes = resolve(
        channels, list(row["preferences"]), Mode(job["channel_mode"]), facts_by_channel
    )
    # An exclusion decided here is a decision too: its inputs go on the
    # creation audit (a sendable one is decided again, with its own, at claim).
    inputs = {c: i for c, (_, i) in evaluated.items()}
    return [
        Staged(_intent_row(job, row, o, policy, now), _inputs(job, o, inputs)) for o in outcomes
    ]


def _inputs(
    job: Mapping[str, Any], outcome: Outcome, inputs: Mapping[str, dict[str, Any] | None]
) -> dict[str, Any] | None:
    own = None if outcome.sendable else inputs.get(outcome.channel)
    if not outcome.passed_over:
        return own
    # A fallback is a decision of its own: what was passed over, and why,
    # goes on the intent's creation audit, sendable or not.
    passed = [
        {"channel": channel, "code": code, "decision_inputs": inputs.get(channel)}
        for channel, code in outcome.passed_over
    ]
    fallback = {
        "channel_mode": job["channel_mode"],
        "passed_over": [{k: v for k, v in p.items() if v is not None} for p in passed],
        "allowed_by": f"purposes.{job['purpose']}.channel_fallback",
    }
    return {**(own or {}), "fallback": fallback}


def _channel_facts(
    job: Mapping[str, Any],
    row: Mapping[str, Any],
    channel: str,
    policy: Policy,
    facts: PageFacts,
    now: datetime,
) -> tuple[ChannelFacts, dict[str, Any] | None]:
    destination = row["phone_hash"] if channel == "sms" else row["email_hash"]
    if destination is None:
        return ChannelFacts(channel, False, None), None
    opted_out, suppression = facts.blocks.get((channel, destination), (False, None))
    request = PolicyRequest(
        channel=channel,
        purpose=job["purpose"],
        event_class=job["event_class"],
        country=row["phone_country"] if channel == "sms" else row["email_country"],
        timezone=row["timezone"],
        consents=tuple(facts.consents.get((row["recipient_ref"], channel), ())),
        opted_out=opted_out,
        suppressed=suppression is not None,
        suppression_reason=suppression,
        now=now,
        expires_at=job["expires_at"],
        recent_sends=_no_usage(policy, channel, job["purpose"], now),
    )
    return ChannelFacts(channel, True, evaluate(policy, request)), decision_inputs(policy, request)


def _no_usage(policy: Policy, channel: str, purpose: str, now: datetime) -> dict[str, CapUsage]:
    """Caps are enforced at claim time, against real sends; here they are zero."""
    return {w.cap_id: CapUsage(0) for w in cap_windows(policy, channel, purpose, now)}


def _intent_row(
    job: Mapping[str, Any], row: Mapping[str, Any], outcome: Outcome, policy: Policy, now: datetime
) -> tuple[Any, ...]:
    channel = outcome.channel
    state = "pending" if outcome.sendable else (outcome.excluded_as or "suppressed")
    key = _key(job, row["recipient_ref"], channel)
    variables = {**job["variables"], **row["variables"]}
    if job["report_id"]:
        variables.setdefault("report_id", job["report_id"])
        variables.setdefault("report_revision", job["report_revision"])
    return (
        job["tenant_id"],
        uuid7(now),
        key,
        f"job:{job['request_hash']}",
        channel,
        state,
        row["recipient_ref"],
        row["phone_hash"] if channel == "sms" else row["email_hash"],
        row["phone_country"] if channel == "sms" else row["email_country"],
        row["timezone"],
        row["locale"],
        job["template_name"],
        job["template_revisions"][channel],
        Jsonb(variables),
        job["purpose"],
        job["event_class"],
        job["id"],
        row["seq"],
        job["policy_version"],
        outcome.code,
        policy.resend_budget,
        job["expires_at"],
        now if outcome.sendable else None,
        f"job:{job['id']}",
        now,
        None if outcome.sendable else now,
        now,
        job["report_id"],
        job["report_revision"],
    )


def _key(job: Mapping[str, Any], ref: str, channel: str) -> str:
    report = None
    if job["report_id"]:
        report = report_key(job["report_id"], job["report_revision"], channel)
    return job_recipient_key(job["id"], ref, channel, report)


@dataclass(frozen=True)
class Staged:
    row: tuple[Any, ...]  # in INTENT_COLUMNS order
    inputs: dict[str, Any] | None  # an exclusion's decision inputs
