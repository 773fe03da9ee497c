"""Amazon SNS direct SMS (``Publish`` with ``PhoneNumber``).

SNS takes no idempotency key, offers no per-message lookup and sends no
delivery webhooks (delivery status goes to CloudWatch Logs only), so this
adapter can say "accepted" and nothing after. An Indeterminate send stays
unknown: never resend blind.

A publish to an opted-out number *succeeds* and the message silently fails
later, where we cannot see it. So, unless ``check_opt_out`` is off, each
send first asks ``CheckIfPhoneNumberIsOptedOut`` and turns a yes into a
definite OPTED_OUT rejection without publishing. (moto treats numbers ending
in 99 as opted out, which is how the tests exercise this.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from botocore.exceptions import ClientError, HTTPClientError, ParamValidationError

from tidings.providers import settings as cfg
from tidings.providers.aws_base import AwsAdapter, boto_client, error_parts
from tidings.providers.base import DEFAULT_TIMEOUT
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Indeterminate,
    Observation,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.providers.registry import register

SMS_TYPES = {"transactional": "Transactional", "promotional": "Promotional"}
PROMOTIONAL_PURPOSES = frozenset({"marketing", "promotional", "broadcast"})


@dataclass(frozen=True)
class OptedOut:
    """The pre-check said this number is opted out: nothing was published."""


@dataclass(frozen=True)
class PrecheckFailed:
    """The opt-out pre-check failed: nothing was published either."""

    error: BaseException


class SnsSmsAdapter(AwsAdapter):
    name = "sns"
    channels = frozenset({"sms"})
    operation = "publish"
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        # wire codes of Publish's modeled errors
        "endpointdisabled": RejectCode.UNREACHABLE,
        "kmsdisabled": RejectCode.AUTH_FAILED,
        "kmsaccessdenied": RejectCode.AUTH_FAILED,
        "kmsnotfound": RejectCode.AUTH_FAILED,
        "kmsinvalidstate": RejectCode.AUTH_FAILED,
        "kmsoptinrequired": RejectCode.AUTH_FAILED,
        "invalidsecurity": RejectCode.AUTH_FAILED,
    }

    def __init__(
        self,
        client: Any,
        *,
        sender_id: str | None = None,
        origination_number: str | None = None,
        sms_type: str = "Transactional",
        check_opt_out: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
    ):
        super().__init__(client, timeout=timeout)
        self._sender_id = sender_id
        self._origination_number = origination_number
        self._sms_type = sms_type
        self._check_opt_out = check_opt_out

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> dict[str, Any]:
        # Nothing in an SMS publish can carry our key; it stays on our side.
        return {
            "PhoneNumber": message.to,
            "Message": message.body,
            "MessageAttributes": self._attributes(message),
        }

    def _attributes(self, message: OutboundMessage) -> dict[str, dict[str, str]]:
        purpose = message.metadata.get("purpose", "").lower()
        sms_type = "Promotional" if purpose in PROMOTIONAL_PURPOSES else self._sms_type
        attributes = {"AWS.SNS.SMS.SMSType": _string(sms_type)}
        sender = message.sender or self._sender_id or self._origination_number
        if sender and sender.startswith("+"):
            attributes["AWS.MM.SMS.OriginationNumber"] = _string(sender)
        elif sender:
            attributes["AWS.SNS.SMS.SenderID"] = _string(sender)
        return attributes

    def transmit(self, request: Mapping[str, Any]) -> Any:
        if self._check_opt_out:
            verdict = self._precheck(str(request["PhoneNumber"]))
            if verdict is not None:
                return verdict
        return self.call("publish", request)

    def _precheck(self, phone_number: str) -> OptedOut | PrecheckFailed | None:
        try:
            answer = self.call("check_if_phone_number_is_opted_out", {"phoneNumber": phone_number})
        except HTTPClientError as exc:  # a lost answer to a read-only call: still nothing sent
            return PrecheckFailed(exc)
        if isinstance(answer, ClientError | ParamValidationError):
            return PrecheckFailed(answer)
        return OptedOut() if answer.get("isOptedOut") else None

    def parse_response(self, response: Any) -> SendResult:
        if isinstance(response, OptedOut):
            return Rejected(RejectCode.OPTED_OUT, "CheckIfPhoneNumberIsOptedOut: opted out")
        if isinstance(response, PrecheckFailed):
            return self._precheck_result(response.error)
        return super().parse_response(response)

    def _precheck_result(self, error: BaseException) -> SendResult:
        result = super().parse_response(error) if not isinstance(error, HTTPClientError) else None
        if result is None or isinstance(result, Indeterminate):
            # Only the read-only pre-check failed: publishing never started.
            return Retryable(RejectCode.PROVIDER_ERROR, None, f"opt-out check failed: {error!r}")
        return result

    def parse_error(self, exc: ClientError) -> SendResult:
        code, _, http, detail = error_parts(exc)
        if code in ("InvalidParameter", "ParameterValueInvalid"):
            # One code for a bad number, a bad message or a bad attribute; the
            # text is no contract, so this never names (or suppresses) the recipient.
            return Rejected(RejectCode.REQUEST_INVALID, detail, http)
        return super().parse_error(exc)

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        raise ProviderConfigError(
            "sns SMS has no delivery webhooks: delivery status goes to CloudWatch Logs only"
        )


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def _from_settings(settings: Mapping[str, Any]) -> SnsSmsAdapter:
    timeout = cfg.timeout(settings, "sns")
    sms_type = cfg.optional(settings, "sms_type", "transactional") or "transactional"
    if sms_type.lower() not in SMS_TYPES:
        raise ProviderConfigError("sns: setting 'sms_type' must be transactional or promotional")
    return SnsSmsAdapter(
        boto_client("sns", settings, "sns", timeout),
        sender_id=cfg.optional(settings, "sender_id"),
        origination_number=cfg.optional(settings, "from"),
        sms_type=SMS_TYPES[sms_type.lower()],
        check_opt_out=cfg.flag(settings, "check_opt_out", True, "sns"),
        timeout=timeout,
    )


register("sns", _from_settings)
