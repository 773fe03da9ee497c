"""The intent and attempt records as the rest of the code reads them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any
from uuid import UUID

from tidings.domain.states import AttemptState, IntentState, is_terminal


@dataclass(frozen=True)
class Attempt:
    tenant_id: str
    intent_id: UUID
    n: int
    attempt_key: str
    channel: str
    state: AttemptState
    provider: str
    provider_message_id: str | None
    code: str | None
    segments: int | None
    encoding: str | None
    created_at: datetime
    accepted_at: datetime | None
    last_status_at: datetime | None
    terminal_at: datetime | None
    check_count: int = 0
    next_check_at: datetime | None = None
    checks_expire_at: datetime | None = None
    # When its provider call started (the durable mark written right
    # before the call); None: it never did.
    call_started_at: datetime | None = None
    # The provider's redacted, bounded answer when it did not accept the send.
    response_body: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Attempt:
        values = {name: row[name] for name in _ATTEMPT_FIELDS if name in row}
        values["state"] = AttemptState(row["state"])
        return cls(**values)


@dataclass(frozen=True)
class Intent:
    tenant_id: str
    id: UUID
    idempotency_key: str
    channel: str
    state: IntentState
    version: int
    recipient_ref: str
    destination_hash: str | None
    country: str | None
    timezone: str | None
    locale: str | None
    template_name: str
    template_revision: int | None
    variables: Mapping[str, Any]
    purpose: str
    event_class: str
    correlation_id: str | None
    job_id: UUID | None
    policy_version: str | None
    decision_code: str | None
    cancel_reason: str | None
    resend_budget: int
    attempt_count: int
    expires_at: datetime | None
    not_before: datetime | None
    next_due_at: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    created_by: str
    created_at: datetime
    accepted_at: datetime | None
    last_status_at: datetime | None
    terminal_at: datetime | None
    updated_at: datetime
    request_hash: str = ""
    candidate_timezones: tuple[str, ...] = ()
    job_seq: int | None = None
    report_id: str | None = None
    report_revision: int | None = None
    attempts: tuple[Attempt, ...] = field(default=())

    @classmethod
    def from_row(cls, row: Mapping[str, Any], attempts: tuple[Attempt, ...] = ()) -> Intent:
        values = {name: row[name] for name in _INTENT_FIELDS if name in row}
        values["state"] = IntentState(row["state"])
        values["attempts"] = attempts
        values["candidate_timezones"] = tuple(row.get("candidate_timezones") or ())
        return cls(**values)

    @property
    def terminal(self) -> bool:
        return is_terminal(self.state)


# Rows are read by the thousand on the dispatch path: list the fields once.
_ATTEMPT_FIELDS = tuple(f.name for f in fields(Attempt))
_INTENT_FIELDS = tuple(f.name for f in fields(Intent))


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: str  # transition, attempt, observation, retention
    from_state: str | None
    to_state: str | None
    event: str
    actor: str
    policy_version: str | None
    detail: Mapping[str, Any]
