"""Request and response models of the HTTP contract, version 1.

Requests are checked twice on purpose: these models give clients an exact
OpenAPI schema and reject wrong types early; the domain parsers (e.g.
`IntentRequest.parse`) stay the authority on meaning, as for library
callers. Responses never carry a raw destination, a variable value or
rendered content.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from tidings.domain.cancellation import CancelReason
from tidings.domain.intent import Attempt, Intent, TimelineEntry
from tidings.domain.moments import bounds_text, within_bounds
from tidings.domain.storable import json_problem, text_problem

MAX_INT4 = 2**31 - 1
DATE_OUT_OF_RANGE_ERROR = "date_out_of_range"


def clean_text(value: str) -> str:
    # PostgreSQL text cannot hold NUL, and a lone surrogate cannot be encoded:
    # refuse both here rather than fail in the database.
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def clean_json(value: Any) -> Any:
    """Check a free-form JSON value can be stored as jsonb as it is, and is
    bounded in depth and size (`tidings.domain.storable`)."""
    problem = json_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def bounded_moment(value: datetime) -> datetime:
    # The range every reader can decode (domain/moments.py); its own error
    # type, so the problem answer carries the stable DATE_OUT_OF_RANGE code.
    if not within_bounds(value):
        raise PydanticCustomError(DATE_OUT_OF_RANGE_ERROR, bounds_text())
    return value


Text = Annotated[str, AfterValidator(clean_text)]
# Every time a tenant supplies: with a UTC offset, within 1970..9000.
Moment = Annotated[AwareDatetime, AfterValidator(bounded_moment)]
JsonObject = Annotated[dict[str, Any], AfterValidator(clean_json)]
ChannelName = Literal["sms", "email"]


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- intents ------------------------------------------------------------------


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
        )


class Decision(BaseModel):
    code: str | None
    policy_version: str | None


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
    cancel_reason: str | None
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
            decision=Decision(code=i.decision_code, policy_version=i.policy_version),
            cancel_reason=i.cancel_reason,
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
    reason: CancelReason


class TimelineEntryOut(BaseModel):
    at: datetime
    kind: str = Field(description="transition, attempt, observation or decision")
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


# --- templates, policies, controls -------------------------------------------


class TemplateIn(RequestModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "waitlist_offer",
                    "channel": "sms",
                    "locale": "en",
                    "body": "A spot opened in {{ class_name }}. Reply by {{ deadline }}.",
                    "required_variables": ["class_name", "deadline"],
                }
            ]
        },
    )

    # Loosely typed on purpose: the deploy gate lists every problem at once
    # (INVALID_CHANNEL, INVALID_LOCALE, ...) instead of stopping at the first.
    name: Text = Field(max_length=200)
    channel: Text = Field(max_length=20, examples=["sms"])
    locale: Text = Field(default="en", max_length=35)
    subject: Text | None = Field(default=None, max_length=998)
    body: Text = Field(max_length=65_536)
    html_body: Text | None = Field(default=None, max_length=262_144)
    required_variables: list[Annotated[Text, Field(max_length=100)]] = Field(
        default_factory=list, max_length=100
    )
    attachment_policy: Text = Field(default="none", max_length=20)
    provider_template_ids: dict[
        Annotated[Text, Field(max_length=100)], Annotated[Text, Field(max_length=200)]
    ] = Field(default_factory=dict)
    required_providers: list[Annotated[Text, Field(max_length=100)]] = Field(
        default_factory=list,
        max_length=20,
        description="Providers that will send this revision and need a provider template id",
    )


class TemplateProblem(BaseModel):
    code: str
    field: str
    message: str
    severity: str


class TemplatePublished(BaseModel):
    name: str
    revision: int
    channel: str
    locale: str
    content_hash: str
    warnings: list[TemplateProblem]


class TemplateOut(BaseModel):
    name: str
    revision: int
    channel: str
    locale: str
    subject: str | None
    body: str
    html_body: str | None
    required_variables: list[str]
    attachment_policy: str
    provider_template_ids: dict[str, str]
    content_hash: str


class TemplateList(BaseModel):
    items: list[TemplateOut]


class PolicyPublished(BaseModel):
    version: str


class PolicyOut(BaseModel):
    version: str
    name: str
    published_at: datetime
    published_by: str


class PolicyList(BaseModel):
    current: str | None = Field(description="The version new intents freeze; null before any")
    items: list[PolicyOut]


class ControlScope(RequestModel):
    channel: ChannelName | None = None
    country: str | None = Field(default=None, pattern=r"^[A-Za-z]{2}$")


class ControlIn(RequestModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"enabled": True, "scope": {"channel": "sms", "country": "DE"}}]
        },
    )

    enabled: bool
    scope: ControlScope = Field(default_factory=ControlScope)


class ControlOut(BaseModel):
    kind: Literal["kill_switch", "shadow_mode"]
    enabled: bool
    scope: ControlScope
    updated_at: datetime
    updated_by: str


class ControlList(BaseModel):
    items: list[ControlOut]


# --- API keys -------------------------------------------------------------------

KeyScope = Literal["send", "read", "admin", "webhook"]
MAX_KEY_SECONDS = 10 * 366 * 24 * 3600


class KeyIn(RequestModel):
    scopes: list[KeyScope] = Field(min_length=1, max_length=4)
    name: Annotated[Text, Field(min_length=1, max_length=200)] = "api"
    expires_at: Moment | None = Field(
        default=None, description="When the key stops working; at most one of the two"
    )
    expires_in_seconds: int | None = Field(default=None, ge=60, le=MAX_KEY_SECONDS)


class KeyOut(BaseModel):
    key_id: str
    name: str
    scopes: list[str]
    state: Literal["live", "expired", "revoked"]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, never again")


class KeyList(BaseModel):
    items: list[KeyOut]


# --- webhooks, events, health --------------------------------------------------


class WebhookReceived(BaseModel):
    received: int = Field(description="Observations in the request")
    effects: list[str] = Field(description="What each did: duplicate, unmatched, intent_...")


class EventOut(BaseModel):
    id: int
    type: str
    intent_id: UUID | None
    job_id: UUID | None
    payload: dict[str, Any]
    created_at: datetime


class EventPage(BaseModel):
    items: list[EventOut]
    next: str = Field(description="Opaque cursor: pass it as `after` to continue")
    has_more: bool = Field(description="True when the page was full: ask again at once")


class Health(BaseModel):
    status: Literal["ok"]
