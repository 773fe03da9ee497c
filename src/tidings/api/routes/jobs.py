"""Bulk jobs: create (idempotent, answers at once), status, recipients."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from tidings.api.auth import Reader, Sender
from tidings.api.openapi import NOT_FOUND, WITH_BODY, responses
from tidings.api.schemas.cancel import CancelCountsOut
from tidings.api.schemas.common import JsonObject, Moment, RequestModel, Text
from tidings.api.schemas.intents import CancelIn, TemplateRef
from tidings.jobs.freeze import create_job
from tidings.jobs.request import parse_job

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
MAX_CURSOR_DIGITS = 19


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
    channel_mode: Literal["preferred", "all"] = "preferred"
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


class JobStatus(BaseModel):
    id: UUID
    status: Literal["preparing", "dispatching", "complete", "complete_with_failures"]
    counts: dict[str, int]
    counts_by_channel: dict[str, dict[str, int]]
    updated_at: datetime
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
    cost: dict[str, int]


class RecipientOut(BaseModel):
    recipient_ref: str
    channel: str | None
    state: str
    code: str | None
    intent_id: UUID | None


class RecipientPage(BaseModel):
    items: list[RecipientOut]
    next: str | None


@router.post(
    "",
    status_code=202,
    responses=responses(*WITH_BODY, NOT_FOUND, 409),
    summary="Record a bulk job and freeze its audience; workers send it",
)
def post_job(body: JobIn, caller: Sender, response: Response) -> JobAccepted:
    t = caller.tidings
    request = parse_job(body.model_dump(exclude_none=True))
    t._ensure_tenant()
    with t.db.transaction() as conn:
        job, created = create_job(
            conn, caller.tenant, request, t.vault, t.clock.now(), caller.actor, t.template_ids()
        )
    if not created:
        response.status_code = 200
    return JobAccepted(id=job["id"], status=t.job(job["id"])["status"])


@router.get("/{job_id}", responses=responses(NOT_FOUND), summary="Status and counts, from rows")
def get_job(job_id: str, caller: Reader) -> JobStatus:
    return JobStatus(**caller.tidings.job(job_id))


@router.post(
    "/{job_id}/cancel",
    responses=responses(*WITH_BODY, NOT_FOUND, 409),
    summary="Cancel every open intent of the job, in batches; 409 while it is preparing",
)
def cancel_job(job_id: str, body: CancelIn, caller: Sender) -> CancelCountsOut:
    counts = caller.tidings.cancel_job(job_id, body.reason.value, actor=caller.actor)
    return CancelCountsOut(canceled=counts.canceled, already_final=counts.already_final)


@router.get(
    "/{job_id}/recipients",
    responses=responses(NOT_FOUND, 422),
    summary="Recipients of the frozen audience, by a stable cursor",
)
def get_recipients(
    job_id: str,
    caller: Reader,
    after: str | None = None,
    limit: int = Query(100, ge=1, le=1000),
) -> RecipientPage:
    start = _cursor(after)
    return RecipientPage(**caller.tidings.job_recipients(job_id, after=start, limit=limit))


def _cursor(after: str | None) -> int:
    if after is None or after == "":
        return 0
    # "³" is a digit to isdigit, not to int; and int() refuses (ValueError, a
    # 500) past 4300 digits: a position is a bigint, at most 19 digits.
    if not (after.isascii() and after.isdigit()) or len(after) > MAX_CURSOR_DIGITS:
        from tidings.domain.errors import InvalidInput

        raise InvalidInput("after", "not a cursor from this listing")
    return int(after)
