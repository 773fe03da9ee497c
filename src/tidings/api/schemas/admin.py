"""Administration: templates, policies, delivery controls and API keys."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from tidings.api.schemas.common import (
    ChannelName,
    Moment,
    RequestModel,
    Text,
)
from tidings.templates.model import TemplateRevision


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
    dispatch_variables: list[Annotated[Text, Field(max_length=100)]] = Field(
        default_factory=list,
        max_length=100,
        description="Required variables a minter fills at dispatch (a reset link); "
        "every other required variable must be given when an intent is created",
        examples=[["reset_link"]],
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
    dispatch_variables: list[str]
    attachment_policy: str
    provider_template_ids: dict[str, str]
    content_hash: str

    @classmethod
    def of(cls, r: TemplateRevision) -> TemplateOut:
        return cls(
            name=r.name,
            revision=r.revision,
            channel=r.channel,
            locale=r.locale,
            subject=r.subject,
            body=r.body,
            html_body=r.html_body,
            required_variables=list(r.required_variables),
            dispatch_variables=list(r.dispatch_variables),
            attachment_policy=r.attachment_policy,
            provider_template_ids=dict(r.provider_template_ids),
            content_hash=r.content_hash,
        )


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
    purpose: Annotated[Text, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="One notification purpose; null or absent: all"
    )
    event_class: Annotated[Text, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="One event class; null or absent: all"
    )


class ControlIn(RequestModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"enabled": True, "scope": {"channel": "sms", "country": "DE"}}]
        },
    )

    enabled: bool
    scope: ControlScope = Field(default_factory=ControlScope)
    live_percent: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Shadow mode only: the recipients sent to for real, by stable bucket;"
        " it only grows (a smaller one is 409 COHORT_SHRINK); absent keeps the stored one",
    )


class ControlOut(BaseModel):
    kind: Literal["kill_switch", "shadow_mode"]
    enabled: bool
    scope: ControlScope
    live_percent: int = Field(description="Shadow mode's live cohort, 0..100; 0 for a kill switch")
    updated_at: datetime
    updated_by: str


class ControlList(BaseModel):
    items: list[ControlOut]


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
    parent_key_id: str | None = Field(
        description="The key that minted this one (it expires no later, and is revoked with it);"
        " null for a key an operator made"
    )
    name: str
    scopes: list[str]
    state: Literal["live", "expired", "revoked"]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, never again")


class KeyRevoked(KeyOut):
    revoked_descendants: list[str] = Field(
        description="The ids of every key below this one (minted by it, or by those),"
        " all revoked with it"
    )


class KeyList(BaseModel):
    items: list[KeyOut]
