"""Turning a create request into a durable intent, exactly once per key.

Validation happens before any write, so bad input creates nothing. The
request fingerprint is computed over the destination's keyed reference,
never the raw destination, so nothing sensitive is stored to tell a replay
from a conflicting reuse of the key.

The template revision and policy version come from the process's cache
(cache.py) when it has them, so a create is one statement; that
statement inserts only if they are still current, and otherwise the
create reads them again and retries. Nothing is created under a version
that was not current at the insert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from tidings.domain.errors import (
    IdempotencyConflict,
    InvalidInput,
    MissingVariables,
    RequestLimited,
    StaleTransition,
)
from tidings.domain.ids import uuid7
from tidings.domain.intent import Intent
from tidings.domain.policy_document import Policy
from tidings.domain.states import IntentState
from tidings.intake.cache import Candidates, IntakeCache, Remembered, TemplateKey
from tidings.intake.edge import Edge
from tidings.intake.request import IntentRequest
from tidings.platform import tracing
from tidings.platform.vault import Vault
from tidings.store import ledger, templates
from tidings.templates.model import TemplateRevision

log = logging.getLogger("tidings.intake.create")

DEFAULT_RESEND_BUDGET = 1
# A create reads the template and policy again each time its insert finds
# them no longer current: once after a publish. Another publish committed
# between that read and the retry costs one more (not in a REPEATABLE READ
# transaction, where the read and the insert share a snapshot); three
# inserts found stale in a row are no longer a race but a loop.
INSERTS_PER_CREATE = 3


def create_or_replay(
    conn: psycopg.Connection[Any],
    tenant: str,
    request: IntentRequest,
    vault: Vault,
    now: datetime,
    actor: str,
    cache: IntakeCache,
    wake: Callable[[str], None] | None = None,
    intent_id: UUID | None = None,
) -> tuple[Intent, bool]:
    """The intent for this key: created now (True) or the first one (False),
    in the `intent.create` span (the API's create and `notify` alike)."""
    with tracing.span("intent.create", tenant_id=tenant, channel=request.channel.value) as span:
        intent, created = _create_or_replay(
            conn, tenant, request, vault, now, actor, cache, wake, intent_id
        )
        if span:
            span.set(created=created, **tracing.intent_attributes(intent))
        return intent, created


def _create_or_replay(
    conn: psycopg.Connection[Any],
    tenant: str,
    request: IntentRequest,
    vault: Vault,
    now: datetime,
    actor: str,
    cache: IntakeCache,
    wake: Callable[[str], None] | None,
    intent_id: UUID | None,
) -> tuple[Intent, bool]:
    """The intent for this key: created now (True) or the first one (False).

    `intent_id`, the id a caller chose before running the create (perhaps
    again, after a commit whose answer was lost: `Database.statements_again`),
    tells that run's own intent from another request's: finding it is a
    creation, not a replay.

    `wake`, for a create on a connection in autocommit, is called with the
    channel once the intent is committed (store/wakeups.py); without it the
    create wakes the workers from its transaction, at its commit.
    """
    recipient = request.recipient
    reference = vault.reference(recipient.channel.value, recipient.destination)
    request_hash = request.fingerprint(reference)
    row = _row(tenant, request, reference, request_hash, now, actor)
    if intent_id is not None:
        row["id"] = intent_id
    row["ciphertext"] = vault.encrypt(recipient.destination)
    row["notify"] = wake is None
    # A user-triggered class spends its request bounds with the insert, in
    # one transaction a refusal rolls back whole (intake/edge.py).
    edge = Edge(tenant, request, reference, now)
    guarded = edge.may_bound(cache.recall(tenant, _template_key(request)))
    try:
        with conn.transaction() if guarded else nullcontext():
            created, policy = _insert_current(conn, cache, tenant, request, row)
            if created is not None:
                edge.admit(conn, policy, refuse=guarded)
    except RequestLimited as refused:
        edge.count_volume(conn)  # nothing of the create stands; the request counts
        log.warning(
            "request refused at the edge",
            extra={
                "tenant_id": tenant,
                "event_class": request.event_class,
                "code": refused.code,
                "bound": refused.scope,
                "actor": actor,
            },
        )
        raise
    except InvalidInput:
        # A key already used answers for its first request: with that intent
        # (a replay) or as a conflict, never as a template error.
        existing = ledger.intent_by_key(conn, tenant, request.idempotency_key)
        if existing is not None:
            return _replayed(existing, request_hash), existing.id == intent_id
        raise
    if created is not None:
        log.info(
            "intent created",
            extra={
                "tenant_id": tenant,
                "intent_id": str(created.id),
                "channel": created.channel,
                "template_revision": f"{created.template_name}@{created.template_revision}",
                "correlation_id": created.correlation_id,
                "policy_version": created.policy_version,
            },
        )
        if wake is not None:
            wake(created.channel)
        return created, True
    # The key is taken, by an earlier create (a replay), a concurrent one, or
    # this request's own first run whose commit's answer was lost (its id).
    first = _replayed(_by_key(conn, tenant, request), request_hash)
    if first.id == intent_id and wake is not None:
        wake(first.channel)
    return first, first.id == intent_id


@dataclass(frozen=True)
class _Choice:
    revision: TemplateRevision
    policy: Policy | None
    newest: int | None  # what the insert checks is still the newest revision


def _insert_current(
    conn: psycopg.Connection[Any],
    cache: IntakeCache,
    tenant: str,
    request: IntentRequest,
    row: dict[str, Any],
) -> tuple[Intent | None, Policy | None]:
    """Insert under the policy version and template revision current at the
    insert: first as the cache remembers them, which saves a read per create
    (docs/benchmarks.md, "Measurements behind the code"); when the insert
    finds that stale, as read again. The intent, None when the key is
    taken, and the policy it was inserted under."""
    choice = _recalled(cache, tenant, request)
    for _ in range(INSERTS_PER_CREATE):
        if choice is None:
            choice = _choose(_read(conn, cache, tenant, request), request)
        insert = ledger.create_intent(conn, _chosen(row, choice, request))
        if insert.current:
            return insert.intent, choice.policy
        choice = None
    raise StaleTransition("templates or policies kept changing during the create; nothing created")


def _recalled(cache: IntakeCache, tenant: str, request: IntentRequest) -> _Choice | None:
    """The choice from what the cache remembers; None when it remembers
    nothing, or nothing the request fits (a variable missing): that may be
    outdated, and only what was just read may refuse a create."""
    remembered = cache.recall(tenant, _template_key(request))
    if remembered is None:
        return None
    try:
        return _choose(remembered, request)
    except InvalidInput:
        return None


def _read(
    conn: psycopg.Connection[Any], cache: IntakeCache, tenant: str, request: IntentRequest
) -> Remembered:
    """The current policy and the template's candidates, read and remembered."""
    context = ledger.intake_context(
        conn, tenant, request.template_name, request.channel.value, request.template_revision
    )
    first = context[0]
    policy = cache.remember_policy(tenant, first["policy_version"], first["policy_document"])
    pinned = request.template_revision is not None
    candidates = Candidates(
        tuple(
            templates.revision_from_row(_template_row(r))
            for r in context
            if r["t_name"] is not None
        ),
        None if pinned else first["newest_revision"],
    )
    cache.remember_template(tenant, _template_key(request), candidates)
    return Remembered(policy, candidates)


def _choose(remembered: Remembered, request: IntentRequest) -> _Choice:
    """The revision this recipient gets, given the variables it needs;
    InvalidInput (MissingVariables) when none fits."""
    revision = templates.resolve_among(
        remembered.candidates.revisions,
        request.template_name,
        request.channel.value,
        request.recipient.locale,
        request.template_revision,
    )
    _check_variables(revision, request.variables)
    return _Choice(revision, remembered.policy, remembered.candidates.newest)


def _chosen(row: dict[str, Any], choice: _Choice, request: IntentRequest) -> dict[str, Any]:
    # Without a policy the intent is still created, and the claim denies it
    # with POLICY_MISSING: the decision is recorded on the intent's timeline
    # like any other.
    policy = choice.policy
    budget = DEFAULT_RESEND_BUDGET if policy is None else policy.resend_budget
    return {
        **row,
        "template_revision": choice.revision.revision,
        "newest_revision": choice.newest,
        "policy_version": None if policy is None else policy.version,
        "resend_budget": budget if request.resend_budget is None else request.resend_budget,
    }


def _template_key(request: IntentRequest) -> TemplateKey:
    return (request.template_name, request.channel.value, request.template_revision)


def _check_variables(revision: TemplateRevision, given: Mapping[str, Any]) -> None:
    """Every required variable is given now, except those a minter fills at
    dispatch: a create that would only fail at render is refused instead."""
    exempt = set(revision.dispatch_variables)
    missing = tuple(sorted(v for v in set(revision.required_variables) - exempt if v not in given))
    if missing:
        raise MissingVariables(f"{revision.name}@{revision.revision}", missing)


def _by_key(conn: psycopg.Connection[Any], tenant: str, request: IntentRequest) -> Intent:
    existing = ledger.intent_by_key(conn, tenant, request.idempotency_key)
    assert existing is not None  # keys are never deleted while their intent exists
    return existing


def _template_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k[2:]: v for k, v in row.items() if k.startswith("t_")}


