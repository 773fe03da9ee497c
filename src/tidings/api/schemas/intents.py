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
    timezone: Text | None = Field(
        default=None,
        max_length=64,
        examples=["Europe/Berlin"],
        description="IANA time zone for the policy's local send windows; null: inferred from the "
        "phone number or country where it can be",
    )
    locale: Text | None = Field(
        default=None,
        max_length=35,
        examples=["en", "de-AT"],
        description="BCP 47 language tag choosing the template revision's locale; null: the "
        "default locale (en)",
    )
    country: str | None = Field(
        None, pattern=r"^[A-Z]{2}$", description="For email, where a phone number cannot tell"
    )


class TemplateRef(RequestModel):
    name: Text = Field(min_length=1, max_length=200, description="The template's name")
    revision: int | None = Field(
        default=None,
        ge=1,
        le=MAX_INT4,
        description="A revision to pin; null: the newest in the recipient's locale at creation",
    )


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

    idempotency_key: Text = Field(
        min_length=1,
        max_length=255,
        description="Your key for this intent, unique per tenant: a replay with the same body "
        "returns the first intent",
    )
    channel: ChannelName = Field(description="The channel to send on")
    recipient: RecipientIn = Field(description="Who to send to")
    template: TemplateRef | Annotated[Text, Field(min_length=1, max_length=200)] = Field(
        description="The template: its name, or a name and a revision"
    )
    variables: JsonObject = Field(
        default_factory=dict,
        description="Values for the template's variables, at most 16 KiB as JSON",
    )
    purpose: Text = Field(
        min_length=1,
        max_length=200,
        examples=["transactional"],
        description="The message's purpose, which the policy's consent rules name",
    )
    event_class: Text = Field(
        min_length=1,
        max_length=200,
        examples=["waitlist_offer"],
        description="Your kind of notification, for limits, filters and cancel-many",
    )
    expires_at: Moment | None = Field(
        default=None,
        description="UTC time after which it must not be sent (it expires instead); null: no "
        "deadline",
    )
    not_before: Moment | None = Field(
        default=None, description="UTC time before which it is not sent; null: at once"
    )
    correlation_id: Text | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Your id tying it to your own records; listing and cancel-many filter by it",
    )
    resend_budget: int | None = Field(
        default=None,
        ge=0,
        le=10,
        description="Resends allowed after a retryable non-delivery (0 to 10); null: the policy's"
        " budget",
    )


class AttemptOut(BaseModel):
    n: int = Field(description="The attempt's number within the intent, from 1")
    state: str = Field(description="sending, accepted, delivered, undelivered, failed or unknown")
    provider: str = Field(description="The provider adapter that sent it")
    provider_message_id: str | None = Field(
        description="The provider's id for the message; null until the provider accepted it"
    )
    attempt_key: str = Field(
        description="Our reference for the attempt, made from the intent id and n: the "
        "idempotency key the provider sees"
    )
    code: str | None = Field(
        description="The normalized failure or status code; null when there is none"
    )
    segments: int | None = Field(description="SMS only")
    encoding: str | None = Field(description="SMS only: GSM-7 or UCS-2")
    created_at: datetime = Field(description="When the attempt was made (UTC)")
    accepted_at: datetime | None = Field(
        description="When the provider accepted it (UTC); null until then"
    )
    last_status_at: datetime | None = Field(
        description="When its last status was observed (UTC); null before any"
    )
    terminal_at: datetime | None = Field(
        description="When it reached a final state (UTC); null while it has not"
    )
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
    code: str | None = Field(
        description="The last policy or dispatch decision's code (ALLOWED, QUIET_WINDOW, ...); "
        "null before any decision"
    )
    policy_version: str | None = Field(
        description="The policy version that decided; null when none was published"
    )
    retry_after: datetime | None = Field(
        default=None,
        description="For a decision that rescheduled the intent (a quiet window, a rate "
        "limit, a provider's 429): the time it may go again; null otherwise",
        examples=["2026-12-01T08:00:00Z"],
    )


# States in which an intent waits for a claim at `next_due_at`.
_WAITING = frozenset({"pending", "resend_due"})


