"""What the HTTP server is told at start (`tidings serve` reads it from Settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tidings.platform.settings import Settings


@dataclass(frozen=True)
class ApiSettings:
    max_body_bytes: int = 256 * 1024
    # Uploaded audiences are streamed, never buffered, so they get their own
    # much larger limit (TIDINGS_MAX_UPLOAD_BYTES).
    max_upload_bytes: int = 1024**3
    # Set when a proxy sits in front (TIDINGS_PUBLIC_BASE_URL): webhook
    # signatures cover the public URL; https:// makes console cookies Secure.
    public_base_url: str | None = None
    # Whose opt-outs inbound STOPs are (TIDINGS_INBOUND_TENANT); unset, the
    # server's own tenant. Never from the request.
    inbound_tenant: str | None = None
    # account -> tenant -> the number it sends from (TIDINGS_SENDER_NUMBERS):
    # an inbound message is for the tenants sending from the number it was
    # sent to (domain/senders.py).
    sender_numbers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Slow uploads and request floods (issue #20): see config.Settings.
    upload_idle_seconds: float = 30.0
    upload_deadline_seconds: float = 900.0
    uploads_per_tenant: int = 2
    api_rate_per_second: float = 1000.0
    api_rate_burst: int = 2000
    # Failed authentications per client address and per key id, in process,
    # checked before any database read (domain/auth_failures.py); 0: off.
    auth_failure_rate_per_second: float = 1.0
    auth_failure_burst: int = 20

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiSettings:
        return cls(
            inbound_tenant=settings.inbound_tenant,
            sender_numbers=settings.sender_numbers,
            upload_idle_seconds=settings.upload_idle_seconds,
            upload_deadline_seconds=settings.upload_deadline_seconds,
            uploads_per_tenant=settings.uploads_per_tenant,
            api_rate_per_second=settings.api_rate_per_second,
            api_rate_burst=settings.api_rate_burst,
            auth_failure_rate_per_second=settings.auth_failure_rate_per_second,
            auth_failure_burst=settings.auth_failure_burst,
            max_upload_bytes=settings.max_upload_bytes,
            public_base_url=settings.public_base_url,
        )
