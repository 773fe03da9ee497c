"""Uploaded audiences: `POST /v1/audiences`, an NDJSON body streamed in.

One recipient per line, with the fields of an inline job audience member.
The body is never held whole: lines are validated in batches as they
arrive and each batch is staged in a short transaction of its own, so no
connection waits on a slow client; a bad line (422, naming it), a client
too slow (408, `api/streaming.py`) or gone discards what was staged. One
tenant may run only a few uploads at once per process (429,
`api/upload_slots.py`). A job then freezes the upload by id
(`POST /v1/jobs` with `audience_upload`). Its size limit is its own
(`ApiSettings.max_upload_bytes`, `TIDINGS_MAX_UPLOAD_BYTES`), not the
small one for JSON bodies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from tidings.api.auth import Caller, Sender
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.problems import UnsupportedMediaType
from tidings.api.schemas.jobs import AudienceMemberIn, AudienceUploaded
from tidings.api.streaming import chunks, lines
from tidings.api.upload_slots import UploadSlots
from tidings.client.uploads import Upload, UploadStaging
from tidings.domain.errors import InvalidLine

if TYPE_CHECKING:
    from tidings.api.settings import ApiSettings

PATH = "/v1/audiences"
MEDIA_TYPE = "application/x-ndjson"
# Generous for one recipient and its variables; it bounds what one
# unfinished line can make the server hold.
MAX_LINE_BYTES = 64 * 1024
# What one batch of lines may weigh before it is written, so a batch of
# long lines stays a few MiB.
BATCH_BYTES = 4 * 1024 * 1024

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


@router.post(
    "",
    status_code=201,
    responses=responses(*WITH_BODY, 408, 409, 415),
    openapi_extra={"requestBody": REQUEST_BODY},
    summary="Upload an audience (NDJSON, streamed) for one bulk job",
)
async def post_audience(request: Request, caller: Sender) -> AudienceUploaded:
    # Asynchronous on purpose: while the client is sending, the request
    # holds neither a worker thread nor a database connection. Each batch
    # of lines is then validated and written by a thread in a short
    # transaction of its own.
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != MEDIA_TYPE:
        raise UnsupportedMediaType(f"send the audience as {MEDIA_TYPE}, one recipient per line")
    config: ApiSettings = request.app.state.api_settings
    slots: UploadSlots = request.app.state.upload_slots
    with slots.hold(caller.tenant):
        body = chunks(request, config.upload_idle_seconds, config.upload_deadline_seconds)
        upload = await _stage(caller, lines(body, MAX_LINE_BYTES))
    return AudienceUploaded(
        id=upload.id, size=upload.size, version=upload.version, expires_at=upload.expires_at
    )


async def _stage(caller: Caller, body: AsyncIterator[tuple[int, bytes]]) -> Upload:
    staging = await run_in_threadpool(caller.tidings.begin_upload, actor=caller.actor)
    try:
        async for batch in _batches(body):
            await run_in_threadpool(_write, staging, batch)
        return await run_in_threadpool(staging.finish)
    except BaseException:
        # Whatever stopped it (a bad line, a timeout, the client gone), the
        # chunks committed so far go; shielded, as a cancelled request
        # must clean up too.
        with anyio.CancelScope(shield=True):
            await run_in_threadpool(staging.discard)
        raise


async def _batches(
    body: AsyncIterator[tuple[int, bytes]],
) -> AsyncIterator[list[tuple[int, bytes]]]:
    batch: list[tuple[int, bytes]] = []
    size = 0
    async for number, line in body:
        if line.strip():
            batch.append((number, line))
            size += len(line)
        if len(batch) >= UploadStaging.BATCH_ROWS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _write(staging: UploadStaging, batch: list[tuple[int, bytes]]) -> None:
    staging.add((number, _member(number, line)) for number, line in batch)


def _member(number: int, line: bytes) -> dict[str, Any]:
    try:
        item = AudienceMemberIn.model_validate_json(line)
    except ValidationError as exc:
        # Only pydantic's message and location: its `input` may hold a
        # destination, so it is never echoed.
        first = exc.errors(include_url=False, include_input=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "line"
        raise InvalidLine(number, field, first["msg"]) from None
    return item.model_dump(exclude_none=True)
