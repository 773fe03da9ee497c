"""Amazon SES v2 against moto's ``mock_aws``; events as signed SNS notifications.

moto really sends once the sender identity is verified (and refuses an
unverified one with MessageRejected); sent messages are read back from its
backend, Raw MIME included. A throttle and a lost answer are staged on the
client (peer_support.BotoStage). Event records follow "Examples of event
data that Amazon SES publishes to Amazon SNS".
"""

from __future__ import annotations

import email
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from tests.providers.conformance import AdapterConformance, Outcome, Signature
from tests.providers.peer_support import TOPIC_ARN, BotoStage, SnsSigner, new_id
from tidings.domain import feedback
from tidings.providers.aws_base import boto_client
from tidings.providers.correlation import escape_tag, unescape_tag
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import AttachmentRef, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
)
from tidings.providers.ses import SesAdapter, tag_value
from tidings.providers.settings import build
from tidings.providers.sns_signature import SnsVerifier

REGION = "us-east-1"
SENDER = "notify@tidings.test"
SETTINGS = {
    "region": REGION,
    "access_key_id": "testing",
    "secret_access_key": "testing-secret",
    "from": f"Tidings <{SENDER}>",
    "configuration_set": "tidings-events",
}


def sent_messages() -> list[Any]:
    return list(ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages)


