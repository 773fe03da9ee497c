"""AWS's own wires over the simulator core, so the real `SesAdapter`,
`AwsSmsAdapter` and `SnsSmsAdapter` (providers/ses.py, aws_sms.py, sns.py),
each a boto3 client pointed at the simulator's `endpoint_url`, talk to it
unchanged. Their receipts (SNS envelopes) are in wire_aws_events.py.

What it speaks, each from botocore's service models (installed with
botocore: `botocore/data/<service>/<version>/service-2.json`; the protocols
are described at https://smithy.io/2.0/aws/protocols/) and AWS's API
references:

* SES v2 `SendEmail` (`sesv2/2019-09-27`, protocol `rest-json`):
  `POST /v2/email/outbound-emails`, a JSON body (`FromEmailAddress`,
  `Destination.ToAddresses`, `Content.Simple` or `Content.Raw`,
  `EmailTags`, `ConfigurationSetName`), answered `200 {"MessageId"}`
  (https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_SendEmail.html).
  Errors as the model's: the code in the `x-amzn-ErrorType` header, the
  text in the body's `message`; `TooManyRequestsException` 429 (the core's
  429; AWS sends no Retry-After), `BadRequestException` 400 (a bad field,
  the sender's included: a `FromEmailAddress` that is no address is refused
  here before the core), `MessageRejected` 400 (the core's SENDER_REJECTED
  and ACCOUNT_RESTRICTED, as SES answers an unverified identity, its
  sandbox's "Email address is not verified. The following identities
  failed the check in region ...":
  https://docs.aws.amazon.com/ses/latest/dg/request-production-access.html),
  a 500 `InternalFailure` for the core's 500 (AWS's common errors:
  https://docs.aws.amazon.com/ses/latest/APIReference-V2/CommonErrors.html).
  `EmailTags` names and values must be of `[A-Za-z0-9_-]`, at most 256
  characters (`MessageTag` in the model): otherwise `BadRequestException`.
  SES refuses no suppressed address at send (the account-level suppression
  list turns into a Bounce event): the core's OPTED_OUT and
  INVALID_DESTINATION answer `BadRequestException`, which suppresses nobody.
* AWS End User Messaging SMS `SendTextMessage` (`pinpoint-sms-voice-v2/
  2022-03-31`, protocol `json` 1.0, `X-Amz-Target:
  PinpointSMSVoiceV2.SendTextMessage`): answered `{"MessageId"}`; errors as
  `{"__type", "Message", "Reason"}` with the model's reason enums, HTTP
  400 but `InternalServerException` 500
  (https://docs.aws.amazon.com/sms-voice/latest/APIReference/API_SendTextMessage.html):
  the core's 429 is `ThrottlingException`; OPTED_OUT is `ConflictException`
  `DESTINATION_PHONE_NUMBER_OPTED_OUT`; ACCOUNT_RESTRICTED is the sandbox's
  `ConflictException` `DESTINATION_PHONE_NUMBER_NOT_VERIFIED`
  (https://docs.aws.amazon.com/sms-voice/latest/userguide/sandbox.html); a
  destination in `AwsAccount.blocked_countries` is `ValidationException`
  `DESTINATION_COUNTRY_BLOCKED`; INVALID_DESTINATION is
  `ValidationException` `CANNOT_PARSE`; REQUEST_INVALID
  `INVALID_PARAMETER`; SENDER_REJECTED `INVALID_IDENTITY_FOR_DESTINATION_COUNTRY`.
  `Context` values are at most 800 characters (`ContextValue`).
* SNS `Publish` and `CheckIfPhoneNumberIsOptedOut` (`sns/2010-03-31`,
  protocol `query`): a form post with `Action` and `Version`, answered
  with `<PublishResponse><PublishResult><MessageId>` XML; errors as
  `<ErrorResponse><Error><Type><Code><Message>` with the model's codes:
  `InvalidParameter` 400 for any refusal about the request, the number or
  the account, `InternalError` 500, and AWS's `Throttling` 400 "Rate
  exceeded" (Publish models no throttling error; AWS's common errors:
  https://docs.aws.amazon.com/sns/latest/api/CommonErrors.html). A number
  the core holds opted out is `isOptedOut` true
  (https://docs.aws.amazon.com/sns/latest/api/API_CheckIfPhoneNumberIsOptedOut.html),
  and a Publish to it succeeds and is never delivered, as AWS documents
  (https://docs.aws.amazon.com/sns/latest/dg/sms_manage.html).
* Authentication: each request must carry SigV4's `Authorization` header
  naming the account's access key
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html);
  otherwise `UnrecognizedClientException` (SES, SMS) or
  `InvalidClientTokenId` (SNS), 403. The signature itself is not verified.

The core decides everything (faults, outcomes, receipts); this module
only translates. None of the three takes an idempotency key: the core is
given our reference (the SES tag, the SMS `Context`) where it is there,
and otherwise a key of the request's own, so a repeat is a new message as
at AWS. Message ids are the core's. One recipient per request (more
answers 501, as the SendGrid wire does).
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parseaddr
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.magic import magic_for

SES_PATH = "/v2/email/outbound-emails"
SMS_TARGET = "PinpointSMSVoiceV2.SendTextMessage"
SNS_XMLNS = "http://sns.amazonaws.com/doc/2010-03-31/"
JSON_10 = "application/x-amz-json-1.0"
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_TAG = re.compile(r"[A-Za-z0-9_-]{1,256}")
_CONTEXT_VALUE_LIMIT = 800
_serial = itertools.count(1)
_SES_REFUSALS = {
    "SENDER_REJECTED": ("MessageRejected", "Email address is not verified. {who}"),
    "ACCOUNT_RESTRICTED": ("MessageRejected", "Email address is not verified. {who}"),
    "REQUEST_INVALID": ("BadRequestException", "Invalid content"),
    "OPTED_OUT": ("BadRequestException", "Invalid recipient"),
    "INVALID_DESTINATION": ("BadRequestException", "Missing final '@domain'"),
}
_SMS_REFUSALS = {
    "INVALID_DESTINATION": ("ValidationException", "CANNOT_PARSE"),
    "REQUEST_INVALID": ("ValidationException", "INVALID_PARAMETER"),
    "SENDER_REJECTED": ("ValidationException", "INVALID_IDENTITY_FOR_DESTINATION_COUNTRY"),
    "OPTED_OUT": ("ConflictException", "DESTINATION_PHONE_NUMBER_OPTED_OUT"),
    "ACCOUNT_RESTRICTED": ("ConflictException", "DESTINATION_PHONE_NUMBER_NOT_VERIFIED"),
}


@dataclass(frozen=True)
class AwsAccount:
    """The simulated AWS account: its credentials, region, id, and the SNS
    topic its SES and SMS events are published to."""

    secret_access_key: str
    access_key_id: str = "AKIASIMULATOR0000000"
    region: str = "us-east-1"
    account_id: str = "123456789012"
    topic_name: str = "tidings-events"
    sender: str = "tidings@simulator.test"
    origination_number: str = "+12065550100"
    # Calling-code prefixes the account's protect configuration blocks.
    blocked_countries: tuple[str, ...] = field(default=())

    @property
    def topic_arn(self) -> str:
        return f"arn:aws:sns:{self.region}:{self.account_id}:{self.topic_name}"


def account_of(config: SimulatorConfig) -> AwsAccount:
    """The simulator's webhook secret is the account's secret access key."""
    return AwsAccount(secret_access_key=config.webhook_secret)


@dataclass(frozen=True)
class WireAnswer:
    """An AWS answer: status, headers, raw body bytes, and the core's timing."""

    status_code: int
    headers: dict[str, str]
    body: bytes
    latency_s: float = 0.0
    stall_s: float = 0.0


