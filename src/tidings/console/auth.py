"""Who may read the console: the API's own keys, as a browser can send them.

A browser cannot add `Authorization: Bearer` to a link, so besides that
header the console accepts Basic auth (the key as password, for curl and
scripts), a login form, and `?key=` (handy for the link `tidings up`
prints; it is moved into a cookie and stripped from the URL at once, but it
does reach the access log of that one request). The cookie is HttpOnly
and SameSite=Strict, and the console only ever reads, so a forged
cross-site request has nothing to do.

A key belongs to one tenant: the console shows that tenant. `?tenant=`
may name it, never another one.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from fastapi import Request

from tidings.client import Tidings
from tidings.store import api_keys
from tidings.store.api_keys import Principal

COOKIE = "tidings_console_key"
COOKIE_MAX_AGE = 12 * 3600
READ_SCOPES = frozenset({"read", "admin"})


@dataclass(frozen=True)
class Viewer:
    principal: Principal
    tidings: Tidings  # the engine scoped to the key's tenant

    @property
    def tenant(self) -> str:
        return self.principal.tenant_id


class Denied(Exception):
    """No usable key (401: show the login form) or the wrong one (403)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def presented_key(request: Request) -> str | None:
    """The key the request carries, wherever a browser or a script put it."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if scheme.lower() == "basic":
        user, _, password = _basic(value)
        return password or user or None
    return request.query_params.get("key") or request.cookies.get(COOKIE) or None


def check_key(root: Tidings, key: str | None) -> Principal:
    if not key:
        raise Denied(401, "Sign in with an API key that has the read scope.")
    with root.db.transaction() as conn:
        principal = api_keys.authenticate(conn, key)
    if principal is None:
        raise Denied(401, "That API key is unknown or revoked.")
    if not principal.scopes & READ_SCOPES:
        raise Denied(403, "That API key lacks the read scope.")
    return principal


def viewer(request: Request, root: Tidings) -> Viewer:
    principal = check_key(root, presented_key(request))
    wanted = request.query_params.get("tenant")
    if wanted and wanted != principal.tenant_id:
        raise Denied(403, f"This key belongs to tenant {principal.tenant_id!r}, not {wanted!r}.")
    return Viewer(principal, root.for_tenant(principal.tenant_id))


def _basic(value: str) -> tuple[str, str, str]:
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return "", "", ""
    return decoded.partition(":")
