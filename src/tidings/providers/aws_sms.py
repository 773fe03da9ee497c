"""AWS End User Messaging SMS (pinpoint-sms-voice-v2 ``SendTextMessage``).

No idempotency key and no per-message lookup exist: our attempt key rides
in ``Context`` so that delivery events name the attempt, and an
Indeterminate send stays unknown until an event arrives or the check budget
runs out (never resend blind). Events reach us through a configuration
set's SNS event destination, so webhooks are verified as SNS messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from tidings.providers import settings as cfg
from tidings.providers.aws_base import AwsAdapter, boto_client, error_parts
from tidings.providers.base import DEFAULT_TIMEOUT, stable_key
from tidings.providers.correlation import carry, recover
from tidings.providers.errors import ProviderError
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Observation,
    ObservedStatus,
    RejectCode,
    Retryable,
    SendResult,
)
from tidings.providers.registry import register
from tidings.providers.sns_signature import SnsVerifier, sns_verifier_from

CONTEXT_KEY = "tidings_attempt"
CONTEXT_LIMIT = 800  # ContextMap value max length in the service model
TTL_RANGE = (5, 259_200)  # TimeToLive bounds in the service model, seconds
PROMOTIONAL_PURPOSES = frozenset({"marketing", "promotional", "broadcast"})
_FAILURES = ObservedStatus.undelivered, ObservedStatus.failed


class AwsSmsAdapter(AwsAdapter):
    name = "aws_sms"
    channels = frozenset({"sms"})
    operation = "send_text_message"
    # Event types from "Event types for SMS, MMS, and voice" (End User Messaging SMS guide).
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        "text_queued": ObservedStatus.accepted,
        "text_pending": ObservedStatus.accepted,
        "text_successful": ObservedStatus.delivered,  # accepted by the carrier; some
        "text_delivered": ObservedStatus.delivered,  # countries only ever report this one
        "text_ttl_expired": ObservedStatus.undelivered,
        "text_carrier_unreachable": ObservedStatus.undelivered,  # temporary carrier error
        "text_unreachable": ObservedStatus.undelivered,  # handset off or out of coverage
        # After 72 hours without a carrier's final event AWS reports UNKNOWN
        # "as we do not know what happened to that message"
        # (sms-voice/latest/userguide/configuration-sets-event-destinations):
        # never "a resend may fix it", which would invite a duplicate.
        "text_unknown": ObservedStatus.unknown,
        "text_blocked": ObservedStatus.failed,
        "text_invalid": ObservedStatus.failed,
        "text_invalid_message": ObservedStatus.failed,
        "text_carrier_blocked": ObservedStatus.failed,
        "text_spam": ObservedStatus.failed,
        "text_protect_blocked": ObservedStatus.failed,
    }
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        # event types
        "text_ttl_expired": RejectCode.TIMEOUT,
        "text_carrier_unreachable": RejectCode.UNREACHABLE,
        "text_unreachable": RejectCode.UNREACHABLE,
        "text_unknown": RejectCode.UNKNOWN,
        "text_blocked": RejectCode.CARRIER_FILTERED,
        "text_invalid": RejectCode.INVALID_DESTINATION,
        "text_invalid_message": RejectCode.CONTENT_REJECTED,
        "text_carrier_blocked": RejectCode.CARRIER_FILTERED,
        "text_spam": RejectCode.CARRIER_FILTERED,
        "text_protect_blocked": RejectCode.CONTENT_REJECTED,
        # ConflictException / ValidationException reasons at send time
        # (pinpoint-sms-voice-v2 service model, ValidationExceptionReason).
        # Only the opt-out and an unparseable number are about the recipient;
        # the sandbox's verified-number list, blocked countries and protect
        # configurations are the account's settings (docs/providers.md).
        "destination_phone_number_opted_out": RejectCode.OPTED_OUT,
        "destination_phone_number_not_verified": RejectCode.ACCOUNT_RESTRICTED,
        "destination_country_blocked": RejectCode.ACCOUNT_RESTRICTED,
        "destination_country_blocked_by_protect_configuration": RejectCode.ACCOUNT_RESTRICTED,
        "destination_phone_number_blocked_by_protect_number_override": (
            RejectCode.ACCOUNT_RESTRICTED
        ),
        "country_code_mismatch": RejectCode.INVALID_DESTINATION,
        "cannot_parse": RejectCode.INVALID_DESTINATION,
        "invalid_identity_for_destination_country": RejectCode.SENDER_REJECTED,
        "no_origination_identities_found": RejectCode.SENDER_REJECTED,
        "sender_id_not_registered": RejectCode.SENDER_REJECTED,
        "sender_id_not_supported": RejectCode.SENDER_REJECTED,
        "sender_id_requires_registration": RejectCode.SENDER_REJECTED,
        # ValidationExceptionReason values about our request or the account's
        # settings: without them a bad field read as UNKNOWN and raised no
        # `provider_refused` alert (#37).
        "invalid_parameter": RejectCode.REQUEST_INVALID,
        "missing_parameter": RejectCode.REQUEST_INVALID,
        "field_validation_failed": RejectCode.REQUEST_INVALID,
        "invalid_request": RejectCode.REQUEST_INVALID,
        "parameters_cannot_be_used_together": RejectCode.REQUEST_INVALID,
        "maximum_size_exceeded": RejectCode.REQUEST_INVALID,
        "unspecified_parameter_not_supported": RejectCode.REQUEST_INVALID,
        "country_not_enabled": RejectCode.ACCOUNT_RESTRICTED,
        "channel_not_enabled": RejectCode.ACCOUNT_RESTRICTED,
        "international_sending_not_supported": RejectCode.ACCOUNT_RESTRICTED,
        "price_over_threshold": RejectCode.ACCOUNT_RESTRICTED,
    }

    def __init__(
        self,
        client: Any,
        *,
        origination_identity: str | None = None,
        configuration_set: str | None = None,
        message_type: str = "TRANSACTIONAL",
        sns_verifier: SnsVerifier | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ):
        super().__init__(client, timeout=timeout)
        self._origination = origination_identity
        self._configuration_set = configuration_set
        self._message_type = message_type
        self._verifier = sns_verifier or SnsVerifier()

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> dict[str, Any]:
        request: dict[str, Any] = {
            "DestinationPhoneNumber": message.to,
            "MessageBody": message.body,
            "MessageType": self._type_for(message),
            "Context": {CONTEXT_KEY: carry(idempotency_key, CONTEXT_LIMIT)},
        }
        origination = message.sender or self._origination
        if origination:
            request["OriginationIdentity"] = origination
        if self._configuration_set:
            request["ConfigurationSetName"] = self._configuration_set
        if message.validity_seconds is not None:
            request["TimeToLive"] = min(max(message.validity_seconds, TTL_RANGE[0]), TTL_RANGE[1])
        return request

    def _type_for(self, message: OutboundMessage) -> str:
        purpose = message.metadata.get("purpose", "").lower()
        return "PROMOTIONAL" if purpose in PROMOTIONAL_PURPOSES else self._message_type

    def parse_error(self, exc: ClientError) -> SendResult:
        code, _, http, detail = error_parts(exc)
        if code == "ServiceQuotaExceededException":
            # A spend or daily quota: the message certainly did not go, and may later.
            return Retryable(RejectCode.RATE_LIMITED, None, detail, http)
        return super().parse_error(exc)

    # --- events (configuration-set event destination -> SNS -> us) ----------

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        event = self._verifier.notification(request.body)
        if event is None:
            return []
        if not isinstance(event, dict) or "eventType" not in event:
            raise ProviderError("aws_sms event lacks an eventType")
        return [self._observation(event)]

    def _observation(self, event: dict[str, Any]) -> Observation:
        raw_status = str(event["eventType"])
        # The event type is also the failure reason: it is the code only for failures.
        failed = self.status_map.get(raw_status.lower()) in _FAILURES
        raw_code = raw_status if failed else None
        status, code = self.map_status(raw_status, raw_code)
        context = event.get("context") or {}
        stamp = event.get("eventTimestamp")
        return Observation(
            provider=self.name,
            provider_message_id=event.get("messageId"),
            attempt_key=recover(context.get(CONTEXT_KEY)) if isinstance(context, dict) else None,
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=_from_millis(stamp),
            # A carrier event has no id of its own: message, type and time name it.
            dedupe_key=stable_key(self.name, event.get("messageId"), raw_status, stamp),
            raw=event,
            raw_code=raw_code,
        )


def _from_millis(value: object) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, UTC)
    return None


def _from_settings(settings: Mapping[str, Any]) -> AwsSmsAdapter:
    timeout = cfg.timeout(settings, "aws_sms")
    return AwsSmsAdapter(
        boto_client("pinpoint-sms-voice-v2", settings, "aws_sms", timeout),
        origination_identity=cfg.optional(settings, "from"),
        configuration_set=cfg.optional(settings, "configuration_set"),
        message_type=cfg.optional(settings, "message_type", "TRANSACTIONAL") or "TRANSACTIONAL",
        sns_verifier=sns_verifier_from(settings, "aws_sms"),
        timeout=timeout,
    )


register("aws_sms", _from_settings)
