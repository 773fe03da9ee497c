"""Bulk jobs and their audiences, inline or uploaded."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from tidings.api.schemas.common import JsonObject, Moment, RequestModel, Text
from tidings.api.schemas.intents import TemplateRef


class AudienceMemberIn(RequestModel):
    ref: Text = Field(min_length=1, max_length=200)
    phone: Text | None = Field(default=None, max_length=32)
    email: Text | None = Field(default=None, max_length=254)
    timezone: Text | None = Field(default=None, max_length=64)
    locale: Text | None = Field(default=None, max_length=35)
    preferences: list[Literal["sms", "email"]] = Field(default_factory=list)
    variables: JsonObject = Field(default_factory=dict)


class ReportRef(RequestModel):
    id: Text = Field(min_length=1, max_length=200)
    revision: int = Field(ge=1)


class JobIn(RequestModel):
    idempotency_key: Text = Field(min_length=1, max_length=255)
    event_class: Text = Field(min_length=1, max_length=200)
    purpose: Text = Field(min_length=1, max_length=200)
    template: TemplateRef
    channels: list[Literal["sms", "email"]] = Field(min_length=1, max_length=2)
    channel_mode: Literal["preferred", "all", "first_available"] = Field(
        default="preferred",
        description="`preferred`: one channel per recipient, their first preference or the "
        "job's first channel; `all`: every channel they take; `first_available`: the first "
        "channel they can be reached on, where the purpose's policy sets `channel_fallback` "
        "(docs/jobs.md, channel modes)",
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
    variables: JsonObject = Field(default_factory=dict)
    report: ReportRef | None = None
    token_ttl_seconds: int | None = Field(default=None, ge=60, le=30 * 86400)
    expires_at: Moment | None = None
    event_reason: Text | None = Field(default=None, max_length=500)


class JobAccepted(BaseModel):
    id: UUID
    status: str


class JobCost(BaseModel):
    """Seed 003's bill (docs/jobs.md): attempts = eligible recipients x
    permitted channels + retries, per channel."""

    eligible_intents: int
    attempts: int
    retries: int
    attempts_reached_provider: int
    sms_segments: int
    by_channel: dict[str, dict[str, int]]
    retained_bytes: int = Field(description="bytes of evidence the job holds, as written")
    retained_until: datetime | None = Field(description="when the last of it is purged")


class JobStatus(BaseModel):
    id: UUID
    status: Literal["preparing", "dispatching", "complete", "complete_with_failures"]
    counts: dict[str, int]
    counts_by_channel: dict[str, dict[str, int]]
    counts_by_code: dict[str, int] = Field(
        description="intents per decision code (the policy's reasons, provider codes)"
    )
    updated_at: datetime
    poll_after_seconds: int = Field(
        description="when to ask again; also the Retry-After header (docs/jobs.md)"
    )
    audience_size: int
    audience_version: str
    policy_version: str
    template: dict[str, Any]
    event_class: str
    report: dict[str, Any] | None
    expires_at: datetime | None
    evidence_expires_at: datetime | None = Field(
        description="when the job's recipient-level evidence (its intents) is purged"
    )
    facts_expire_at: datetime | None = Field(
        description="when the job itself, with the final counts kept on it, is purged"
    )
    created_at: datetime
    cost: JobCost


class RecipientOut(BaseModel):
    recipient_ref: str
    channel: str | None
    state: str
    code: str | None
    intent_id: UUID | None


class RecipientPage(BaseModel):
    items: list[RecipientOut]
    next: str | None


class AudienceUploaded(BaseModel):
    id: UUID
    size: int
    version: str
    expires_at: datetime
