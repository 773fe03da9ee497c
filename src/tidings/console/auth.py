"""Who may read the console: a signed-in session, or an API key in a header.

A browser signs in once with a key (the login form, a POST, so the key
never appears in a URL or an access log) and then carries only a random
session id (`store.console_sessions`): the key itself never sits in a
cookie. Scripts may instead send the key as `Authorization: Bearer` or as
the password of Basic auth. A key in the query string is never accepted.
A session ends at sign-out, after its lifetime, or when its key is revoked
or expires.

A key belongs to one tenant: the console shows that tenant. `?tenant=`
may name it, never another one. Every page spends the tenant's API rate,
and keys and sessions that do not authenticate spend their address's
budget before the database is read, as on the API (domain/auth_failures.py).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from fastapi import Request

from tidings.domain.auth_failures import AuthFailures, Presented, presented
from tidings.runtime import Runtime
from tidings.store import api_keys, console_sessions
from tidings.store.api_keys import Principal, Refusal
from tidings.store.database import Database

COOKIE = "tidings_console_session"
READ_SCOPES = frozenset({"read", "admin"})
REFUSALS = {
    Refusal.UNKNOWN: "That API key is unknown.",
    Refusal.REVOKED: "That API key was revoked.",
    Refusal.EXPIRED: "That API key has expired.",
}


class TenantRate(Protocol):
    """The API's per-tenant rate (api/rate_limit.py), which the console,
    a layer below the API, names by what it does."""

    def wait(self, db: Database, tenant: str, now: datetime) -> int | None: ...


@dataclass(frozen=True)
class Viewer:
    principal: Principal

    @property
    def tenant(self) -> str:
        return self.principal.tenant_id


class Denied(Exception):
    """No usable key (401: show the login form), the wrong one (403), or
    too many requests (429, with the seconds to wait)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


def header_key(request: Request) -> str | None:
    """The key a script sent in a header (Bearer, or Basic's password)."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if scheme.lower() == "basic":
        user, _, password = _basic(value)
        return password or user or None
    return None


def check_key(runtime: Runtime, key: str | None, attempt: Presented) -> Principal:
    if not key:
        raise Denied(401, "Sign in with an API key that has the read scope.")
    _within_failures(attempt)
    found: Principal | Refusal = Refusal.UNKNOWN  # not shaped like a key: nothing to read
    if attempt.key_id is not None:
        with runtime.db.statements() as conn:  # one read
            found = api_keys.check(conn, key, attempt.now, runtime.vault)
    if isinstance(found, Refusal):
        attempt.failed()
        raise Denied(401, REFUSALS[found])
    return _reader(found)


def check_session(runtime: Runtime, session_id: str | None, attempt: Presented) -> Principal:
    if not session_id:
        raise Denied(401, "Sign in with an API key that has the read scope.")
    _within_failures(attempt)
    with runtime.db.statements() as conn:  # one read
        found = console_sessions.principal(conn, session_id, attempt.now)
    if found is None:
        attempt.failed()  # a guessed session id is a guessed key
        raise Denied(401, "Your session has ended; sign in again.")
    return _reader(found)


def _within_failures(attempt: Presented) -> None:
    wait = attempt.retry_after()
    if wait is not None:
        message = f"Too many sign-ins from here did not work; try again in {wait} s."
        raise Denied(429, message, retry_after=wait)


def within_rate(request: Request, runtime: Runtime, principal: Principal) -> None:
    """The console spends its tenant's API rate, as the API does: a page is
    several reads, and it must not be a way around the limit."""
    limit: TenantRate | None = getattr(request.app.state, "rate_limit", None)
    wait = (
        None if limit is None else limit.wait(runtime.db, principal.tenant_id, runtime.clock.now())
    )
    if wait is not None:
        message = f"This tenant is over its request rate; try again in {wait} s."
        raise Denied(429, message, retry_after=wait)


def _reader(principal: Principal) -> Principal:
    if not principal.scopes & READ_SCOPES:
        raise Denied(403, "That API key lacks the read scope.")
    return principal


def presented_key(request: Request, runtime: Runtime, key: str | None) -> Presented:
    """The gate is the API app's, where the console is mounted in it."""
    gate: AuthFailures | None = getattr(request.app.state, "auth_failures", None)
    host = request.client.host if request.client else None
    key_id = api_keys.key_id_of(key) if key else None
    return presented(gate, host, key_id, runtime.clock.now())


def viewer(request: Request, runtime: Runtime) -> Viewer:
    key = header_key(request)
    attempt = presented_key(request, runtime, key)
    if key is not None:
        principal = check_key(runtime, key, attempt)
    else:
        principal = check_session(runtime, request.cookies.get(COOKIE), attempt)
    within_rate(request, runtime, principal)
    wanted = request.query_params.get("tenant")
    if wanted and wanted != principal.tenant_id:
        raise Denied(403, f"This key belongs to tenant {principal.tenant_id!r}, not {wanted!r}.")
    return Viewer(principal)


def _basic(value: str) -> tuple[str, str, str]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return "", "", ""
    return decoded.partition(":")
