"""A provider's back-off signal: its Retry-After, read against its own clock.

Shared by every HTTP adapter (`base.HttpProviderAdapter` reads a 429's)
and by the adapters whose providers say "back off" in their own way
(Twilio's error 20429, SendGrid's `X-RateLimit-Reset`).
"""

from __future__ import annotations

import email.utils
import time

import httpx


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent/bad."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def response_retry_after(response: httpx.Response) -> float | None:
    """A response's Retry-After in seconds. An HTTP date is read against the
    response's own `Date` (the provider's clock on both sides), so a host
    whose clock is off neither retries early nor waits too long."""
    return parse_retry_after(response.headers.get("retry-after"), now=provider_time(response))


def provider_time(response: httpx.Response) -> float | None:
    """The provider's clock when it answered (its `Date` header), if given."""
    try:
        return email.utils.parsedate_to_datetime(response.headers["date"]).timestamp()
    except (KeyError, TypeError, ValueError):
        return None