def which(method: str, path: str, headers: Mapping[str, str], body: bytes) -> str | None:
    """Which service a request is for: "ses", "aws_sms", "sns" or None."""
    if method != "POST":
        return None
    if path == SES_PATH:
        return "ses"
    if path != "/":
        return None
    if _header(headers, "x-amz-target") == SMS_TARGET:
        return "aws_sms"
    if dict(parse_qsl(body.decode("utf-8", "replace"))).get("Action"):
        return "sns"
    return None


def answer(
    core: SimulatorCore,
    account: AwsAccount,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
) -> WireAnswer:
    service = which(method, path, headers, body)
    if service is None:
        return WireAnswer(404, {}, b'{"code":"NOT_FOUND"}')
    if not _signed_by(account, headers):
        return _unrecognized(service)
    if service == "ses":
        return _ses(core, account, body)
    if service == "aws_sms":
        return _sms(core, account, body)
    return _sns(core, dict(parse_qsl(body.decode("utf-8", "replace"))))


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def _signed_by(account: AwsAccount, headers: Mapping[str, str]) -> bool:
    auth = _header(headers, "authorization")
    found = _CREDENTIAL.search(auth) if auth.startswith("AWS4-HMAC-SHA256 ") else None
    return found is not None and found.group(1) == account.access_key_id


