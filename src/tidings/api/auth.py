"""API keys on HTTP: `Authorization: Bearer <key>`, checked against scopes.

A key belongs to one tenant, and every handler works on a view of the
engine for that tenant only (`Tidings.for_tenant`), so no handler can name
another tenant's rows. Scopes: `send` (create, cancel), `read` (reads and
events, suppressions), `admin` (templates, policies, controls, lifting a
suppression), `webhook` (reserved for
webhook management; provider webhooks authenticate by signature instead).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import psycopg
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tidings.api.problems import PENDING_ADMISSION, Forbidden, TooManyRequests, Unauthenticated
from tidings.api.rate_limit import TenantRateLimit
from tidings.client import Tidings
from tidings.client.serving import Principal, Refusal
from tidings.domain.auth_failures import AuthFailures, presented

Conn = psycopg.Connection[Any]

REFUSALS = {
    Refusal.UNKNOWN: "the API key is unknown",
    Refusal.REVOKED: "the API key was revoked",
    Refusal.EXPIRED: "the API key has expired",
}

bearer = HTTPBearer(auto_error=False, description="An API key: `tdg_<key id>_<secret>`")


@dataclass(frozen=True)
class Caller:
    """An authenticated request: who, and the engine scoped to its tenant."""

    principal: Principal
    tidings: Tidings

    @property
    def tenant(self) -> str:
        return self.principal.tenant_id

    @property
    def actor(self) -> str:
        return self.principal.actor


async def engine(request: Request) -> Tidings:
    """The engine the app was built with (all tenants; never for tenant data).
    Async, as it does no I/O: a sync dependency costs a hop to the thread pool."""
    root: Tidings = request.app.state.tidings
    return root


def authenticate(
    request: Request,
    root: Tidings,
    credentials: HTTPAuthorizationCredentials | None,
    conn: Conn | None = None,
) -> Principal:
    """The key's principal, or 401. A key that does not authenticate spends
    its address's and key id's budget, and an address or key id without
    budget answers 429 before the database is read (domain/auth_failures.py)."""
    if credentials is None:
        raise Unauthenticated()
    key = credentials.credentials
    gate: AuthFailures | None = getattr(request.app.state, "auth_failures", None)
    host = request.client.host if request.client else None
    attempt = presented(gate, host, root.api_key_id(key), root.now())
    wait = attempt.retry_after()
    if wait is not None:
        raise too_many_failures(wait)
    found: Principal | Refusal = Refusal.UNKNOWN  # malformed: nothing to read
    if attempt.key_id is not None:  # one read: on `conn`, or in autocommit
        found = root.check_api_key(key, now=attempt.now, conn=conn)
    if isinstance(found, Refusal):
        attempt.failed()
        raise Unauthenticated(REFUSALS[found], code=found.value)
    return found


def too_many_failures(retry_after: int) -> TooManyRequests:
    return TooManyRequests(
        "RATE_LIMITED",
        "too many requests from this address or for this key id did not authenticate;"
        f" retry in {retry_after} s",
        retry_after,
    )


def within_rate(request: Request, view: Tidings, conn: Conn | None = None) -> None:
    """Admit the tenant `view` acts for by its request rate, or raise 429.

    The rate is per tenant and shared by every API process (api/rate_limit.py),
    so one tenant's flood cannot take another's share of the database. Called
    from `require`'s dependency rather than being one: a dependency of its
    own would cost every request another hop to the thread pool.
    """
    limit: TenantRateLimit | None = getattr(request.app.state, "rate_limit", None)
    if limit is not None:
        limit.admit(view, view.now(), conn)


def admit(
    request: Request,
    root: Tidings,
    credentials: HTTPAuthorizationCredentials | None,
    scope: str,
    conn: Conn | None = None,
) -> Caller:
    """The caller, if its key is live, within its tenant's rate and has
    `scope`; 401, 403 or 429 otherwise. On `conn` when given."""
    principal = authenticate(request, root, credentials, conn)
    view = root.for_tenant(principal.tenant_id)
    within_rate(request, view, conn)
    if not principal.allows(scope):
        raise Forbidden(f"this API key lacks the {scope!r} scope")
    return Caller(principal, view)


def require(scope: str) -> Callable[..., Awaitable[Caller]]:
    """A dependency admitting keys with `scope` within the tenant's rate,
    answering 401, 403 or 429 otherwise."""

    async def dependency(
        request: Request,
        root: Annotated[Tidings, Depends(engine)],
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Caller:
        # The key check, the rate and the scope in one hop to the thread pool
        # (each sync dependency would cost one); it still runs before the
        # body is validated, so a caller without a key learns nothing of it.
        return await run_in_threadpool(admit, request, root, credentials, scope)

    return dependency


@dataclass(frozen=True)
class Admission:
    """A request whose key is yet to be checked, by the route itself.

    `require` costs a hop to the thread pool of its own and a pooled
    connection of its own. For `POST /v1/intents` the route instead checks
    the key on the connection and in the hop it creates in (`admit`): one
    hop and one checkout a request (docs/benchmarks.md, "The HTTP path,
    profiled"). A body that fails validation never reaches the route, so
    the key is then checked by the validation error's handler (`check`,
    api/problems.py) before it answers: a caller without a valid key, scope
    or rate gets 401, 403 or 429 exactly as through `require`, never 422.
    """

    request: Request
    root: Tidings
    credentials: HTTPAuthorizationCredentials
    scope: str

    def admit(self, conn: Conn) -> Caller:
        return admit(self.request, self.root, self.credentials, self.scope, conn)

    async def check(self) -> None:
        await run_in_threadpool(admit, self.request, self.root, self.credentials, self.scope)


def admission(scope: str) -> Callable[..., Awaitable[Admission]]:
    """A dependency for a route that checks the key itself (`Admission`)."""

    async def dependency(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Admission:
        if credentials is None:  # no key at all: refused here, as by `require`
            raise Unauthenticated()
        pending = Admission(request, request.app.state.tidings, credentials, scope)
        setattr(request.state, PENDING_ADMISSION, pending)
        return pending

    return dependency


Sender = Annotated[Caller, Depends(require("send"))]
SenderToAdmit = Annotated[Admission, Depends(admission("send"))]
Reader = Annotated[Caller, Depends(require("read"))]
Admin = Annotated[Caller, Depends(require("admin"))]
