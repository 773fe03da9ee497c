"""What the AWS adapters (End User Messaging SMS, SNS, SES) share: one boto3 call per send.

The boto3 client is built with botocore's own retries OFF. botocore would
retry a read timeout or a connection reset on SendTextMessage, Publish or
SendEmail, none of which takes an idempotency key, so its retry could be a
second message. Retries belong to the engine, which knows what an
Indeterminate outcome means.

botocore's errors map onto outcomes the way httpx's do for HTTP adapters:
``botocore.exceptions.ConnectionError`` (DNS, refused, connect timeout, TLS
handshake) means the request never left (Retryable); ``HTTPClientError``
(read timeout, connection closed mid-response) means it may have been acted
on (Indeterminate: TIMEOUT for the read timeout, PROVIDER_ERROR otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from tidings.domain.redaction import redact_text
from tidings.providers.base import DEFAULT_TIMEOUT, ProviderAdapter
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import AttachmentLoader
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.providers.settings import optional, required

THROTTLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "Throttled",  # SNS's wire code for ThrottledException
        "KMSThrottling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "SlowDown",
    }
)
SERVER_CODES = frozenset(
    {
        "InternalServerException",
        "InternalErrorException",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
    }
)
AUTH_CODES = frozenset(
    {
        "AccessDeniedException",
        "AccessDenied",
        "AuthorizationErrorException",
        "AuthorizationError",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredTokenException",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
    }
)


def boto_client(service: str, settings: Mapping[str, Any], provider: str, timeout: float) -> Any:
    """A client for `service` from a settings mapping; credentials default to boto3's chain."""
    session = boto3.session.Session(
        aws_access_key_id=optional(settings, "access_key_id"),
        aws_secret_access_key=optional(settings, "secret_access_key"),
        aws_session_token=optional(settings, "session_token"),
        region_name=required(settings, "region", provider),
    )
    config = Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    endpoint = optional(settings, "endpoint_url") or optional(settings, "base_url")
    return session.client(service, config=config, endpoint_url=endpoint)


class AwsAdapter(ProviderAdapter):
    """A ProviderAdapter whose one network call is a boto3 operation."""

    operation: ClassVar[str]  # the client method, e.g. "send_text_message"
    not_sent_errors: ClassVar[tuple[type[BaseException], ...]] = (
        BotoConnectionError,
        ConnectionRefusedError,
    )
    maybe_sent_errors: ClassVar[tuple[type[BaseException], ...]] = (HTTPClientError, OSError)
    # botocore's read timeout: sent, the answer late (TIMEOUT, as httpx's
    # ReadTimeout is). Its connect timeout is a ConnectionError: not sent.
    timeout_errors: ClassVar[tuple[type[BaseException], ...]] = (ReadTimeoutError, TimeoutError)

    def __init__(
        self,
        client: Any,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        attachment_loader: AttachmentLoader | None = None,
    ):
        super().__init__(timeout=timeout, attachment_loader=attachment_loader)
        self._client = client

    def __repr__(self) -> str:
        return f"{type(self).__name__}(region={self._client.meta.region_name!r})"

    def transmit(self, request: Mapping[str, Any]) -> Any:
        return self.call(self.operation, request)

    def call(self, operation: str, request: Mapping[str, Any]) -> Any:
        """One boto3 call; service errors come back as values, transport errors raise."""
        try:
            return getattr(self._client, operation)(**request)
        except (ClientError, ParamValidationError) as exc:
            return exc
        except (NoCredentialsError, PartialCredentialsError, NoRegionError) as exc:
            raise ProviderConfigError(f"{self.name}: {exc}") from exc

    def parse_response(self, response: Any) -> SendResult:
        if isinstance(response, ClientError):
            return self.parse_error(response)
        if isinstance(response, ParamValidationError):
            # botocore refused it before sending: the same request would fail again.
            return Rejected(RejectCode.UNKNOWN, f"invalid request: {redact_text(str(response))}")
        try:
            return self.parse_accepted(response)
        except (KeyError, TypeError):
            return Indeterminate(RejectCode.PROVIDER_ERROR, "unreadable success response")

    def parse_accepted(self, response: Mapping[str, Any]) -> Accepted:
        return Accepted(str(response["MessageId"]))

    def parse_error(self, exc: ClientError) -> SendResult:
        code, reason, http, detail = error_parts(exc)
        if code in THROTTLE_CODES:
            # AWS promises no retry time: None lets the engine's backoff decide.
            return Retryable(RejectCode.RATE_LIMITED, None, detail, http)
        if code in SERVER_CODES or (http or 0) >= 500:
            return Indeterminate(RejectCode.PROVIDER_ERROR, detail, http)
        if code in AUTH_CODES:
            return Rejected(RejectCode.AUTH_FAILED, detail, http)
        mapped = self.map_code(reason) if reason else RejectCode.UNKNOWN
        if mapped is RejectCode.UNKNOWN:
            mapped = self.map_code(code)
        return Rejected(mapped, detail, http, provider_code=reason or code)


def error_parts(exc: ClientError) -> tuple[str, str | None, int | None, str]:
    """(error code, modeled Reason if any, HTTP status, redacted detail) of a ClientError."""
    response: Mapping[str, Any] = exc.response
    error = response.get("Error", {})
    code = str(error.get("Code", ""))
    reason = response.get("Reason") or error.get("Reason")
    http = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    detail = redact_text(f"{code}: {error.get('Message', '')}")
    return code, None if reason is None else str(reason), http, detail
