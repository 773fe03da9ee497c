"""SES and End User Messaging SMS events as AWS delivers them: inside an
SNS HTTP(S) notification, signed so that the adapters' own verification
(providers/sns_signature.py) passes. The requests and answers are in
wire_aws.py.

* The envelope: `Type: Notification`, `MessageId`, `TopicArn`, `Message`
  (the event as a JSON string), `Timestamp`, `SignatureVersion` "1"
  (SHA1withRSA) or "2" (SHA256withRSA), `Signature` (base64, over the
  "Name\\nValue\\n" lines of Message, MessageId, Subject if any, Timestamp,
  TopicArn and Type), `SigningCertURL`, `UnsubscribeURL`; posted with
  `Content-Type: text/plain; charset=UTF-8` and the
  `x-amz-sns-message-type`, `x-amz-sns-message-id` and
  `x-amz-sns-topic-arn` headers
  (https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html,
  https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html,
  https://docs.aws.amazon.com/sns/latest/dg/http-header.html). A duplicate
  keeps its MessageId, as an SNS retry does.
* The signing certificate: SNS's lives at an https URL on an
  `sns.<region>.amazonaws.com` host, which the verifier requires. The
  simulator's is self-signed (CN `sns.simulator.invalid`, its RSA key made
  once per process) and served at `CERT_PATH` under the simulator's
  `public_url`; the adapter trusts that exact URL only when its settings
  name it (`sns_trusted_cert_urls`, for the simulator and tests alone).
* SES events (configuration-set event publishing to SNS:
  https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html,
  https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-examples.html):
  `eventType` (Send, Delivery, Bounce, Complaint, Reject), `mail` with
  `timestamp`, `source`, `sourceArn`, `sendingAccountId`, `messageId`,
  `destination`, `headersTruncated` and `tags` (our `tidings_attempt`
  among SES's own `ses:` tags), and the type's own object: `bounce`
  (`bounceType` Permanent, Transient or Undetermined, `bounceSubType`,
  `bouncedRecipients`, `timestamp`, `feedbackId`), `delivery`
  (`recipients`, `smtpResponse`, `processingTimeMillis`), `complaint`
  (`complainedRecipients`, `complaintFeedbackType`), `reject` (`reason`),
  `send` ({}).
* SMS events (https://docs.aws.amazon.com/sms-voice/latest/userguide/configuration-sets-event-format.html,
  event types in .../configuration-sets-event-types.html): `eventType`
  (TEXT_PENDING, TEXT_QUEUED, TEXT_DELIVERED, TEXT_TTL_EXPIRED,
  TEXT_CARRIER_UNREACHABLE, TEXT_BLOCKED, TEXT_INVALID, TEXT_UNKNOWN, ...),
  `eventVersion`, `eventTimestamp` (ms), `isFinal`, `messageId`,
  `destinationPhoneNumber`, `originationPhoneNumber`, `messageStatus` (the
  type without `TEXT_`), `messageStatusDescription`, `messageType`,
  `totalMessageParts` and `context` (what the send's `Context` held).

The event comes from the core's receipt in the profile's words
(profiles.py); SES's `mail.timestamp` is the event's own time (the core
keeps no send time with a receipt).
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import json
import uuid
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.records import Receipt
from tidings.providers.simulator.wire_aws import AwsAccount

CERT_PATH = "/_aws/SimpleNotificationService-simulator.pem"
CERT_NAME = "sns.simulator.invalid"
_HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}
_FINAL_SMS = {"TEXT_PENDING": False, "TEXT_QUEUED": False}
_BOUNCE_SUBTYPES = {"Permanent": "General", "Transient": "General"}


@functools.cache
def _signer() -> tuple[rsa.RSAPrivateKey, bytes]:
    """The simulator's SNS signing key and its self-signed certificate (PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CERT_NAME)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Wide: tests run their verifiers on simulated clocks years ahead.
        .not_valid_before(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
        .not_valid_after(dt.datetime(2100, 1, 1, tzinfo=dt.UTC))
        .sign(key, hashes.SHA256())
    )
    return key, cert.public_bytes(serialization.Encoding.PEM)


def certificate_pem() -> bytes:
    return _signer()[1]


def cert_url(config: SimulatorConfig) -> str:
    """Where the simulator serves its signing certificate (`SigningCertURL`)."""
    return config.public_url.rstrip("/") + CERT_PATH


def _aws_time(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _uuid(text: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256(text.encode()).digest()[:16]))