class TemplateUsed(BaseModel):
    name: str = Field(description="The template's name")
    revision: int | None = Field(description="The revision it renders; null when none was resolved")


class IntentOut(BaseModel):
    id: UUID = Field(description="The intent's id (a UUIDv7)")
    idempotency_key: str = Field(description="The caller's idempotency key")
    state: str = Field(
        description="pending, sending, accepted, resend_due, reconciling, unknown, delivered, "
        "canceled, suppressed, no_permitted_channel, failed or expired"
    )
    version: int = Field(description="Incremented on every state change")
    channel: str = Field(description="sms or email")
    recipient_ref: str = Field(
        description="The caller's id for the recipient; never the raw destination"
    )
    purpose: str = Field(description="The message's purpose, as given")
    event_class: str = Field(description="The caller's kind of notification, as given")
    correlation_id: str | None = Field(
        description="The caller's correlation id; null when none was given"
    )
    template: TemplateUsed = Field(description="The template and revision it renders")
    template_revision: int | None = Field(
        description="The template revision it renders; null when none was resolved"
    )
    policy_version: str | None = Field(
        description="The policy version frozen for it; null when none was published"
    )
    decision: Decision = Field(description="The last decision about it")
    next_attempt_at: datetime | None = Field(
        description="When a worker will next consider it (pending or resend_due); "
        "null when it is sending, accepted or final",
        examples=["2026-12-01T08:00:00Z"],
    )
    cancel_reason: str | None = Field(description="Why it was canceled; null unless canceled")
    state_note: str | None = Field(
        default=None,
        description="What the final state leaves out, said plainly: set when the intent "
        "was canceled, expired or failed after a message was handed to a provider "
        "(a cancel cannot unsend); null otherwise",
        examples=["canceled after the message was delivered: a cancel cannot unsend it"],
    )
    resend_budget: int = Field(description="Resends allowed after a retryable non-delivery")
    attempt_count: int = Field(description="Attempts made so far")
    expires_at: datetime | None = Field(
        description="UTC deadline after which it is not sent; null: none"
    )
    not_before: datetime | None = Field(
        description="UTC time before which it is not sent; null: none"
    )
    created_at: datetime = Field(description="When it was created (UTC)")
    accepted_at: datetime | None = Field(
        description="When a provider first accepted it (UTC); null until then"
    )
    last_status_at: datetime | None = Field(
        description="When the last status was observed (UTC); null before any"
    )
    terminal_at: datetime | None = Field(
        description="When it reached a final state (UTC); null while it has not"
    )
    updated_at: datetime = Field(description="When it last changed (UTC)")
    attempts: list[AttemptOut] = Field(description="Its attempts, first to last")

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

    reason: CancelReason = Field(
        description="Why: member_left, class_canceled, spot_claimed, deadline or operator"
    )


class TimelineEntryOut(BaseModel):
    at: datetime = Field(description="When it happened (UTC)")
    kind: str = Field(description="transition, attempt, observation or retention")
    from_state: str | None = Field(
        serialization_alias="from",
        description="The intent's state before, for a transition; null for other kinds",
    )
    to_state: str | None = Field(
        serialization_alias="to",
        description="The state after: the intent's, the attempt's, or the observed status; "
        "null for retention",
    )
    event: str = Field(description="What happened, in a word")
    actor: str = Field(
        description="Who did it: an API key's actor, worker, provider:NAME, retention, system"
    )
    policy_version: str | None = Field(
        description="The policy version in force; null when none applied"
    )
    detail: dict[str, Any] = Field(
        description="The entry's particulars, by kind; never a destination or content"
    )

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
    intent_id: UUID = Field(description="The intent's id")
    entries: list[TimelineEntryOut] = Field(description="Everything that happened to it, in order")


def _retry_after(i: Intent) -> datetime | None:
    """The next eligible time of a rescheduling decision: the intent waits
    with a decision code that is not an allowance (a send decision is
    ALLOWED, a creation has none)."""
    waiting = i.state.value in _WAITING and i.decision_code not in (None, "ALLOWED")
    later = i.next_due_at is not None and i.next_due_at > i.updated_at
    return i.next_due_at if waiting and later else None
