"""Every error an API client sees: `application/problem+json` (RFC 9457).

Each problem carries a stable `code` clients can branch on. Domain errors
(`tidings.domain.errors`) map by type; request validation, routing, size
and authentication errors get their own codes; anything else becomes a
bare 500 INTERNAL whose cause is only logged, never sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from tidings.domain.errors import (
    AlreadyLifted,
    AlreadyTerminal,
    Conflict,
    InvalidInput,
    InvalidLine,
    InvalidLines,
    MissingVariables,
    NotFound,
    RequestLimited,
    StaleTransition,
    TidingsError,
)
from tidings.domain.redaction import redact_text
from tidings.observability.process_metrics import record_request_refused
from tidings.platform.resolver import ResolverBusy, ResolveTimeout

log = logging.getLogger("tidings.api")
RETRY_AFTER_SECONDS = 1

MEDIA_TYPE = "application/problem+json"
# Where a route that checks the key itself leaves it to be checked, should
# the body fail validation before the route runs (api/auth.py, `Admission`).
PENDING_ADMISSION = "pending_admission"


class FieldProblem(BaseModel):
    field: str = Field(description="The field at fault, as a dotted path (recipient.phone)")
    message: str = Field(description="What is wrong with it")
    line: int | None = Field(
        default=None,
        description="The line of a streamed body the problem is at (a CSV upload's row starts"
        " there), from 1; null otherwise",
    )
    code: str | None = Field(
        default=None,
        description="A stable code for the problem, where there is one; null otherwise",
    )
    severity: str | None = Field(
        default=None, description="error or warning, for a template's problems; null otherwise"
    )


class Problem(BaseModel):
    """An error answer. Extra members (`field`, `state`, ...) depend on `code`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="A URI naming the problem kind (urn:tidings:problem:...)")
    title: str = Field(description="The HTTP status's phrase")
    status: int = Field(description="The HTTP status code")
    detail: str = Field(description="What went wrong, in words; never a destination")
    code: str = Field(description="The stable code to branch on (INVALID_INPUT, NOT_FOUND, ...)")
    field: str | None = Field(
        default=None, description="The request field at fault; null when not one field"
    )
    line: int | None = Field(
        default=None,
        description="The streamed body's line at fault (an audience upload), from 1; null "
        "otherwise",
    )
    state: str | None = Field(
        default=None,
        description="For a conflict with a state (ALREADY_TERMINAL, ...): the current state; null"
        " otherwise",
    )
    errors: list[FieldProblem] | None = Field(
        default=None, description="Every field problem found, for invalid input; null otherwise"
    )
    missing: list[str] | None = Field(
        default=None,
        description="MISSING_VARIABLES: the template's required variables not given",
        examples=[["deadline"]],
    )
    scope: str | None = Field(
        default=None,
        description="REQUEST_LIMIT: the request bound that is full, `destination` or `prefix`",
        examples=["prefix"],
    )


class ApiError(Exception):
    """An error raised by the HTTP layer itself (auth, size, webhooks)."""

    status = 400
    code = "BAD_REQUEST"

    def __init__(self, detail: str, headers: Mapping[str, str] | None = None, **extra: Any):
        super().__init__(detail)
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra


class InvalidRequest(ApiError):
    """Invalid input found by the HTTP layer; same code as the domain's."""

    status, code = 422, "INVALID_INPUT"


class Unauthenticated(ApiError):
    """401. `code` is UNAUTHENTICATED, or KEY_REVOKED / KEY_EXPIRED for a key
    that was once valid (its holder may learn why it stopped working)."""

    status, code = 401, "UNAUTHENTICATED"

    def __init__(
        self, detail: str = "a valid API key is required", code: str = "UNAUTHENTICATED"
    ) -> None:
        super().__init__(detail, {"WWW-Authenticate": 'Bearer realm="tidings"'})
        self.code = code


class Forbidden(ApiError):
    status, code = 403, "FORBIDDEN"


class PayloadTooLarge(ApiError):
    status, code = 413, "PAYLOAD_TOO_LARGE"


class UnsupportedMediaType(ApiError):
    status, code = 415, "UNSUPPORTED_MEDIA_TYPE"


class InvalidWebhookSignature(ApiError):
    status, code = 401, "INVALID_SIGNATURE"


class InvalidWebhook(ApiError):
    status, code = 400, "INVALID_WEBHOOK"


class Unavailable(ApiError):
    status, code = 503, "UNAVAILABLE"


class RequestTimeout(ApiError):
    """408: the client sent its body too slowly; the connection is closed."""

    status, code = 408, "REQUEST_TIMEOUT"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, {"Connection": "close"})


class TooManyRequests(ApiError):
    """429, with `code` RATE_LIMITED or TOO_MANY_UPLOADS and a Retry-After."""

    status, code = 429, "RATE_LIMITED"

    def __init__(self, code: str, detail: str, retry_after: int) -> None:
        super().__init__(detail, {"Retry-After": str(retry_after)})
        self.code = code