def notification(
    receipt: Receipt,
    account: AwsAccount,
    config: SimulatorConfig,
    now: float,
    signature_version: str = "1",
) -> tuple[dict[str, str], bytes]:
    """Headers and body of one SNS HTTP notification carrying the receipt's event."""
    event = (ses_event if receipt.profile == "ses" else sms_event)(receipt, account)
    message_id = _uuid(str(receipt.event["event_id"]))
    doc = {
        "Type": "Notification",
        "MessageId": message_id,
        "TopicArn": account.topic_arn,
        "Message": json.dumps(event, separators=(",", ":")),
        "Timestamp": _aws_time(dt.datetime.fromtimestamp(now, dt.UTC)),
        "SignatureVersion": signature_version,
    }
    doc["Signature"] = sign(doc, signature_version)
    doc["SigningCertURL"] = cert_url(config)
    doc["UnsubscribeURL"] = (
        f"{config.public_url.rstrip('/')}/?Action=Unsubscribe"
        f"&SubscriptionArn={account.topic_arn}:{_uuid(account.topic_arn)}"
    )
    headers = {
        "Content-Type": "text/plain; charset=UTF-8",
        "x-amz-sns-message-type": "Notification",
        "x-amz-sns-message-id": message_id,
        "x-amz-sns-topic-arn": account.topic_arn,
    }
    return headers, json.dumps(doc).encode()


def sign(doc: dict[str, str], signature_version: str) -> str:
    """SNS's signature over a Notification's signed fields, in their order."""
    fields = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
    text = "".join(f"{name}\n{doc[name]}\n" for name in fields if name in doc)
    key, _ = _signer()
    raw = key.sign(text.encode(), padding.PKCS1v15(), _HASHES[signature_version]())
    return base64.b64encode(raw).decode()


def ses_event(receipt: Receipt, account: AwsAccount) -> dict[str, Any]:
    event = receipt.event
    kind, code = str(event["status"]), event.get("code")
    stamp = _aws_time(dt.datetime.fromisoformat(str(event["occurred_at"])))
    tags = {"ses:configuration-set": ["tidings"], "ses:from-domain": ["simulator.test"]}
    tags.update(event.get("tags") or {})
    body: dict[str, Any] = {
        "eventType": kind,
        "mail": {
            "timestamp": stamp,
            "source": account.sender,
            "sourceArn": (
                f"arn:aws:ses:{account.region}:{account.account_id}:identity/simulator.test"
            ),
            "sendingAccountId": account.account_id,
            "messageId": str(event["message_id"]),
            "destination": [receipt.to],
            "headersTruncated": False,
            "tags": tags,
        },
    }
    feedback_id = _uuid(f"feedback|{event['event_id']}")
    if kind == "Bounce":
        bounce_type = str(code or "Undetermined")
        body["bounce"] = {
            "bounceType": bounce_type,
            "bounceSubType": _BOUNCE_SUBTYPES.get(bounce_type, "Undetermined"),
            "bouncedRecipients": [{"emailAddress": receipt.to, "action": "failed"}],
            "timestamp": stamp,
            "feedbackId": feedback_id,
        }
    elif kind == "Complaint":
        body["complaint"] = {
            "complainedRecipients": [{"emailAddress": receipt.to}],
            "complaintFeedbackType": "abuse",
            "timestamp": stamp,
            "feedbackId": feedback_id,
        }
    elif kind == "Delivery":
        body["delivery"] = {
            "timestamp": stamp,
            "processingTimeMillis": 546,
            "recipients": [receipt.to],
            "smtpResponse": "250 2.6.0 Message received",
            "reportingMTA": "a8-70.smtp-out.amazonses.com",
        }
    elif kind == "Reject":
        body["reject"] = {"reason": "Bad content"}
    else:
        body[kind[:1].lower() + kind[1:]] = {}
    return body


def sms_event(receipt: Receipt, account: AwsAccount) -> dict[str, Any]:
    event = receipt.event
    kind = str(event["status"])
    at = dt.datetime.fromisoformat(str(event["occurred_at"]))
    millis = int(at.timestamp() * 1000)
    status = kind.removeprefix("TEXT_")
    return {
        "eventType": kind,
        "eventVersion": "1.0",
        "eventTimestamp": millis,
        "isFinal": _FINAL_SMS.get(kind, True),
        "originationPhoneNumber": account.origination_number,
        "destinationPhoneNumber": receipt.to,
        "messageId": str(event["message_id"]),
        "messageRequestTimestamp": millis,
        "messageEncoding": "GSM",
        "messageType": "TRANSACTIONAL",
        "messageStatus": status,
        "messageStatusDescription": status.replace("_", " ").capitalize(),
        "totalMessageParts": 1,
        "context": event.get("context") or {},
    }