def _unrecognized(service: str) -> WireAnswer:
    text = "The security token included in the request is invalid."
    if service == "sns":
        return _sns_error(403, "InvalidClientTokenId", text)
    if service == "ses":
        return _rest_error(403, "UnrecognizedClientException", text)
    return _json_error(400, "UnrecognizedClientException", text)


def _request_id() -> str:
    return str(uuid.UUID(int=next(_serial)))


# --- SES v2 (rest-json) -------------------------------------------------------


def _rest_error(status: int, code: str, message: str, latency: float = 0.0) -> WireAnswer:
    headers = {
        "Content-Type": "application/json",
        "x-amzn-ErrorType": f"{code}:",
        "x-amzn-RequestId": _request_id(),
    }
    return WireAnswer(status, headers, json.dumps({"message": message}).encode(), latency)


def _ses(core: SimulatorCore, account: AwsAccount, body: bytes) -> WireAnswer:
    try:
        request = json.loads(body)
    except ValueError:
        return _rest_error(400, "BadRequestException", "Invalid JSON")
    sender = str(request.get("FromEmailAddress") or "")
    if "@" not in sender:
        # A sender that is no address: "about the sender", never the recipient.
        return _rest_error(400, "BadRequestException", "Missing final '@domain'")
    recipients = (request.get("Destination") or {}).get("ToAddresses") or []
    if len(recipients) != 1:
        return _rest_error(501, "NOT_SUPPORTED", "one recipient per request")
    tags = {str(t.get("Name")): str(t.get("Value")) for t in request.get("EmailTags") or []}
    if any(not (_TAG.fullmatch(k) and _TAG.fullmatch(v)) for k, v in tags.items()):
        return _rest_error(400, "BadRequestException", "Invalid tag name or value")
    content = request.get("Content") or {}
    simple = content.get("Simple") or {}
    if "Raw" in content:
        base64.b64decode(content["Raw"].get("Data", ""))  # the blob as botocore sent it
    payload: dict[str, Any] = {
        "to": str(recipients[0]),
        "body": str(((simple.get("Body") or {}).get("Text") or {}).get("Data", "")),
        "subject": (simple.get("Subject") or {}).get("Data"),
        "sender": sender,
        "idempotency_key": tags.get("tidings_attempt") or f"ses-request-{next(_serial)}",
        "metadata": {},
    }
    reply = core.send("email", payload, played="ses")
    if reply.status_code in (200, 201):
        ok = {"Content-Type": "application/json", "x-amzn-RequestId": _request_id()}
        answer_body = json.dumps({"MessageId": reply.body["message_id"]}).encode()
        return WireAnswer(200, ok, answer_body, reply.latency_s, reply.stall_s)
    if reply.status_code == 429:
        text = "Too many requests have been made to the operation."
        return _rest_error(429, "TooManyRequestsException", text, reply.latency_s)
    if reply.status_code >= 500:
        return _rest_error(500, "InternalFailure", "Internal failure.", reply.latency_s)
    code, text = _SES_REFUSALS.get(str(reply.body.get("code")), _SES_REFUSALS["REQUEST_INVALID"])
    who = f"The following identities failed the check in region {account.region.upper()}: "
    # SES names identities (addresses, domains), never a display name.
    who += (
        parseaddr(sender)[1] if reply.body.get("code") == "SENDER_REJECTED" else str(recipients[0])
    )
    return _rest_error(400, code, text.format(who=who), reply.latency_s)


# --- End User Messaging SMS (json 1.0) ---------------------------------------


def _json_error(
    status: int, code: str, message: str, latency: float = 0.0, **members: Any
) -> WireAnswer:
    headers = {"Content-Type": JSON_10, "x-amzn-RequestId": _request_id()}
    error = {"__type": f"com.amazonaws.pinpointsmsvoicev2#{code}", "Message": message, **members}
    return WireAnswer(status, headers, json.dumps(error).encode(), latency)