def problem(
    status: int, code: str, detail: str, *, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    # Details can echo what a client sent; redacting them here means no
    # handler can leak a phone number or address back by accident.
    body = Problem(
        type=f"urn:tidings:problem:{code.lower().replace('_', '-')}",
        title=HTTPStatus(status).phrase,
        status=status,
        detail=redact_text(detail),
        code=code,
        **extra,
    )
    content = body.model_dump(exclude_none=True)
    return JSONResponse(content, status_code=status, headers=headers, media_type=MEDIA_TYPE)


def from_api_error(exc: ApiError) -> JSONResponse:
    return problem(exc.status, exc.code, exc.detail, headers=exc.headers, **exc.extra)


def from_domain_error(exc: TidingsError) -> JSONResponse:
    if isinstance(exc, InvalidLines):
        errors = [
            {"field": e.field, "message": redact_text(e.message), "line": e.line}
            for e in exc.errors
        ]
        return problem(422, exc.code, exc.message, field=exc.field, line=exc.line, errors=errors)
    if isinstance(exc, InvalidLine):
        return problem(422, exc.code, exc.message, field=exc.field, line=exc.line)
    if isinstance(exc, MissingVariables):
        return problem(422, exc.code, exc.message, field=exc.field, missing=list(exc.missing))
    if isinstance(exc, InvalidInput):
        return problem(422, exc.code, exc.message, field=exc.field)
    if isinstance(exc, ResolverBusy):
        retry = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        return problem(429, exc.code, str(exc), headers=retry, field=exc.field)
    if isinstance(exc, RequestLimited):
        # Refused at the edge, nothing created: the bound's window says when.
        record_request_refused(exc.event_class, exc.scope)
        retry = {"Retry-After": str(exc.retry_after)}
        return problem(429, exc.code, str(exc), headers=retry, scope=exc.scope)
    if isinstance(exc, ResolveTimeout):
        return problem(504, exc.code, str(exc), field=exc.field)
    if isinstance(exc, AlreadyTerminal):
        return problem(409, exc.code, str(exc), state=exc.state)
    if isinstance(exc, AlreadyLifted):
        when, who = exc.lifted_at.isoformat(), exc.lifted_by
        return problem(409, exc.code, str(exc), state=exc.state, lifted_at=when, lifted_by=who)
    if isinstance(exc, NotFound):
        # Every read is scoped to the caller's tenant, so another tenant's row
        # raises exactly what a missing one does: nothing tells them apart.
        return problem(404, exc.code, str(exc))
    if isinstance(exc, Conflict | StaleTransition):
        return problem(409, exc.code, str(exc))
    return problem(400, exc.code, str(exc))


def from_validation_error(exc: RequestValidationError) -> JSONResponse:
    # Only pydantic's message and location: its `input` may hold a
    # destination, so it is never echoed.
    errors = [FieldProblem(field=_field(e["loc"]), message=e["msg"]) for e in exc.errors()]
    first = errors[0] if errors else FieldProblem(field="body", message="invalid request")
    types = {e["type"] for e in exc.errors()}
    # A time out of range has its own stable code, as from the domain parsers.
    code = "DATE_OUT_OF_RANGE" if types == {"date_out_of_range"} else "INVALID_INPUT"
    return problem(
        422,
        code,
        f"{first.field}: {first.message}",
        field=first.field,
        errors=[e.model_dump(exclude_none=True) for e in errors],
    )


def from_http_error(exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 400:
        # FastAPI's answer to a body it cannot even decode (bad UTF-8): the
        # same invalid input as malformed JSON, which it reports as 422.
        return problem(422, "INVALID_INPUT", "body: could not be decoded", field="body")
    codes = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}
    code = codes.get(exc.status_code, f"HTTP_{exc.status_code}")
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    return problem(exc.status_code, code, detail, headers=exc.headers)


def database_unavailable() -> JSONResponse:
    # Down, restarting, out of connections, or a transaction the server
    # rolled back (deadlock, serialization): nothing was done, so the same
    # request may be sent again.
    return problem(
        503,
        "UNAVAILABLE",
        "the database is unavailable; retry shortly",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def from_data_error(request: Request, exc: Exception) -> JSONResponse:
    """A value the driver refused to send: the client's text held a NUL.

    The schemas refuse NUL in every field they know; this is the net for a
    path or query value that reached a query unchecked. Any other DataError
    (a stored value Python cannot read) is the server's, and stays a 500.
    """
    if "NUL (0x00)" in str(exc):
        return problem(422, "INVALID_INPUT", "text must not contain NUL characters")
    log.error("data error on %s %s", request.method, request.url.path, exc_info=exc)
    return internal_error()


def internal_error() -> JSONResponse:
    return problem(500, "INTERNAL", "an unexpected error occurred; it has been logged")


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


async def _answer(request: Request, exc: Exception) -> Response:
    """What the app's handler for `exc` answers, as if it had been raised by
    the route; an exception no handler claims goes on up (500 INTERNAL)."""
    handlers = request.app.exception_handlers
    for kind in type(exc).__mro__:
        if kind in handlers:
            answer: Response = await handlers[kind](request, exc)
            return answer
    raise exc


def install(app: FastAPI) -> None:
    """Register the handlers that turn each kind of error into a problem."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return from_api_error(exc)

    async def domain_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, TidingsError)
        return from_domain_error(exc)

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        pending = getattr(request.state, PENDING_ADMISSION, None)
        if pending is not None:  # the key first: 401, 403 or 429 before any 422
            try:
                await pending.check()
            except Exception as refused:
                return await _answer(request, refused)
        return from_validation_error(exc)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return from_http_error(exc)

    async def database_error(_: Request, exc: Exception) -> JSONResponse:
        log.warning("database unavailable: %s", type(exc).__name__)
        return database_unavailable()

    async def data_error(request: Request, exc: Exception) -> JSONResponse:
        return from_data_error(request, exc)

    app.add_exception_handler(psycopg.DataError, data_error)
    app.add_exception_handler(psycopg.OperationalError, database_error)
    app.add_exception_handler(psycopg.InterfaceError, database_error)
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(TidingsError, domain_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
