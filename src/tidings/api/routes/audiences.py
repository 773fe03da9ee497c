"""Uploaded audiences: `POST /v1/audiences`, an NDJSON body streamed in.

One recipient per line, with the fields of an inline job audience member.
The body is never held whole: each line is validated as it arrives and the
members are staged in chunks inside one transaction, so a bad line (422,
naming it) leaves nothing stored. A job then freezes the upload by id
(`POST /v1/jobs` with `audience_upload`). Its size limit is its own
(`ApiSettings.max_upload_bytes`, `TIDINGS_MAX_UPLOAD_BYTES`), not the
small one for JSON bodies.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from pydantic import BaseModel, ValidationError

from tidings.api.auth import Sender
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.problems import UnsupportedMediaType
from tidings.api.routes.jobs import AudienceMemberIn
from tidings.api.streaming import lines
from tidings.domain.errors import InvalidInput, InvalidLine
from tidings.jobs import uploads
from tidings.jobs.request import AudienceMember, parse_member

PATH = "/v1/audiences"
MEDIA_TYPE = "application/x-ndjson"
# Generous for one recipient and its variables; it bounds what one
# unfinished line can make the server hold.
MAX_LINE_BYTES = 64 * 1024

router = APIRouter(prefix=PATH, tags=["audiences"])

REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "description": (
        "One JSON recipient object per line (newline-delimited JSON), with the fields of "
        "a job's `audience` member: `ref`, `phone`, `email`, `timezone`, `locale`, "
        f"`preferences`, `variables`. Lines of at most {MAX_LINE_BYTES} bytes; blank lines "
        "are skipped. Send it streamed (chunked) if you like: it is read as it arrives."
    ),
    "content": {
        MEDIA_TYPE: {
            "schema": {"type": "string"},
            "example": '{"ref": "reader-1", "email": "reader1@example.com"}\n'
            '{"ref": "reader-2", "phone": "+14155550123", "preferences": ["sms"]}\n',
        }
    },
}


class AudienceUploaded(BaseModel):
    id: UUID
    size: int
    version: str
    expires_at: datetime


@router.post(
    "",
    status_code=201,
    responses=responses(*WITH_BODY, 415),
    openapi_extra={"requestBody": REQUEST_BODY},
    summary="Upload an audience (NDJSON, streamed) for one bulk job",
)
def post_audience(request: Request, caller: Sender) -> AudienceUploaded:
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != MEDIA_TYPE:
        raise UnsupportedMediaType(f"send the audience as {MEDIA_TYPE}, one recipient per line")
    t = caller.tidings
    t._ensure_tenant()
    with t.db.transaction() as conn:
        upload = uploads.stage(
            conn,
            caller.tenant,
            _members(request),
            t.vault,
            t.clock.now(),
            caller.actor,
            uploads.Lines(),
        )
    return AudienceUploaded(
        id=upload.id, size=upload.size, version=upload.version, expires_at=upload.expires_at
    )


def _members(request: Request) -> Iterator[tuple[int, AudienceMember]]:
    for number, line in lines(request, MAX_LINE_BYTES):
        if line.strip():
            yield number, _member(number, line)


def _member(number: int, line: bytes) -> AudienceMember:
    try:
        item = AudienceMemberIn.model_validate_json(line)
    except ValidationError as exc:
        # Only pydantic's message and location: its `input` may hold a
        # destination, so it is never echoed.
        first = exc.errors(include_url=False, include_input=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "line"
        raise InvalidLine(number, field, first["msg"]) from None
    try:
        return parse_member(item.model_dump(exclude_none=True))
    except InvalidInput as exc:
        raise InvalidLine(number, exc.field, exc.message) from None