def _sms(core: SimulatorCore, account: AwsAccount, body: bytes) -> WireAnswer:
    try:
        request = json.loads(body)
    except ValueError:
        return _json_error(400, "SerializationException", "Invalid JSON")
    to = str(request.get("DestinationPhoneNumber") or "")
    if not to:
        return _json_error(
            400, "ValidationException", "DestinationPhoneNumber is required",
            Reason="MISSING_PARAMETER",
        )  # fmt: skip
    context = request.get("Context") or {}
    if any(len(str(v)) > _CONTEXT_VALUE_LIMIT for v in context.values()):
        return _json_error(400, "ValidationException", "Context", Reason="FIELD_VALIDATION_FAILED")
    if any(to.startswith(prefix) for prefix in account.blocked_countries):
        text = "The destination country is blocked."
        return _json_error(400, "ValidationException", text, Reason="DESTINATION_COUNTRY_BLOCKED")
    payload: dict[str, Any] = {
        "to": to,
        "body": str(request.get("MessageBody") or ""),
        "sender": str(request.get("OriginationIdentity") or account.origination_number),
        "idempotency_key": str(context.get("tidings_attempt") or f"sms-request-{next(_serial)}"),
        "metadata": {},
    }
    if request.get("TimeToLive") is not None:
        payload["validity_seconds"] = int(request["TimeToLive"])
    reply = core.send("sms", payload, played="aws_sms")
    latency = reply.latency_s
    if reply.status_code in (200, 201):
        ok = {"Content-Type": JSON_10, "x-amzn-RequestId": _request_id()}
        answer_body = json.dumps({"MessageId": reply.body["message_id"]}).encode()
        return WireAnswer(200, ok, answer_body, latency, reply.stall_s)
    if reply.status_code == 429:
        return _json_error(400, "ThrottlingException", "Rate exceeded.", latency)
    if reply.status_code >= 500:
        return _json_error(
            500, "InternalServerException", "Internal server error.", latency,
            RequestId=_request_id(),
        )  # fmt: skip
    refused = str(reply.body.get("code"))
    code, reason = _SMS_REFUSALS.get(refused, _SMS_REFUSALS["REQUEST_INVALID"])
    text = reason.replace("_", " ").capitalize() + "."
    return _json_error(400, code, text, latency, Reason=reason)


# --- SNS (query) -------------------------------------------------------------


def _xml(status: int, document: str, latency: float = 0.0, stall: float = 0.0) -> WireAnswer:
    headers = {"Content-Type": "text/xml", "x-amzn-RequestId": _request_id()}
    return WireAnswer(status, headers, document.encode(), latency, stall)


def _sns_error(status: int, code: str, message: str, latency: float = 0.0) -> WireAnswer:
    kind = "Receiver" if status >= 500 else "Sender"
    document = (
        f'<ErrorResponse xmlns="{SNS_XMLNS}"><Error><Type>{kind}</Type>'
        f"<Code>{code}</Code><Message>{escape(message)}</Message></Error>"
        f"<RequestId>{_request_id()}</RequestId></ErrorResponse>"
    )
    return _xml(status, document, latency)


def _sns_result(action: str, result: str, latency: float = 0.0, stall: float = 0.0) -> WireAnswer:
    document = (
        f'<{action}Response xmlns="{SNS_XMLNS}"><{action}Result>{result}</{action}Result>'
        f"<ResponseMetadata><RequestId>{_request_id()}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    )
    return _xml(200, document, latency, stall)


def _sns(core: SimulatorCore, form: Mapping[str, str]) -> WireAnswer:
    action = form.get("Action", "")
    if action == "CheckIfPhoneNumberIsOptedOut":
        number = form.get("phoneNumber", "")
        magic = magic_for("sms", number)
        opted_out = "true" if magic is not None and magic.code == "OPTED_OUT" else "false"
        return _sns_result(action, f"<isOptedOut>{opted_out}</isOptedOut>")
    if action != "Publish":
        return _sns_error(400, "InvalidAction", f"Could not find operation {action}")
    to = form.get("PhoneNumber", "")
    if not to:
        return _sns_error(400, "InvalidParameter", "Invalid parameter: PhoneNumber")
    payload = {
        "to": to,
        "body": form.get("Message", ""),
        "idempotency_key": f"sns-request-{next(_serial)}",
        "metadata": {},
    }
    reply = core.send("sms", payload, played="sns")
    latency = reply.latency_s
    if reply.status_code in (200, 201) or reply.body.get("code") == "OPTED_OUT":
        # An opted-out number is published to and silently never delivered.
        message_id = str(reply.body.get("message_id") or uuid.uuid4())
        result = f"<MessageId>{message_id}</MessageId>"
        return _sns_result(action, result, latency, reply.stall_s)
    if reply.status_code == 429:
        return _sns_error(400, "Throttling", "Rate exceeded", latency)
    if reply.status_code >= 500:
        return _sns_error(500, "InternalError", "Internal Error", latency)
    text = f"Invalid parameter: PhoneNumber Reason: {to} is not valid to publish to"
    return _sns_error(400, "InvalidParameter", text, latency)
