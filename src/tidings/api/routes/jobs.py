"""Bulk jobs: create (idempotent, answers at once), status, recipients."""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Response

from tidings.api.auth import Reader, Sender
from tidings.api.openapi import NOT_FOUND, WITH_BODY, responses
from tidings.api.schemas.cancel import CancelCountsOut
from tidings.api.schemas.intents import CancelIn
from tidings.api.schemas.jobs import JobAccepted, JobIn, JobStatus, RecipientPage
from tidings.domain.errors import InvalidInput

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
MAX_CURSOR_DIGITS = 19
JobId = Annotated[str, Path(description="The job's id (a UUID)")]


@router.post(
    "",
    status_code=202,
    responses=responses(*WITH_BODY, NOT_FOUND, 409),
    summary="Record a bulk job and freeze its audience; workers send it",
)
def post_job(body: JobIn, caller: Sender, response: Response) -> JobAccepted:
    t = caller.tidings
    recorded = t.record_job(actor=caller.actor, **body.model_dump(exclude_none=True))
    if not recorded.created:
        response.status_code = 200
    job_id = recorded.item["id"]
    return JobAccepted(id=job_id, status=t.job(job_id)["status"])


@router.get(
    "/{job_id}",
    response_model=JobStatus,
    responses=responses(NOT_FOUND, extra={304: {"description": "Nothing moved since that ETag"}}),
    summary="Status and kept counts; ETag, and when to poll again",
)
def get_job(
    job_id: JobId,
    caller: Reader,
    response: Response,
    if_none_match: str | None = Header(
        None, description="An ETag this answer gave before: 304 when nothing moved since"
    ),
) -> JobStatus | Response:
    status = JobStatus(**caller.tidings.job(job_id))
    tag = etag(status)
    headers = {"ETag": tag, "Retry-After": str(status.poll_after_seconds)}
    # The ETag names the whole answer: equal tags, nothing moved.
    if if_none_match is not None and tag in {t.strip() for t in if_none_match.split(",")}:
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return status


def etag(status: JobStatus) -> str:
    # poll_after_seconds changes as time passes, not as the job moves.
    body = status.model_dump_json(exclude={"poll_after_seconds"})
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


@router.post(
    "/{job_id}/cancel",
    responses=responses(*WITH_BODY, NOT_FOUND, 409),
    summary="Cancel every open intent of the job, in batches; 409 while it is preparing",
)
def cancel_job(job_id: JobId, body: CancelIn, caller: Sender) -> CancelCountsOut:
    counts = caller.tidings.cancel_job(job_id, body.reason.value, actor=caller.actor)
    return CancelCountsOut(canceled=counts.canceled, already_final=counts.already_final)


@router.get(
    "/{job_id}/recipients",
    responses=responses(NOT_FOUND, 422),
    summary="Recipients of the frozen audience, by a stable cursor",
)
def get_recipients(
    job_id: JobId,
    caller: Reader,
    after: str | None = Query(None, description="`next` of the last page; omit for the first"),
    limit: int = Query(100, ge=1, le=1000, description="Most recipients in the page"),
) -> RecipientPage:
    start = _cursor(after)
    return RecipientPage(**caller.tidings.job_recipients(job_id, after=start, limit=limit))


def _cursor(after: str | None) -> int:
    if after is None or after == "":
        return 0
    # "³" is a digit to isdigit, not to int; and int() refuses (ValueError, a
    # 500) past 4300 digits: a position is a bigint, at most 19 digits.
    if not (after.isascii() and after.isdigit()) or len(after) > MAX_CURSOR_DIGITS:
        raise InvalidInput("after", "not a cursor from this listing")
    return int(after)
