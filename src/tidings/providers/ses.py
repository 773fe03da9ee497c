"""Amazon SES v2 (``SendEmail``): Simple content, or Raw MIME when there are attachments.

SES takes no idempotency key and offers no per-message lookup; our attempt
key travels in ``EmailTags`` (escaped into the tag alphabet, so it comes back
whole) and returns in every configuration-set event, which reaches us
through an SNS topic. Attachment bytes are loaded at send time through the
adapter's attachment_loader, never stored with the attempt.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import parseaddr
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from tidings.providers import settings as cfg
from tidings.providers.aws_base import AwsAdapter, boto_client, error_parts
from tidings.providers.base import DEFAULT_TIMEOUT, stable_key
from tidings.providers.correlation import carry, escape_tag, unescape_tag
from tidings.providers.errors import ProviderConfigError, ProviderError
from tidings.providers.messages import AttachmentLoader, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Observation, ObservedStatus, RejectCode, Rejected, SendResult
from tidings.providers.registry import register
from tidings.providers.sns_signature import SnsVerifier, sns_verifier_from

TAG_NAME = "tidings_attempt"
TAG_LIMIT = 256  # MessageTag value: at most 256 of [A-Za-z0-9_-]
# Where each event type keeps its own time (SES event publishing record contents).
_EVENT_OBJECT = {
    "bounce": "bounce",
    "complaint": "complaint",
    "delivery": "delivery",
    "deliverydelay": "deliveryDelay",
    "open": "open",
    "click": "click",
    "reject": "reject",
    "rendering failure": "failure",
    "subscription": "subscription",
}
# Words in a BadRequest message that say the recipient address is what is wrong
# ("Illegal address", "Missing final '@domain'", moto's "Missing domain").
# The event types whose meaning is a failure reason: they are their own code.
_SELF_CODED = frozenset({"complaint", "reject", "rendering failure"})
# MessageRejected's text when an identity failed SES's verification check:
# "Email address is not verified. The following identities failed the check
# in region REGION: identity1, identity2, ..." (SES's sending errors page;
# moto words it "Email address not verified <identity>").
_NOT_VERIFIED = re.compile(r"email address (?:is )?not verified", re.IGNORECASE)
_IDENTITY_SEPARATORS = re.compile(r"[\s,:]+")


@dataclass(frozen=True)
class Refusal:
    """SendEmail's error, with the sender the request named: whose identity
    a MessageRejected names decides whose fault it is."""

    error: ClientError
    sender: str


class SesAdapter(AwsAdapter):
    name = "ses"
    channels = frozenset({"email"})
    operation = "send_email"
    status_map: ClassVar[Mapping[str, ObservedStatus]] = {
        "send": ObservedStatus.accepted,
        "deliverydelay": ObservedStatus.accepted,  # SES is still trying
        "delivery": ObservedStatus.delivered,
        "open": ObservedStatus.delivered,
        "click": ObservedStatus.delivered,
        # A complaint comes after delivery; the code carries the complaint.
        "complaint": ObservedStatus.delivered,
        "bounce": ObservedStatus.undelivered,  # Permanent bounces: see map_status
        "reject": ObservedStatus.failed,  # virus found: SES never tried
        "rendering failure": ObservedStatus.failed,
    }
    code_map: ClassVar[Mapping[str, RejectCode]] = {
        # bounceType of Bounce events
        "permanent": RejectCode.BOUNCED,
        "transient": RejectCode.BOUNCED,
        "undetermined": RejectCode.BOUNCED,
        # self-coded event types
        "complaint": RejectCode.COMPLAINT,
        "unsubscribeall": RejectCode.OPTED_OUT,  # Subscription, newTopicPreferences
        "reject": RejectCode.CONTENT_REJECTED,
        "rendering failure": RejectCode.CONTENT_REJECTED,
        # SendEmail errors
        "messagerejected": RejectCode.CONTENT_REJECTED,  # read by _rejected_code
        # As the sesv2 model documents each: "the sending domain isn't
        # verified" is our sender's; "permanently restricted" and "currently
        # paused" are the account's, every send refused alike: it pauses.
        "mailfromdomainnotverifiedexception": RejectCode.SENDER_REJECTED,
        "accountsuspendedexception": RejectCode.ACCOUNT_RESTRICTED,
        "sendingpausedexception": RejectCode.ACCOUNT_RESTRICTED,
    }

    def __init__(
        self,
        client: Any,
        *,
        sender: str | None = None,
        configuration_set: str | None = None,
        sns_verifier: SnsVerifier | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        attachment_loader: AttachmentLoader | None = None,
    ):
        super().__init__(client, timeout=timeout, attachment_loader=attachment_loader)
        self._sender = sender
        self._configuration_set = configuration_set
        self._verifier = sns_verifier or SnsVerifier()

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> dict[str, Any]:
        sender = message.sender or self._sender
        if not sender:
            raise ProviderConfigError("ses needs a sender: set 'from' or the message sender")
        request: dict[str, Any] = {
            "FromEmailAddress": sender,
            "Destination": {"ToAddresses": [message.to]},
            "Content": self._content(message, sender),
            "EmailTags": [{"Name": TAG_NAME, "Value": tag_value(idempotency_key)}],
        }
        if self._configuration_set:
            request["ConfigurationSetName"] = self._configuration_set
        return request

    def _content(self, message: OutboundMessage, sender: str) -> dict[str, Any]:
        if message.attachments:
            return {"Raw": {"Data": self._mime(message, sender).as_bytes()}}
        return {
            "Simple": {
                "Subject": {"Data": message.subject or "", "Charset": "UTF-8"},
                "Body": {"Text": {"Data": message.body, "Charset": "UTF-8"}},
            }
        }

    def _mime(self, message: OutboundMessage, sender: str) -> EmailMessage:
        mime = EmailMessage()
        mime["From"] = sender
        mime["To"] = message.to
        mime["Subject"] = message.subject or ""
        mime.set_content(message.body)
        for ref in message.attachments:
            maintype, _, subtype = ref.content_type.partition("/")
            data = self.load_attachment(ref)
            mime.add_attachment(
                data,
                maintype=maintype or "application",
                subtype=subtype or "octet-stream",
                filename=ref.filename,
            )
        return mime

    def transmit(self, request: Mapping[str, Any]) -> Any:
        answer = super().transmit(request)
        if isinstance(answer, ClientError):
            return Refusal(answer, str(request.get("FromEmailAddress", "")))
        return answer

    def parse_response(self, response: Any) -> SendResult:
        if not isinstance(response, Refusal):
            return super().parse_response(response)
        code, _, http, detail = error_parts(response.error)
        if code == "MessageRejected":
            message = str(response.error.response.get("Error", {}).get("Message", ""))
            return Rejected(
                _rejected_code(message, response.sender), detail, http, provider_code=code
            )
        return self.parse_error(response.error)

    def parse_error(self, exc: ClientError) -> SendResult:
        code, _, http, detail = error_parts(exc)
        if code in ("BadRequestException", "InvalidParameterValue"):
            # One code for any bad field, the sender's included; its message
            # text is no contract, so it never names the recipient (a guess
            # from the text suppressed recipients for a bad From).
            return Rejected(RejectCode.REQUEST_INVALID, detail, http)
        return super().parse_error(exc)

    # --- events (configuration-set event destination -> SNS -> us) ----------

    @classmethod
    def map_status(cls, raw_status: str, raw_code: str | None) -> tuple[ObservedStatus, str | None]:
        status, code = super().map_status(raw_status, raw_code)
        if raw_status.lower() == "bounce" and (raw_code or "").lower() == "permanent":
            status = ObservedStatus.failed  # a hard bounce: resending to it cannot help
        return status, code

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        event = self._verifier.notification(request.body)
        if event is None:
            return []
        if not isinstance(event, dict) or not isinstance(event.get("mail"), dict):
            raise ProviderError("ses event lacks its mail object")
        return [self._observation(event)]

    def _observation(self, event: dict[str, Any]) -> Observation:
        raw_status = str(event.get("eventType") or event.get("notificationType") or "")
        raw_code = _raw_code(raw_status, event)
        status, code = self.map_status(raw_status, raw_code)
        mail = event["mail"]
        stamp = _timestamp(raw_status, event)
        return Observation(
            provider=self.name,
            provider_message_id=mail.get("messageId"),
            attempt_key=_attempt_key(mail.get("tags")),
            status=status,
            code=code,
            raw_status=raw_status,
            occurred_at=_parse_time(stamp),
            dedupe_key=stable_key(self.name, mail.get("messageId"), raw_status, stamp),
            raw=event,
            raw_code=raw_code,
        )


def _rejected_code(message: str, sender: str) -> RejectCode:
    """MessageRejected's meaning. SES v2's model documents it as content
    ("The message can't be sent because it contains invalid content"); SES
    answers it too when an identity fails verification, naming the failed
    identities: the sender (its address or domain), or, in the sandbox, a
    recipient, which is the account's restriction. Neither is a fact about
    the recipient, so nothing here suppresses anyone (docs/providers.md)."""
    if not _NOT_VERIFIED.search(message):
        return RejectCode.CONTENT_REJECTED
    named = {part.lower() for part in _IDENTITY_SEPARATORS.split(message)}
    address = parseaddr(sender)[1].lower()
    domain = address.rpartition("@")[2]
    if address and (address in named or domain in named):
        return RejectCode.SENDER_REJECTED
    return RejectCode.ACCOUNT_RESTRICTED


def tag_value(key: str) -> str:
    escaped = escape_tag(key)
    return escaped if len(escaped) <= TAG_LIMIT else carry(key, TAG_LIMIT)


def _attempt_key(tags: object) -> str | None:
    if not isinstance(tags, dict):
        return None
    values = tags.get(TAG_NAME)
    value = values[0] if isinstance(values, list) and values else None
    if not isinstance(value, str) or value.startswith("sha256-"):
        return None
    return unescape_tag(value)


def _raw_code(raw_status: str, event: Mapping[str, Any]) -> str | None:
    kind = raw_status.lower()
    if kind == "bounce":
        bounce = event.get("bounce") or {}
        return str(bounce.get("bounceType") or "Undetermined")
    if kind == "subscription":
        return _subscription_code(event)
    return raw_status if kind in _SELF_CODED else None


def _subscription_code(event: Mapping[str, Any]) -> str | None:
    """SES's Subscription event (a recipient's list-management change):
    unsubscribing from every topic is an opt-out; one topic's opt-out is
    kept as raw only, since tidings maps no contact-list topic to a purpose."""
    subscription = event.get("subscription")
    preferences = (
        subscription.get("newTopicPreferences") if isinstance(subscription, dict) else None
    )
    if isinstance(preferences, dict) and preferences.get("unsubscribeAll") is True:
        return "unsubscribeAll"
    return None


def _timestamp(raw_status: str, event: Mapping[str, Any]) -> str | None:
    detail = event.get(_EVENT_OBJECT.get(raw_status.lower(), ""), None)
    if isinstance(detail, dict) and isinstance(detail.get("timestamp"), str):
        return str(detail["timestamp"])
    stamp = event["mail"].get("timestamp")
    return stamp if isinstance(stamp, str) else None


def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.utcoffset() is not None else None


def _from_settings(settings: Mapping[str, Any]) -> SesAdapter:
    timeout = cfg.timeout(settings, "ses")
    return SesAdapter(
        boto_client("sesv2", settings, "ses", timeout),
        sender=cfg.required(settings, "from", "ses"),
        configuration_set=cfg.optional(settings, "configuration_set"),
        sns_verifier=sns_verifier_from(settings, "ses"),
        timeout=timeout,
        attachment_loader=cfg.loader(settings),
    )


register("ses", _from_settings)
