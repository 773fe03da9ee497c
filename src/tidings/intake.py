"""Turning a create request into a durable intent, exactly once per key.

Validation happens before any write, so bad input creates nothing. The
request fingerprint is computed over the destination's keyed reference,
never the raw destination, so nothing sensitive is stored to tell a replay
from a conflicting reuse of the key.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from tidings.domain.errors import IdempotencyConflict, InvalidInput, MissingVariables
from tidings.domain.ids import uuid7
from tidings.domain.intent import Intent
from tidings.domain.keys import check_key, fingerprint
from tidings.domain.moments import check_moment
from tidings.domain.recipients import Channel, Recipient, parse_channel, parse_recipient
from tidings.domain.states import IntentState
from tidings.domain.storable import check_fields
from tidings.store import ledger, policies, templates
from tidings.store.database import fetch_all
from tidings.templates.model import TemplateRevision
from tidings.vault import Vault

log = logging.getLogger("tidings.intake")

MAX_VARIABLES_BYTES = 16_384
DEFAULT_RESEND_BUDGET = 1


@dataclass(frozen=True)
class IntentRequest:
    idempotency_key: str
    channel: Channel
    recipient: Recipient
    template_name: str
    template_revision: int | None
    variables: Mapping[str, Any]
    purpose: str
    event_class: str
    expires_at: datetime | None
    not_before: datetime | None
    correlation_id: str | None
    resend_budget: int | None

    @classmethod
    def parse(cls, *, now: datetime, **raw: Any) -> IntentRequest:
        check_fields(raw)  # NUL, bad Unicode, JSON too deep: 4xx, not a driver error
        channel = parse_channel(raw.get("channel"))
        name, revision = _template(raw.get("template"))
        return cls(
            idempotency_key=check_key(raw.get("idempotency_key")),
            channel=channel,
            recipient=parse_recipient(channel, _mapping("recipient", raw.get("recipient"))),
            template_name=name,
            template_revision=revision,
            variables=_variables(raw.get("variables")),
            purpose=_word("purpose", raw.get("purpose")),
            event_class=_word("event_class", raw.get("event_class")),
            expires_at=_moment("expires_at", raw.get("expires_at"), now, future=True),
            not_before=_moment("not_before", raw.get("not_before"), now, future=False),
            correlation_id=_optional_text("correlation_id", raw.get("correlation_id")),
            resend_budget=_budget(raw.get("resend_budget")),
        )

    def fingerprint(self, destination_ref: str) -> str:
        return fingerprint(
            {
                "channel": self.channel.value,
                "recipient": {
                    "ref": self.recipient.ref,
                    "destination": destination_ref,
                    "timezone": self.recipient.timezone,
                    "locale": self.recipient.locale,
                },
                "template": [self.template_name, self.template_revision],
                "variables": self.variables,
                "purpose": self.purpose,
                "event_class": self.event_class,
                "expires_at": self.expires_at.isoformat() if self.expires_at else None,
                "not_before": self.not_before.isoformat() if self.not_before else None,
                "correlation_id": self.correlation_id,
                "resend_budget": self.resend_budget,
            }
        )


def create_or_replay(
    conn: psycopg.Connection[Any],
    tenant: str,
    request: IntentRequest,
    vault: Vault,
    now: datetime,
    actor: str,
) -> tuple[Intent, bool]:
    """The intent for this key: created now (True) or the first one (False)."""
    recipient = request.recipient
    reference = vault.reference(recipient.channel.value, recipient.destination)
    request_hash = request.fingerprint(reference)
    context = fetch_all(
        conn,
        "intake_context",
        {
            "tenant_id": tenant,
            "name": request.template_name,
            "channel": request.channel.value,
            "revision": request.template_revision,
        },
    )
    try:
        revision = templates.resolve_among(
            [_template_row(r) for r in context if r["t_name"] is not None],
            request.template_name,
            request.channel.value,
            recipient.locale,
            request.template_revision,
        )
        _check_variables(revision, request.variables)
    except InvalidInput:
        # A key already used answers for its first request: with that intent
        # (a replay) or as a conflict, never as a template error.
        existing = ledger.intent_by_key(conn, tenant, request.idempotency_key)
        if existing is not None:
            return _replayed(existing, request_hash), False
        raise
    stored = {"version": context[0]["policy_version"], "document": context[0]["policy_document"]}
    policy = policies.current_from(tenant, stored)
    row = _row(tenant, request, reference, request_hash, now, actor)
    # Without a policy the intent is still created, and the claim denies it
    # with POLICY_MISSING: the decision is recorded on the intent's timeline
    # like any other.
    budget = DEFAULT_RESEND_BUDGET if policy is None else policy.resend_budget
    row.update(
        template_revision=revision.revision,
        policy_version=None if policy is None else policy.version,
        resend_budget=budget if request.resend_budget is None else request.resend_budget,
        ciphertext=vault.encrypt(recipient.destination),
    )
    created = ledger.create_intent(conn, row)
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
        return created, True
    # The key is taken, by an earlier create (a replay) or a concurrent one:
    # the first intent stands, and nothing of this request was written.
    return _replayed(_by_key(conn, tenant, request), request_hash), False


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


def _mapping(field: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(field, "must be an object")
    return value


def _template(value: object) -> tuple[str, int | None]:
    if isinstance(value, str):
        return _word("template", value), None
    data = _mapping("template", value)
    revision = data.get("revision")
    if revision is not None and (
        not isinstance(revision, int) or isinstance(revision, bool) or revision < 1
    ):
        raise InvalidInput("template.revision", "must be a positive integer")
    return _word("template.name", data.get("name")), revision


def _word(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "is required")
    if len(value) > 200:
        raise InvalidInput(field, "is longer than 200 characters")
    return value


def _optional_text(field: str, value: object) -> str | None:
    return None if value is None else _word(field, value)


def _variables(value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    data = _mapping("variables", value)
    try:
        encoded = json.dumps(data)
    except (TypeError, ValueError):
        raise InvalidInput("variables", "must be JSON values") from None
    if len(encoded) > MAX_VARIABLES_BYTES:
        raise InvalidInput("variables", f"larger than {MAX_VARIABLES_BYTES} bytes")
    return dict(json.loads(encoded))


def _moment(field: str, value: object, now: datetime, *, future: bool) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInput(field, "is not an ISO-8601 time") from None
    value = check_moment(field, value)  # within the range every reader can decode
    if future and value <= now:
        raise InvalidInput(field, "is already in the past")
    return value


def _budget(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10:
        raise InvalidInput("resend_budget", "must be an integer from 0 to 10")
    return value
