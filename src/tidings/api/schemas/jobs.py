"""Bulk jobs and their audiences, inline or uploaded."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from tidings.api.schemas.common import JsonObject, Moment, RequestModel, Text
from tidings.api.schemas.intents import TemplateRef


class AudienceMemberIn(RequestModel):
    ref: Text = Field(
        min_length=1,
        max_length=200,
        description="Your id for the recipient, unique within the audience",
    )
    phone: Text | None = Field(
        default=None,
        max_length=32,
        description="E.164 phone number; give neither phone nor email to use the contact record's",
    )
    email: Text | None = Field(
        default=None,
        max_length=254,
        description="E-mail address; give neither phone nor email to use the contact record's",
    )
    timezone: Text | None = Field(
        default=None,
        max_length=64,
        description="IANA time zone; null: the contact record's when the member gives no "
        "destination",
    )
    locale: Text | None = Field(
        default=None,
        max_length=35,
        description="BCP 47 language tag; null: the contact record's when the member gives no "
        "destination",
    )
    preferences: list[Literal["sms", "email"]] = Field(
        default_factory=list,
        description="Channels the recipient accepts, in order; empty: the contact record's when "
        "the member gives no destination",
    )
    variables: JsonObject = Field(
        default_factory=dict, description="This recipient's template variables, over the job's"
    )


class ReportRef(RequestModel):
    id: Text = Field(min_length=1, max_length=200, description="The registered report's id")
    revision: int = Field(ge=1, description="The report's revision, from 1")


class JobIn(RequestModel):
    idempotency_key: Text = Field(
        min_length=1,
        max_length=255,
        description="Your key for this job, unique per tenant: a replay with the same body "
        "returns the first job",
    )
    event_class: Text = Field(
        min_length=1,
        max_length=200,
        description="Your kind of notification, given to every intent of the job",
    )
    purpose: Text = Field(
        min_length=1,
        max_length=200,
        description="The messages' purpose, which the policy's consent rules name",
    )
    template: TemplateRef = Field(description="The template every recipient is sent")
    channels: list[Literal["sms", "email"]] = Field(
        min_length=1, max_length=2, description="The channels the job may use"
    )
    channel_mode: Literal["preferred", "all"] = Field(
        default="preferred",
        description="preferred: one channel per recipient, the first they accept; all: every job "
        "channel they accept and have a destination for",
    )
    audience: list[AudienceMemberIn] | None = Field(
        default=None,
        min_length=1,
        description="The recipients inline, for small audiences; or give `audience_upload`",
    )
    audience_upload: UUID | None = Field(
        default=None,
        description="The id of an uploaded audience (`POST /v1/audiences`) not used by "
        "another job; exactly one of `audience` and `audience_upload`",
    )
    variables: JsonObject = Field(
        default_factory=dict, description="Template variables shared by every recipient"
    )
    report: ReportRef | None = Field(
        default=None, description="A registered report attached by reference; null: none"
    )
    token_ttl_seconds: int | None = Field(
        default=None,
        ge=60,
        le=30 * 86400,
        description="Seconds (60 to 30 days) after creation during which its messages may go: the"
        " deadline of the tokens minted for them; null: none",
    )
    expires_at: Moment | None = Field(
        default=None,
        description="UTC time after which none of its messages is sent; null: no deadline",
    )
    event_reason: Text | None = Field(
        default=None,
        max_length=500,
        description='Why the job is sent, kept for audit ("credential stuffing"); null: not said',
    )


class JobAccepted(BaseModel):
    id: UUID = Field(description="The job's id")
    status: str = Field(
        description="The job's status now, as `GET /v1/jobs/{id}` says (preparing when new)"
    )


class JobCost(BaseModel):
    """Seed 003's bill (docs/jobs.md): attempts = eligible recipients x
    permitted channels + retries, per channel."""

    eligible_intents: int = Field(
        description="Intents not excluded by policy (suppressed, no_permitted_channel)"
    )
    attempts: int = Field(description="Attempts made, retries included")
    retries: int = Field(description="Attempts numbered above 1")
    attempts_reached_provider: int = Field(description="Attempts a provider accepted")
    sms_segments: int = Field(description="SMS segments counted over its attempts")
    by_channel: dict[str, dict[str, int]] = Field(
        description="Per channel: eligible_intents, attempts, retries, segments"
    )
    retained_bytes: int = Field(description="bytes of evidence the job holds, as written")
    retained_until: datetime | None = Field(description="when the last of it is purged")


class JobStatus(BaseModel):
    id: UUID = Field(description="The job's id")
    status: Literal["preparing", "dispatching", "complete", "complete_with_failures"] = Field(
        description="Derived from the counts: complete_with_failures when any intent ended "
        "failed, expired or unknown"
    )
    counts: dict[str, int] = Field(description="Intents per state")
    counts_by_channel: dict[str, dict[str, int]] = Field(
        description="Intents per channel, then per state"
    )
    counts_by_code: dict[str, int] = Field(
        description="intents per decision code (the policy's reasons, provider codes)"
    )
    updated_at: datetime = Field(description="The latest change of the job or of its numbers (UTC)")
    poll_after_seconds: int = Field(
        description="when to ask again; also the Retry-After header (docs/jobs.md)"
    )
    audience_size: int = Field(description="Recipients in the frozen audience")
    audience_version: str = Field(description="A hash of the frozen audience (sha256:...)")
    policy_version: str = Field(description="The policy version the job froze")
    template: dict[str, Any] = Field(description="The template's name and its revision per channel")
    event_class: str = Field(description="The job's event class")
    report: dict[str, Any] | None = Field(
        description="The attached report's id and revision; null: none"
    )
    expires_at: datetime | None = Field(
        description="UTC deadline after which none of its messages is sent; null: none"
    )
    evidence_expires_at: datetime | None = Field(
        description="when the job's recipient-level evidence (its intents) is purged"
    )
    facts_expire_at: datetime | None = Field(
        description="when the job itself, with the final counts kept on it, is purged"
    )
    created_at: datetime = Field(description="When the job was created (UTC)")
    cost: JobCost = Field(description="What the job cost so far")


class RecipientOut(BaseModel):
    recipient_ref: str = Field(description="The caller's id for the recipient")
    channel: str | None = Field(
        description="The channel of its intent; null until the recipient is resolved"
    )
    state: str = Field(description="Its intent's state; queued until the recipient is resolved")
    code: str | None = Field(description="The intent's decision code; null when there is none")
    intent_id: UUID | None = Field(
        description="Its intent's id; null until the recipient is resolved"
    )


class RecipientPage(BaseModel):
    items: list[RecipientOut] = Field(
        description="Recipients in audience order, one row per intent"
    )
    next: str | None = Field(description="Pass as `after` for the next page; null on the last page")


class AudienceUploaded(BaseModel):
    id: UUID = Field(description="The upload's id: give it as a job's `audience_upload`")
    size: int = Field(description="Recipients in the upload")
    version: str = Field(description="A hash of the upload's recipients (sha256:...)")
    expires_at: datetime = Field(
        description="When the upload expires unused (UTC), 24 hours after it was made"
    )
