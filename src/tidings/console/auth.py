"""Who may read the console: a signed-in session, or an API key in a header.

A browser signs in once with a key (the login form, a POST, so the key
never appears in a URL or an access log) and then carries only a random
session id (`store.console_sessions`): the key itself never sits in a
cookie. Scripts may instead send the key as `Authorization: Bearer` or as
the password of Basic auth. A key in the query string is never accepted.
A session ends at sign-out, after its lifetime, or when its key is revoked
or expires.

A key belongs to one tenant: the console shows that tenant. `?tenant=`
may name it, never another one.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from fastapi import Request

from tidings.runtime import Runtime
from tidings.store import api_keys, console_sessions
from tidings.store.api_keys import Principal, Refusal

COOKIE = "tidings_console_session"
READ_SCOPES = frozenset({"read", "admin"})
REFUSALS = {
    Refusal.UNKNOWN: "That API key is unknown.",
    Refusal.REVOKED: "That API key was revoked.",
    Refusal.EXPIRED: "That API key has expired.",
}


@dataclass(frozen=True)
class Viewer:
    principal: Principal

    @property
    def tenant(self) -> str:
        return self.principal.tenant_id


class Denied(Exception):
    """No usable key (401: show the login form) or the wrong one (403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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


def check_key(runtime: Runtime, key: str | None) -> Principal:
    if not key:
        raise Denied(401, "Sign in with an API key that has the read scope.")
    with runtime.db.statements() as conn:  # one read
        found = api_keys.check(conn, key, runtime.clock.now())
    if isinstance(found, Refusal):
        raise Denied(401, REFUSALS[found])
    return _reader(found)


def check_session(runtime: Runtime, session_id: str | None) -> Principal:
    if not session_id:
        raise Denied(401, "Sign in with an API key that has the read scope.")
    with runtime.db.statements() as conn:  # one read
        found = console_sessions.principal(conn, session_id, runtime.clock.now())
    if found is None:
        raise Denied(401, "Your session has ended; sign in again.")
    return _reader(found)


def _reader(principal: Principal) -> Principal:
    if not principal.scopes & READ_SCOPES:
        raise Denied(403, "That API key lacks the read scope.")
    return principal


def viewer(request: Request, runtime: Runtime) -> Viewer:
    key = header_key(request)
    if key is not None:
        principal = check_key(runtime, key)
    else:
        principal = check_session(runtime, request.cookies.get(COOKIE))
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
