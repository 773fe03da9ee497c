"""Intents: what a caller asks to send, and what it reads back."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from tidings.api.schemas.common import (
    MAX_INT4,
    ChannelName,
    JsonObject,
    Moment,
    RequestModel,
    Text,
)
from tidings.domain.cancellation import CancelReason
from tidings.domain.intent import Attempt, Intent, TimelineEntry
from tidings.domain.state_words import state_note


class RecipientIn(RequestModel):
    ref: Text = Field(min_length=1, max_length=200, description="Your id for the recipient")
    phone: Text | None = Field(default=None, max_length=32, description="E.164; required for sms")
    email: Text | None = Field(default=None, max_length=254, description="Required for email")
    timezone: Text | None = Field(default=None, max_length=64, examples=["Europe/Berlin"])
    locale: Text | None = Field(default=None, max_length=35, examples=["en", "de-AT"])
    country: str | None = Field(
        None, pattern=r"^[A-Z]{2}$", description="For email, where a phone number cannot tell"
    )


class TemplateRef(RequestModel):
    name: Text = Field(min_length=1, max_length=200)
    revision: int | None = Field(default=None, ge=1, le=MAX_INT4)


class IntentIn(RequestModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "idempotency_key": "waitlist:771:1842:offer:1",
                    "channel": "sms",
                    "recipient": {
                        "ref": "member-1842",
                        "phone": "+14155550123",
                        "timezone": "America/Los_Angeles",
                        "locale": "en",
                    },
                    "template": {"name": "waitlist_offer"},
                    "variables": {"class_name": "Spin 7am", "deadline": "18:00"},
                    "purpose": "transactional",
                    "event_class": "waitlist_offer",
                    "correlation_id": "booking-1842",
                }
            ]
        },
    )

    idempotency_key: Text = Field(min_length=1, max_length=255)
    channel: ChannelName
    recipient: RecipientIn
    template: TemplateRef | Annotated[Text, Field(min_length=1, max_length=200)]
    variables: JsonObject = Field(default_factory=dict)
    purpose: Text = Field(min_length=1, max_length=200, examples=["transactional"])
    event_class: Text = Field(min_length=1, max_length=200, examples=["waitlist_offer"])
    expires_at: Moment | None = None
    not_before: Moment | None = None
    correlation_id: Text | None = Field(default=None, min_length=1, max_length=200)
    resend_budget: int | None = Field(default=None, ge=0, le=10)


class AttemptOut(BaseModel):
    n: int
    state: str
    provider: str
    provider_message_id: str | None
    attempt_key: str
    code: str | None
    segments: int | None = Field(description="SMS only")
    encoding: str | None = Field(description="SMS only: GSM-7 or UCS-2")
    created_at: datetime
    accepted_at: datetime | None
    last_status_at: datetime | None
    terminal_at: datetime | None
    response_body: str | None = Field(
        default=None,
        description="What the provider answered when it did not accept the send: "
        "destinations redacted, at most 2 KiB",
    )

    @classmethod
    def of(cls, a: Attempt) -> AttemptOut:
        return cls(
            n=a.n,
            state=a.state.value,
            provider=a.provider,
            provider_message_id=a.provider_message_id,
            attempt_key=a.attempt_key,
            code=a.code,
            segments=a.segments,
            encoding=a.encoding,
            created_at=a.created_at,
            accepted_at=a.accepted_at,
            last_status_at=a.last_status_at,
            terminal_at=a.terminal_at,
            response_body=a.response_body,
        )


class Decision(BaseModel):
    code: str | None
    policy_version: str | None
    retry_after: datetime | None = Field(
        default=None,
        description="For a decision that rescheduled the intent (a quiet window, a rate "
        "limit, a provider's 429): the time it may go again; null otherwise",
        examples=["2026-12-01T08:00:00Z"],
    )


# States in which an intent waits for a claim at `next_due_at`.
_WAITING = frozenset({"pending", "resend_due"})


class TemplateUsed(BaseModel):
    name: str
    revision: int | None


class IntentOut(BaseModel):
    id: UUID
    idempotency_key: str
    state: str
    version: int
    channel: str
    recipient_ref: str
    purpose: str
    event_class: str
    correlation_id: str | None
    template: TemplateUsed
    template_revision: int | None
    policy_version: str | None
    decision: Decision
    next_attempt_at: datetime | None = Field(
        description="When a worker will next consider it (pending or resend_due); "
        "null when it is sending, accepted or final",
        examples=["2026-12-01T08:00:00Z"],
    )
    cancel_reason: str | None
    state_note: str | None = Field(
        default=None,
        description="What the final state leaves out, said plainly: set when the intent "
        "was canceled, expired or failed after a message was handed to a provider "
        "(a cancel cannot unsend); null otherwise",
        examples=["canceled after the message was delivered: a cancel cannot unsend it"],
    )
    resend_budget: int
    attempt_count: int
    expires_at: datetime | None
    not_before: datetime | None
    created_at: datetime
    accepted_at: datetime | None
    last_status_at: datetime | None
    terminal_at: datetime | None
    updated_at: datetime
    attempts: list[AttemptOut]

    @classmethod
    def of(cls, i: Intent) -> IntentOut:
        return cls(
            id=i.id,
            idempotency_key=i.idempotency_key,
            state=i.state.value,
            version=i.version,
            channel=i.channel,
            recipient_ref=i.recipient_ref,
            purpose=i.purpose,
            event_class=i.event_class,
            correlation_id=i.correlation_id,
            template=TemplateUsed(name=i.template_name, revision=i.template_revision),
            template_revision=i.template_revision,
            policy_version=i.policy_version,
            decision=Decision(
                code=i.decision_code,
                policy_version=i.policy_version,
                retry_after=_retry_after(i),
            ),
            next_attempt_at=i.next_due_at if i.state.value in _WAITING else None,
            cancel_reason=i.cancel_reason,
            state_note=state_note(i),
            resend_budget=i.resend_budget,
            attempt_count=i.attempt_count,
            expires_at=i.expires_at,
            not_before=i.not_before,
            created_at=i.created_at,
            accepted_at=i.accepted_at,
            last_status_at=i.last_status_at,
            terminal_at=i.terminal_at,
            updated_at=i.updated_at,
            attempts=[AttemptOut.of(a) for a in i.attempts],
        )


class CancelIn(RequestModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"reason": "member_left"}]}
    )

    reason: CancelReason


class TimelineEntryOut(BaseModel):
    at: datetime
    kind: str = Field(description="transition, attempt, observation or retention")
    from_state: str | None = Field(serialization_alias="from")
    to_state: str | None = Field(serialization_alias="to")
    event: str
    actor: str
    policy_version: str | None
    detail: dict[str, Any]

    @classmethod
    def of(cls, e: TimelineEntry) -> TimelineEntryOut:
        return cls(
            at=e.at,
            kind=e.kind,
            from_state=e.from_state,
            to_state=e.to_state,
            event=e.event,
            actor=e.actor,
            policy_version=e.policy_version,
            detail=dict(e.detail),
        )


class Timeline(BaseModel):
    intent_id: UUID
    entries: list[TimelineEntryOut]


def _retry_after(i: Intent) -> datetime | None:
    """The next eligible time of a rescheduling decision: the intent waits
    with a decision code that is not an allowance (a send decision is
    ALLOWED, a creation has none)."""
    waiting = i.state.value in _WAITING and i.decision_code not in (None, "ALLOWED")
    later = i.next_due_at is not None and i.next_due_at > i.updated_at
    return i.next_due_at if waiting and later else None