def ses_event(
    event_type: str, message_id: str, key: str, to: str | None = None, **detail: Any
) -> dict[str, Any]:
    recipient = to or "recipient@example.com"
    event: dict[str, Any] = {
        "eventType": event_type,
        "mail": {
            "timestamp": "2030-01-02T03:04:05.000Z",
            "source": f"Tidings <{SENDER}>",
            "sourceArn": f"arn:aws:ses:{REGION}:123456789012:identity/{SENDER}",
            "sendingAccountId": "123456789012",
            "messageId": message_id,
            "destination": [recipient],
            "headersTruncated": False,
            "headers": [{"name": "To", "value": recipient}],
            "commonHeaders": {"from": [SENDER], "to": [recipient], "subject": "Hello"},
            "tags": {
                "ses:configuration-set": ["tidings-events"],
                "tidings_attempt": [tag_value(key)],
            },
        },
    }
    stamp = {"timestamp": "2030-01-02T03:05:06.789Z"}
    if event_type == "Bounce":
        event["bounce"] = (
            {
                "bounceType": "Permanent",
                "bounceSubType": "General",
                "bouncedRecipients": [
                    {
                        "emailAddress": recipient,
                        "action": "failed",
                        "status": "5.1.1",
                        "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                    }
                ],
                "feedbackId": "01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000",
                "reportingMTA": "dsn; mta.example.com",
            }
            | stamp
            | detail
        )
    elif event_type == "Subscription":
        # The shape of SES's documented Subscription record (event-publishing-
        # retrieving-sns-examples, "Subscription record").
        event["subscription"] = {
            "contactList": "SystemMonitor-Canary",
            "source": "UnsubscribeHeader",
            "newTopicPreferences": {
                "unsubscribeAll": detail.get("unsubscribeAll", False),
                "topicSubscriptionStatus": [
                    {"topicName": "ExampleTopicName", "subscriptionStatus": "OptOut"}
                ],
            },
            "oldTopicPreferences": {"unsubscribeAll": False, "topicSubscriptionStatus": []},
        } | stamp
    elif event_type == "Delivery":
        event["delivery"] = {
            "processingTimeMillis": 546,
            "recipients": [recipient],
            "smtpResponse": "250 ok:  Message 64111812 accepted",
            "reportingMTA": "a8-70.smtp-out.amazonses.com",
            "remoteMtaIp": "127.0.2.0",
        } | stamp
    elif event_type == "Complaint":
        event["complaint"] = {
            "complainedRecipients": [{"emailAddress": recipient}],
            "complaintFeedbackType": "abuse",
        } | stamp
    elif event_type == "Send":
        event["send"] = {}
    return event


class SesPeer:
    retry_after_seconds = None
    # moto: MessageRejected "Email address not verified <sender>": the sender's fault.
    reject_code = RejectCode.SENDER_REJECTED

    def __init__(self, stage: BotoStage, signer: SnsSigner):
        self.stage = stage
        self.signer = signer

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        to = f"member+{new_id()[:8]}@example.test"
        sender = "stranger@unverified.test" if outcome == "reject" else None
        if outcome == "rate_limit":
            self.stage.error("SendEmail", to, "TooManyRequestsException", 429)
        if outcome == "timeout":
            self.stage.timeout("SendEmail", to)
        return OutboundMessage("email", to, "conformance body", subject="Hello", sender=sender)

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.BOUNCED

    def requests_recorded(self, idempotency_key: str) -> int:
        tag = [{"Name": "tidings_attempt", "Value": tag_value(idempotency_key)}]
        return self.stage.count("SendEmail", lambda p: p.get("EmailTags") == tag)

    def settle(self) -> None:
        pytest.skip("ses has no lookup to settle")

    def webhook(
        self,
        provider_message_id: str,
        idempotency_key: str,
        raw_status: str,
        *,
        signature: Signature = "valid",
        destination: str | None = None,
    ) -> WebhookRequest:
        kind = {"delivered": "Delivery", "sent": "Send"}.get(raw_status, raw_status)
        event = ses_event(kind, provider_message_id, idempotency_key, destination)
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        doc = self.signer.message(
            event,
            message_id=f"{provider_message_id}-{kind}",
            key=other if signature == "wrong_secret" else None,
        )
        if signature == "missing":
            del doc["Signature"]
        if signature == "tampered":
            doc["Message"] = doc["Message"].replace(f'"{kind}"', '"Bounce"')
        return WebhookRequest(
            "POST", "https://tidings.test/hooks/ses", {}, json.dumps(doc).encode()
        )


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        boto3.client("ses", region_name=REGION).verify_email_identity(EmailAddress=SENDER)
        yield


@pytest.fixture
def client(aws: None) -> Any:
    return boto_client("sesv2", SETTINGS, "ses", 10.0)


def make_adapter(client: Any, signer: SnsSigner, **kw: Any) -> SesAdapter:
    verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
    return SesAdapter(
        client,
        sender=SETTINGS["from"],
        configuration_set=SETTINGS["configuration_set"],
        sns_verifier=verifier,
        **kw,
    )


@pytest.fixture
def adapter(client: Any, signer: SnsSigner) -> SesAdapter:
    return make_adapter(client, signer)


@pytest.fixture
def stage(client: Any) -> BotoStage:
    return BotoStage(
        client, lambda op, p: (p.get("Destination") or {}).get("ToAddresses", [None])[0]
    )


class TestSesConformance(AdapterConformance):
    @pytest.fixture
    def peer(self, stage: BotoStage, signer: SnsSigner) -> SesPeer:
        return SesPeer(stage, signer)


# --- sending ------------------------------------------------------------------


def test_simple_send_reaches_moto_with_tags_and_configuration_set(
    adapter: SesAdapter, stage: BotoStage
) -> None:
    message = OutboundMessage("email", "member@example.test", "Your spot is free", "Waitlist")
    result = adapter.send(message, "offer:42:attempt:1")
    assert isinstance(result, Accepted)
    [sent] = sent_messages()
    assert (sent.id, sent.subject, sent.body) == (
        result.provider_message_id,
        "Waitlist",
        "Your spot is free",
    )
    assert sent.destinations["ToAddresses"] == ["member@example.test"]
    [(_, params)] = stage.calls
    assert params["ConfigurationSetName"] == "tidings-events"
    assert params["EmailTags"] == [{"Name": "tidings_attempt", "Value": "offer_3A42_3Aattempt_3A1"}]


def test_attachments_go_as_raw_mime_loaded_at_send_time(client: Any, signer: SnsSigner) -> None:
    loads: list[str] = []

    def loader(ref: AttachmentRef) -> bytes:
        loads.append(ref.id)
        return b"%PDF-1.7 report 8421 revision 7"

    adapter = make_adapter(client, signer, attachment_loader=loader)
    ref = AttachmentRef("report-8421", 7, "report.pdf", "application/pdf", "s3://reports/8421/7")
    message = OutboundMessage(
        "email", "ops@example.test", "Attached.", "Report", attachments=(ref,)
    )
    assert isinstance(adapter.send(message, "report:8421:revision:7:email"), Accepted)
    assert loads == ["report-8421"]
    [raw] = sent_messages()
    parsed = email.message_from_string(raw.raw_data)
    [attachment] = [part for part in parsed.walk() if part.get_filename()]
    assert attachment.get_filename() == "report.pdf"
    assert attachment.get_payload(decode=True) == b"%PDF-1.7 report 8421 revision 7"
    assert parsed["To"] == "ops@example.test" and parsed["Subject"] == "Report"


@pytest.mark.parametrize(
    ("code", "status", "kind", "normalized"),
    [
        ("TooManyRequestsException", 429, Retryable, RejectCode.RATE_LIMITED),
        ("MessageRejected", 400, Rejected, RejectCode.CONTENT_REJECTED),
        ("MailFromDomainNotVerifiedException", 400, Rejected, RejectCode.SENDER_REJECTED),
        ("AccountSuspendedException", 400, Rejected, RejectCode.ACCOUNT_RESTRICTED),
        ("SendingPausedException", 400, Rejected, RejectCode.ACCOUNT_RESTRICTED),
        ("LimitExceededException", 400, Rejected, RejectCode.UNKNOWN),
        ("InternalFailure", 500, Indeterminate, RejectCode.PROVIDER_ERROR),
    ],
)
def test_error_table(
    adapter: SesAdapter,
    stage: BotoStage,
    code: str,
    status: int,
    kind: type,
    normalized: RejectCode,
) -> None:
    stage.error("SendEmail", "member@example.test", code, status)
    result = adapter.send(OutboundMessage("email", "member@example.test", "x"), "k")
    assert isinstance(result, kind) and result.code is normalized
    assert sent_messages() == []


# SES's text for an identity that failed verification: the sender's, or in
# the sandbox the recipient's (docs.aws.amazon.com/ses/latest/dg/troubleshoot-error-messages.html).
UNVERIFIED = "Email address is not verified. The following identities failed the check in region "


@pytest.mark.parametrize(
    ("message", "normalized"),
    [
        (f"{UNVERIFIED}US-EAST-1: {SENDER}", RejectCode.SENDER_REJECTED),
        (f"{UNVERIFIED}US-EAST-1: tidings.test, {SENDER.upper()}", RejectCode.SENDER_REJECTED),
        (f"{UNVERIFIED}US-EAST-1: member@example.test", RejectCode.ACCOUNT_RESTRICTED),
        (f"{UNVERIFIED}US-EAST-1: member@example.test, other@...", RejectCode.ACCOUNT_RESTRICTED),
        # The model's own description of MessageRejected (sesv2 service-2.json).
        ("The message can't be sent because it contains invalid content.", None),
    ],
)
def test_message_rejected_says_whose_fault_and_suppresses_nobody(
    adapter: SesAdapter, stage: BotoStage, message: str, normalized: RejectCode | None
) -> None:
    error = {"Code": "MessageRejected", "Message": message}
    stage.error("SendEmail", "member@example.test", "MessageRejected", 400, Error=error)
    result = adapter.send(OutboundMessage("email", "member@example.test", "x"), "k")
    assert isinstance(result, Rejected) and result.provider_code == "MessageRejected"
    assert result.code is (normalized or RejectCode.CONTENT_REJECTED)
    assert feedback.fault(result.code.value) != "recipient"
    assert feedback.send_lesson(result.code.value) is None
    if normalized is not None:  # our side's refusal: the operator is alerted
        assert result.code.value in feedback.REFUSALS


def test_a_bad_request_is_the_requests_fault_whatever_its_text(adapter: SesAdapter) -> None:
    # SES answers BadRequest for any bad field, the sender's included; its
    # message text is no contract, so it never suppresses the recipient.
    result = adapter.send(OutboundMessage("email", "not an address", "x"), "k")
    assert isinstance(result, Rejected) and result.code is RejectCode.REQUEST_INVALID


# --- events ---------------------------------------------------------------------

EVENT_TABLE = [
    ("Send", {}, ObservedStatus.accepted, None),
    ("DeliveryDelay", {}, ObservedStatus.accepted, None),
    ("Delivery", {}, ObservedStatus.delivered, None),
    ("Open", {}, ObservedStatus.delivered, None),
    ("Click", {}, ObservedStatus.delivered, None),
    ("Complaint", {}, ObservedStatus.delivered, RejectCode.COMPLAINT),
    ("Bounce", {"bounceType": "Permanent"}, ObservedStatus.failed, RejectCode.BOUNCED),
    ("Bounce", {"bounceType": "Transient"}, ObservedStatus.undelivered, RejectCode.BOUNCED),
    ("Bounce", {"bounceType": "Undetermined"}, ObservedStatus.undelivered, RejectCode.BOUNCED),
    ("Reject", {}, ObservedStatus.failed, RejectCode.CONTENT_REJECTED),
    ("Rendering Failure", {}, ObservedStatus.failed, RejectCode.CONTENT_REJECTED),
    # A topic's opt-out is about one contact-list topic, which tidings does
    # not map to a purpose; unsubscribing from everything is the recipient's.
    ("Subscription", {}, ObservedStatus.unknown, None),
    ("Subscription", {"unsubscribeAll": True}, ObservedStatus.unknown, RejectCode.OPTED_OUT),
]


@pytest.mark.parametrize(("kind", "detail", "status", "code"), EVENT_TABLE)
def test_event_mapping_table(
    adapter: SesAdapter,
    signer: SnsSigner,
    kind: str,
    detail: dict[str, str],
    status: ObservedStatus,
    code: RejectCode | None,
) -> None:
    event = ses_event(kind, "EXAMPLE7c191be45-e9aedb9a", "offer:42:attempt:1", **detail)
    doc = signer.message(event)
    [observation] = adapter.verify_webhook(
        WebhookRequest("POST", "u", {}, json.dumps(doc).encode())
    )
    assert (observation.status, observation.code) == (status, code and code.value)
    assert observation.attempt_key == "offer:42:attempt:1"
    assert observation.provider_message_id == "EXAMPLE7c191be45-e9aedb9a"
    assert "recipient@example.com" not in repr(observation.raw)


def test_identity_notifications_without_event_publishing_map_too(
    adapter: SesAdapter, signer: SnsSigner
) -> None:
    event = ses_event("Bounce", "m-1", "k")
    event["notificationType"] = event.pop("eventType")
    [observation] = adapter.verify_webhook(
        WebhookRequest("POST", "u", {}, json.dumps(signer.message(event)).encode())
    )
    assert observation.status is ObservedStatus.failed


def test_tag_escaping_round_trips() -> None:
    for key in ["plain-key", "intent:7:attempt:1", "ünï_cödé key/1", "a_b"]:
        assert unescape_tag(escape_tag(key)) == key
        assert all(c.isalnum() or c in "-_" for c in escape_tag(key))
    long_key = "x:" * 200
    assert tag_value(long_key).startswith("sha256-") and len(tag_value(long_key)) <= 256


def test_built_from_settings_which_need_a_sender(aws: None) -> None:
    adapter = build("ses", SETTINGS)
    assert isinstance(adapter, SesAdapter) and "testing-secret" not in repr(adapter)
    with pytest.raises(ProviderConfigError, match="from"):
        build("ses", {"region": REGION})
