"""Uploaded audiences: `POST /v1/audiences`, an NDJSON or CSV body streamed in.

One recipient per line (NDJSON), with the fields of an inline job audience
member, or per row after a header row (CSV, `api/csv_audience.py`). The
body is never held whole: lines are validated in batches as they arrive
and each batch is staged in a short transaction of its own, so no
connection waits on a slow client; a bad line (422, naming it), a client
too slow (408, `api/streaming.py`) or gone discards what was staged. NDJSON
is refused at its first bad line; CSV goes on reading to list every bad
row, up to `MAX_CSV_ERRORS`, staging nothing more. One tenant may run only
a few uploads at once per process (429, `api/upload_slots.py`). A job then
freezes the upload by id (`POST /v1/jobs` with `audience_upload`). Its
size limit is its own (`ApiSettings.max_upload_bytes`,
`TIDINGS_MAX_UPLOAD_BYTES`), not the small one for JSON bodies.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from tidings.api import csv_audience
from tidings.api.auth import Caller, Sender
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.problems import UnsupportedMediaType
from tidings.api.schemas.jobs import AudienceMemberIn, AudienceUploaded
from tidings.api.streaming import chunks, lines
from tidings.api.upload_slots import UploadSlots
from tidings.client.uploads import Upload, UploadStaging
from tidings.domain.errors import InvalidLine, InvalidLines

if TYPE_CHECKING:
    from tidings.api.settings import ApiSettings

PATH = "/v1/audiences"
MEDIA_TYPE = "application/x-ndjson"
# Generous for one recipient and its variables; it bounds what one
# unfinished line can make the server hold.
MAX_LINE_BYTES = 64 * 1024
# The bad rows one CSV answer lists: enough to fix a spreadsheet in one
# pass, few enough that a file of nothing else is refused early.
MAX_CSV_ERRORS = 100
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
        "are skipped. Or CSV (`text/csv` or `application/csv`, UTF-8) with a header row: "
        "columns `ref`, `phone` (or `phone number`), `email` (or `email address`), "
        "`timezone`, `locale`, `preferences`; every other column is a variable. Send it "
        "streamed (chunked) if you like: it is read as it arrives."
    ),
    "content": {
        MEDIA_TYPE: {
            "schema": {"type": "string"},
            "example": '{"ref": "reader-1", "email": "reader1@example.com"}\n'
            '{"ref": "reader-2", "phone": "+14155550123", "preferences": ["sms"]}\n',
        },
        "text/csv": {
            "schema": {"type": "string"},
            "example": "ref,email address,phone number,name\n"
            "reader-1,reader1@example.com,,Ada\n"
            'reader-2,,+14155550123,"Hopper, Grace"\n',
        },
    },
}


# What one source yields: a position (the line an item starts on), the item
# to parse on a worker thread, and its weight in bytes for batching.
Numbered = tuple[int, Any, int]
Parse = Callable[[int, Any], dict[str, Any]]


@router.post(
    "",
    status_code=201,
    responses=responses(*WITH_BODY, 408, 409, 415),
    openapi_extra={"requestBody": REQUEST_BODY},
    summary="Upload an audience (NDJSON or CSV, streamed) for one bulk job",
)
async def post_audience(request: Request, caller: Sender) -> AudienceUploaded:
    # Asynchronous on purpose: while the client is sending, the request
    # holds neither a worker thread nor a database connection. Each batch
    # of lines is then validated and written by a thread in a short
    # transaction of its own.
    is_csv = _is_csv(request.headers.get("content-type", ""))
    config: ApiSettings = request.app.state.api_settings
    slots: UploadSlots = request.app.state.upload_slots
    with slots.hold(caller.tenant):
        body = lines(
            chunks(request, config.upload_idle_seconds, config.upload_deadline_seconds),
            MAX_LINE_BYTES,
        )
        if is_csv:
            upload = await _stage(caller, _csv(body), _csv_member, Refusals(MAX_CSV_ERRORS))
        else:
            upload = await _stage(caller, _ndjson(body), _member, Refusals(1))
    return AudienceUploaded(
        id=upload.id, size=upload.size, version=upload.version, expires_at=upload.expires_at
    )


def _is_csv(content_type: str) -> bool:
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media == MEDIA_TYPE:
        return False
    if media not in csv_audience.MEDIA_TYPES:
        raise UnsupportedMediaType(
            f"send the audience as {MEDIA_TYPE}, one recipient per line, or as text/csv"
        )
    charset = re.search(r"charset\s*=\s*\"?([^\";\s]+)", params, re.IGNORECASE)
    if charset is not None and charset[1].lower() not in ("utf-8", "utf8"):
        raise UnsupportedMediaType("send CSV as UTF-8 (charset=utf-8)")
    return True


class Refusals:
    """The bad lines found so far. Once one is found nothing more is
    staged; at `bound` the upload is refused at once."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.found: list[InvalidLine] = []

    def add(self, exc: InvalidLine) -> None:
        self.found.extend(exc.errors if isinstance(exc, InvalidLines) else [exc])
        if len(self.found) >= self.bound:
            raise self.error()

    def error(self) -> InvalidLine:
        if self.bound == 1:
            return self.found[0]
        return InvalidLines(self.found[: self.bound])


async def _stage(
    caller: Caller, source: AsyncIterator[Numbered], parse: Parse, refusals: Refusals
) -> Upload:
    staging = await run_in_threadpool(caller.tidings.begin_upload, actor=caller.actor)
    try:
        try:
            async for batch in _batches(source):
                await run_in_threadpool(_write, staging, batch, parse, refusals)
        except InvalidLine as exc:
            # One that stops the reading (a line too long, a row that is not
            # CSV) is listed after those found before it.
            if not isinstance(exc, InvalidLines) and exc not in refusals.found:
                refusals.found.append(exc)
            raise refusals.error() from None
        if refusals.found:
            raise refusals.error()
        return await run_in_threadpool(staging.finish)
    except BaseException:
        # Whatever stopped it (a bad line, a timeout, the client gone), the
        # chunks committed so far go; shielded, as a cancelled request
        # must clean up too.
        with anyio.CancelScope(shield=True):
            await run_in_threadpool(staging.discard)
        raise


async def _ndjson(body: AsyncIterator[tuple[int, bytes]]) -> AsyncIterator[Numbered]:
    async for number, line in body:
        if line.strip():
            yield number, line, len(line)


async def _csv(body: AsyncIterator[tuple[int, bytes]]) -> AsyncIterator[Numbered]:
    head = None
    async for row in csv_audience.records(body):
        if head is None:
            head = csv_audience.header(row)
        else:
            yield row.line, (head, row), sum(len(cell) for cell in row.cells)


async def _batches(source: AsyncIterator[Numbered]) -> AsyncIterator[list[Numbered]]:
    batch: list[Numbered] = []
    size = 0
    async for item in source:
        batch.append(item)
        size += item[2]
        if len(batch) >= UploadStaging.BATCH_ROWS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _write(staging: UploadStaging, batch: list[Numbered], parse: Parse, refusals: Refusals) -> None:
    members = []
    for number, item, _ in batch:
        try:
            members.append((number, parse(number, item)))
        except InvalidLine as exc:
            refusals.add(exc)
    if not refusals.found:
        staging.add(members)


def _csv_member(_: int, item: tuple[csv_audience.Header, csv_audience.Row]) -> dict[str, Any]:
    return csv_audience.member(*item)


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
