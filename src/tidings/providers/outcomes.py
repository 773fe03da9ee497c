"""What a provider says about a message: send results and observations.

Send outcomes (`SendResult`)::

    Accepted       the provider took it; here is its message id
    Retryable      the provider certainly did NOT process it (429, refused)
    Rejected       permanent; never retry this message as is
    Indeterminate  it may have reached the provider: reconcile by lookup
                   (status / find_by_key) before any new attempt

An `Observation` is one status report (webhook or lookup), normalized to
`ObservedStatus` and `RejectCode`, its raw payload redacted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from tidings.domain.redaction import redact_value

PROVIDER_CODE_CHARS = 64


class ObservedStatus(StrEnum):
    accepted = "accepted"  # queued, sending or sent at the provider
    delivered = "delivered"
    undelivered = "undelivered"  # non-delivery that a resend may fix
    failed = "failed"  # permanent
    unknown = "unknown"


class RejectCode(StrEnum):
    INVALID_DESTINATION = "INVALID_DESTINATION"
    OPTED_OUT = "OPTED_OUT"
    NOT_SMS_CAPABLE = "NOT_SMS_CAPABLE"
    UNREACHABLE = "UNREACHABLE"
    CARRIER_FILTERED = "CARRIER_FILTERED"
    BOUNCED = "BOUNCED"
    COMPLAINT = "COMPLAINT"
    CONTENT_REJECTED = "CONTENT_REJECTED"
    # Facts about our side, never about the recipient: they fail the
    # intent and alert, and never suppress (domain/feedback.py).
    REQUEST_INVALID = "REQUEST_INVALID"  # the request itself (empty body, bad parameter)
    SENDER_REJECTED = "SENDER_REJECTED"  # the From / sender id / origination number
    ACCOUNT_RESTRICTED = "ACCOUNT_RESTRICTED"  # sandbox, whitelist, blocked country
    ATTACHMENT_TOO_LARGE = "ATTACHMENT_TOO_LARGE"
    AUTH_FAILED = "AUTH_FAILED"
    RATE_LIMITED = "RATE_LIMITED"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    TIMEOUT = "TIMEOUT"
    NOT_FOUND = "NOT_FOUND"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Accepted:
    provider_message_id: str
    status: ObservedStatus = ObservedStatus.accepted
    raw_status: str = ""


@dataclass(frozen=True)
class Retryable:
    code: RejectCode
    retry_after_seconds: float | None = None
    detail: str = ""
    http_status: int | None = None
    # The provider's answer, redacted and bounded (providers/response_body.py).
    response_body: str | None = None


@dataclass(frozen=True)
class Rejected:
    code: RejectCode
    detail: str = ""
    http_status: int | None = None
    # The provider's answer, redacted and bounded (providers/response_body.py).
    response_body: str | None = None
    # The provider's own error code (Twilio 21606, Vonage status 29, an AWS
    # error name), bounded: what an operator looks up in its docs.
    provider_code: str | None = None

    def __post_init__(self) -> None:
        if self.provider_code is not None:
            object.__setattr__(self, "provider_code", str(self.provider_code)[:PROVIDER_CODE_CHARS])


@dataclass(frozen=True)
class Indeterminate:
    code: RejectCode
    detail: str = ""
    http_status: int | None = None
    # The provider's answer, redacted and bounded (providers/response_body.py).
    response_body: str | None = None


SendResult = Accepted | Retryable | Rejected | Indeterminate


@dataclass(frozen=True)
class Observation:
    provider: str
    provider_message_id: str | None
    attempt_key: str | None
    status: ObservedStatus
    code: str | None
    raw_status: str
    occurred_at: datetime | None
    dedupe_key: str
    raw: Mapping[str, Any] = field(default_factory=dict, hash=False)
    raw_code: str | None = None
    # When the provider took the message: what a list search matches on.
    created_at: datetime | None = None

    def __post_init__(self) -> None:
        for moment in (self.occurred_at, self.created_at):
            if moment is not None and moment.utcoffset() is None:
                raise ValueError("an Observation's times must be timezone-aware")
        # Redacting here, not in each adapter, means no adapter can forget.
        object.__setattr__(self, "raw", redact_value(dict(self.raw)))