def _replayed(existing: Intent, request_hash: str) -> Intent:
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            f"idempotency_key {existing.idempotency_key!r} was used for a different request"
        )
    return existing


def _row(
    tenant: str,
    request: IntentRequest,
    reference: str,
    request_hash: str,
    now: datetime,
    actor: str,
) -> dict[str, Any]:
    due = max(now, request.not_before) if request.not_before else now
    return {
        "tenant_id": tenant,
        "id": uuid7(now),
        "idempotency_key": request.idempotency_key,
        "request_hash": request_hash,
        "channel": request.channel.value,
        "state": IntentState.PENDING.value,
        "recipient_ref": request.recipient.ref,
        "destination_hash": reference,
        "country": request.recipient.country,
        "timezone": request.recipient.timezone,
        "locale": request.recipient.locale,
        "template_name": request.template_name,
        "template_revision": request.template_revision,
        "variables": dict(request.variables),
        "purpose": request.purpose,
        "event_class": request.event_class,
        "correlation_id": request.correlation_id,
        "job_id": None,
        "policy_version": None,
        "decision_code": None,
        "resend_budget": (
            DEFAULT_RESEND_BUDGET if request.resend_budget is None else request.resend_budget
        ),
        "expires_at": request.expires_at,
        "not_before": request.not_before,
        "next_due_at": due,
        "actor": actor,
        "now": now,
        "terminal_at": None,
        "candidate_timezones": list(request.recipient.candidate_timezones),
        "input": {
            "template": request.template_name,
            "template_revision": request.template_revision,
            "purpose": request.purpose,
            "event_class": request.event_class,
            "country": request.recipient.country,
            "expires_at": request.expires_at.isoformat() if request.expires_at else None,
        },
    }
