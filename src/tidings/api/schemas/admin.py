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
    name: Text = Field(
        max_length=200,
        description="The template's name; a new revision of an existing name gets the next number",
    )
    channel: Text = Field(max_length=20, examples=["sms"], description="sms or email")
    locale: Text = Field(
        default="en", max_length=35, description="BCP 47 language tag of this revision's text"
    )
    subject: Text | None = Field(
        default=None, max_length=998, description="The e-mail subject, a template; null for sms"
    )
    body: Text = Field(
        max_length=65_536,
        description="The message text, a template (the plain-text part for email)",
    )
    html_body: Text | None = Field(
        default=None,
        max_length=262_144,
        description="The e-mail HTML part, a template; null: plain text only",
    )
    required_variables: list[Annotated[Text, Field(max_length=100)]] = Field(
        default_factory=list,
        max_length=100,
        description="Variables the body needs; an intent missing one is refused "
        "(MISSING_VARIABLES)",
    )
    dispatch_variables: list[Annotated[Text, Field(max_length=100)]] = Field(
        default_factory=list,
        max_length=100,
        description="Required variables a minter fills at dispatch (a reset link); "
        "every other required variable must be given when an intent is created",
        examples=[["reset_link"]],
    )
    attachment_policy: Text = Field(
        default="none",
        max_length=20,
        description="none, optional or required: whether a message may or must carry a report",
    )
    provider_template_ids: dict[
        Annotated[Text, Field(max_length=100)], Annotated[Text, Field(max_length=200)]
    ] = Field(default_factory=dict, description="The provider's own template id, by provider name")
    required_providers: list[Annotated[Text, Field(max_length=100)]] = Field(
        default_factory=list,
        max_length=20,
        description="Providers that will send this revision and need a provider template id",
    )


class TemplateProblem(BaseModel):
    code: str = Field(description="The stable problem code (INVALID_CHANNEL, ...)")
    field: str = Field(description="The field at fault")
    message: str = Field(description="What is wrong, in words")
    severity: str = Field(description="error (blocks the deploy) or warning")


class TemplatePublished(BaseModel):
    name: str = Field(description="The template's name")
    revision: int = Field(
        description="The revision published; the latest one when its content was the same"
    )
    channel: str = Field(description="sms or email")
    locale: str = Field(description="The revision's locale")
    content_hash: str = Field(description="sha256 (hex) of the revision's canonical content")
    warnings: list[TemplateProblem] = Field(description="Problems that did not block the deploy")


class TemplateOut(BaseModel):
    name: str = Field(description="The template's name")
    revision: int = Field(description="The revision's number, from 1; immutable once published")
    channel: str = Field(description="sms or email")
    locale: str = Field(description="The revision's locale")
    subject: str | None = Field(description="The e-mail subject template; null for sms")
    body: str = Field(description="The message text template")
    html_body: str | None = Field(description="The e-mail HTML template; null: plain text only")
    required_variables: list[str] = Field(description="Variables the revision needs")
    dispatch_variables: list[str] = Field(
        description="Required variables a minter fills at dispatch"
    )
    attachment_policy: str = Field(description="none, optional or required")
    provider_template_ids: dict[str, str] = Field(
        description="The provider's own template id, by provider name"
    )
    content_hash: str = Field(description="sha256 (hex) of the revision's canonical content")

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
    items: list[TemplateOut] = Field(description="The tenant's template revisions")


class PolicyPublished(BaseModel):
    version: str = Field(description="The version published (the document's own)")


class PolicyOut(BaseModel):
    version: str = Field(description="The policy's version, immutable")
    name: str = Field(description="The policy document's name")
    published_at: datetime = Field(description="When it was published (UTC)")
    published_by: str = Field(description="The actor that published it")


class PolicyList(BaseModel):
    current: str | None = Field(description="The version new intents freeze; null before any")
    items: list[PolicyOut] = Field(description="Every published version, newest first")


class ControlScope(RequestModel):
    channel: ChannelName | None = Field(
        default=None, description="The channel covered; null: every channel"
    )
    country: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z]{2}$",
        description="ISO 3166 two-letter country covered; null: every country",
    )
    purpose: Annotated[Text, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="The notification purpose covered; null: every purpose"
    )
    event_class: Annotated[Text, Field(min_length=1, max_length=200)] | None = Field(
        default=None, description="The event class covered; null: every event class"
    )


class ControlIn(RequestModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"enabled": True, "scope": {"channel": "sms", "country": "DE"}}]
        },
    )

    enabled: bool = Field(description="On or off")
    scope: ControlScope = Field(
        default_factory=ControlScope, description="What it covers; empty: everything"
    )
    live_percent: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Shadow mode only: the recipients sent to for real, by stable bucket;"
        " it only grows (a smaller one is 409 COHORT_SHRINK); absent keeps the stored one",
    )


class ControlOut(BaseModel):
    kind: Literal["kill_switch", "shadow_mode"] = Field(
        description="The control: kill_switch (no sends) or shadow_mode (decisions only)"
    )
    enabled: bool = Field(description="Whether it is on")
    scope: ControlScope = Field(description="What it covers")
    live_percent: int = Field(description="Shadow mode's live cohort, 0..100; 0 for a kill switch")
    updated_at: datetime = Field(description="When it was last set (UTC)")
    updated_by: str = Field(description="The actor that last set it")


class ControlList(BaseModel):
    items: list[ControlOut] = Field(description="The tenant's controls")


KeyScope = Literal["send", "read", "admin", "webhook"]
MAX_KEY_SECONDS = 10 * 366 * 24 * 3600


class KeyIn(RequestModel):
    scopes: list[KeyScope] = Field(
        min_length=1, max_length=4, description="What the key may do: send, read, admin, webhook"
    )
    name: Annotated[Text, Field(min_length=1, max_length=200)] = Field(
        default="api", description="A label for the key"
    )
    expires_at: Moment | None = Field(
        default=None, description="When the key stops working; at most one of the two"
    )
    expires_in_seconds: int | None = Field(
        default=None,
        ge=60,
        le=MAX_KEY_SECONDS,
        description="Seconds from now until the key stops working (60 s to 10 years); at most one"
        " of the two",
    )


class KeyOut(BaseModel):
    key_id: str = Field(description="The key's id, safe to show (never the secret)")
    parent_key_id: str | None = Field(
        description="The key that minted this one (it expires no later, and is revoked with it);"
        " null for a key an operator made"
    )
    name: str = Field(description="The key's label")
    scopes: list[str] = Field(description="What the key may do")
    state: Literal["live", "expired", "revoked"] = Field(description="live, expired or revoked")
    created_at: datetime = Field(description="When it was made (UTC)")
    expires_at: datetime | None = Field(description="When it stops working (UTC); null: never")
    revoked_at: datetime | None = Field(
        description="When it was revoked (UTC); null unless revoked"
    )


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, never again")


class KeyRevoked(KeyOut):
    revoked_descendants: list[str] = Field(
        description="The ids of every key below this one (minted by it, or by those),"
        " all revoked with it"
    )


class KeyList(BaseModel):
    items: list[KeyOut] = Field(description="The tenant's keys, without their secrets")
