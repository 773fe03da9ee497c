"""What the provider layer raises, as opposed to the outcomes it returns.

::

    ProviderError               root of this layer
    ├── InvalidSignature        webhook unsigned, badly signed or stale
    ├── ProviderConfigError     misconfigured, or asked for what it cannot do
    ├── ProviderUnavailable     a lookup could not get an answer; this is NOT
    │                           "no such message" (that is a None result)
    └── AttachmentTooLarge      refused before any request
"""

from __future__ import annotations


class ProviderError(Exception):
    """Root of the provider layer; carries the HTTP status and body when known."""

    def __init__(self, message: str, *, status_code: int | None = None, body: str | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class InvalidSignature(ProviderError):
    pass


class ProviderConfigError(ProviderError):
    pass


class ProviderUnavailable(ProviderError):
    pass


class AttachmentTooLarge(ProviderError):
    """An attachment past TIDINGS_MAX_ATTACHMENT_BYTES: raised before any
    request, so certainly not sent, and no retry will make it smaller."""
