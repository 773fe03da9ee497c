"""Cross-site request forgery checks for the console's forms (sign in, sign out).

Two independent checks, both required on every POST:
- double submit: each page sets a random token in an HttpOnly,
  SameSite=Strict cookie and puts the same token in its forms; a forged
  form on another site cannot read the cookie, so cannot match it;
- origin: a browser names the page that sent a POST in `Origin`; it must
  be this console (the configured public base URL, or the host the request
  was sent to). A request with no `Origin` (curl, old browsers) relies on
  the token alone.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from fastapi import Request

CSRF_COOKIE = "tidings_console_csrf"
FIELD = "csrf"
TOKEN_BYTES = 32
MAX_TOKEN_LENGTH = 100


def token_of(request: Request) -> str | None:
    """The token the browser already holds, if it looks like one of ours."""
    token = request.cookies.get(CSRF_COOKIE, "")
    if 20 <= len(token) <= MAX_TOKEN_LENGTH:
        return token
    return None


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def form_is_genuine(request: Request, submitted: str, public_base_url: str | None) -> bool:
    """True when a POST comes from one of our own pages."""
    held = token_of(request)
    if held is None or not submitted or len(submitted) > MAX_TOKEN_LENGTH:
        return False
    if not hmac.compare_digest(held.encode(), submitted.encode()):
        return False
    return origin_is_ours(request, public_base_url)


def origin_is_ours(request: Request, public_base_url: str | None) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True
    sent_from = urlsplit(origin)
    if public_base_url:
        ours = urlsplit(public_base_url)
        if (sent_from.scheme, sent_from.netloc) == (ours.scheme, ours.netloc):
            return True
    # No public URL, or reached directly: the host the browser sent this to.
    # A browser sets both headers itself; a page on another site cannot.
    host = request.headers.get("host", "")
    return bool(host) and sent_from.scheme in ("http", "https") and sent_from.netloc == host
