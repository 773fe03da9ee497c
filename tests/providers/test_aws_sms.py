"""AWS End User Messaging SMS: request shape through botocore's Stubber, events through SNS.

moto does not implement SendTextMessage, so the peer is botocore's Stubber
over the real pinpoint-sms-voice-v2 service model: botocore validates every
request against the model before the stub answers, and the stubbed answers
and errors are validated against it too. Events arrive as SNS notifications
signed with a locally generated key and certificate (see peer_support), and
the SNS verifier is tested here against both signature versions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.providers.conformance import AdapterConformance, Outcome, Signature
from tests.providers.peer_support import CERT_URL, TOPIC_ARN, BotoStage, SnsSigner, new_id
from tidings.providers.aws_sms import AwsSmsAdapter
from tidings.providers.errors import InvalidSignature, ProviderError, ProviderUnavailable
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
)
from tidings.providers.settings import adapter_from_env
from tidings.providers.sns_signature import SnsVerifier, is_sns_cert_url

OPERATION = "SendTextMessage"


def sms_client() -> Any:
    return boto3.client(
        "pinpoint-sms-voice-v2",
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="not-a-secret",
    )


def sms_event(message_id: str, key: str, event_type: str, to: str | None = None) -> dict[str, Any]:
    # "Messaging Events" in the End User Messaging guide: the SMS event record.
    return {
        "eventType": event_type,
        "eventVersion": "1.0",
        "eventTimestamp": 1893456000000 + len(event_type),
        "isFinal": event_type not in ("TEXT_QUEUED", "TEXT_PENDING"),
        "originationPhoneNumber": "+12065550152",
        "destinationPhoneNumber": to or "+14255550156",
        "isInternationalSend": False,
        "mcc": "310",
        "mnc": "800",
        "messageId": message_id,
        "messageRequestTimestamp": 1893455999000,
        "messageEncoding": "GSM",
        "messageType": "TRANSACTIONAL",
        "messageStatus": event_type.removeprefix("TEXT_"),
        "messageStatusDescription": "staged by the test peer",
        "context": {"tidings_attempt": key},
        "totalMessageParts": 1,
        "totalMessagePrice": 0.00645,
        "totalCarrierFee": 0.0,
    }


class AwsSmsPeer:
    retry_after_seconds = None  # AWS promises no retry time
    reject_code = RejectCode.OPTED_OUT

    def __init__(self, stubber: Stubber, stage: BotoStage, signer: SnsSigner):
        self.stubber = stubber
        self.stage = stage
        self.signer = signer

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        to = f"+1206{int(new_id()[:8], 16) % 10**7:07d}"
        if outcome == "rate_limit":
            self.stubber.add_client_error(
                "send_text_message", "ThrottlingException", "Rate exceeded", 400
            )
        elif outcome == "reject":
            self.stubber.add_client_error(
                "send_text_message",
                "ConflictException",
                "destination opted out",
                400,
                modeled_fields={
                    "Reason": "DESTINATION_PHONE_NUMBER_OPTED_OUT",
                    "ResourceType": "opted-out-number",
                    "ResourceId": to,
                },
            )
        else:
            self.stubber.add_response("send_text_message", {"MessageId": new_id()})
        if outcome == "timeout":
            self.stage.timeout(OPERATION, to)
        return OutboundMessage("sms", to, "conformance body")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.UNREACHABLE

    def requests_recorded(self, idempotency_key: str) -> int:
        return self.stage.count(
            OPERATION, lambda p: p.get("Context", {}).get("tidings_attempt") == idempotency_key
        )

    def settle(self) -> None:
        pytest.skip("aws_sms has no lookup to settle")

    def webhook(
        self,
        provider_message_id: str,
        idempotency_key: str,
        raw_status: str,
        *,
        signature: Signature = "valid",
        destination: str | None = None,
    ) -> WebhookRequest:
        event_type = {"delivered": "TEXT_DELIVERED", "sent": "TEXT_PENDING"}.get(
            raw_status, raw_status
        )
        event = sms_event(provider_message_id, idempotency_key, event_type, destination)
        sns_id = f"{provider_message_id}-{event_type}"  # a redelivery keeps its MessageId
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key = other if signature == "wrong_secret" else None
        doc = self.signer.message(event, message_id=sns_id, key=key)
        if signature == "missing":
            del doc["Signature"]
        if signature == "tampered":
            doc["Message"] = doc["Message"].replace(event_type, "TEXT_BLOCKED")
        return WebhookRequest(
            "POST", "https://tidings.test/hooks/aws_sms", {}, json.dumps(doc).encode()
        )


@pytest.fixture
def client() -> Any:
    return sms_client()


@pytest.fixture
def stage(client: Any) -> BotoStage:
    return BotoStage(client, lambda op, params: params.get("DestinationPhoneNumber"))


@pytest.fixture
def stubber(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as stubber:
        yield stubber


def make_adapter(client: Any, signer: SnsSigner, **kw: Any) -> AwsSmsAdapter:
    verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
    return AwsSmsAdapter(client, sns_verifier=verifier, **kw)


class TestAwsSmsConformance(AdapterConformance):
    @pytest.fixture
    def adapter(self, client: Any, signer: SnsSigner, stubber: Stubber) -> AwsSmsAdapter:
        return make_adapter(client, signer, origination_identity="+12065550152")

    @pytest.fixture
    def peer(self, stubber: Stubber, stage: BotoStage, signer: SnsSigner) -> AwsSmsPeer:
        return AwsSmsPeer(stubber, stage, signer)


# --- the request, checked against the real service model ------------------------


def test_send_text_message_request_shape(client: Any, signer: SnsSigner, stubber: Stubber) -> None:
    adapter = make_adapter(
        client, signer, origination_identity="pool-123", configuration_set="tidings-events"
    )
    expected = {
        "DestinationPhoneNumber": "+12065550100",
        "OriginationIdentity": "pool-123",
        "MessageBody": "Your spot is free",
        "MessageType": "TRANSACTIONAL",
        "ConfigurationSetName": "tidings-events",
        "Context": {"tidings_attempt": "offer-7:attempt:1"},
        "TimeToLive": 259200,  # clamped to the model's maximum
    }
    stubber.add_response("send_text_message", {"MessageId": "msg-1"}, expected)
    message = OutboundMessage("sms", "+12065550100", "Your spot is free", validity_seconds=10**7)
    assert adapter.send(message, "offer-7:attempt:1") == Accepted("msg-1")
    stubber.assert_no_pending_responses()


def test_promotional_purpose_and_sender_override(client: Any, signer: SnsSigner, stubber: Stubber):
    adapter = make_adapter(client, signer, origination_identity="pool-123")
    expected = {
        "DestinationPhoneNumber": "+12065550100",
        "OriginationIdentity": "+12065550199",
        "MessageBody": "sale",
        "MessageType": "PROMOTIONAL",
        "Context": ANY,
    }
    stubber.add_response("send_text_message", {"MessageId": "m"}, expected)
    message = OutboundMessage(
        "sms", "+12065550100", "sale", sender="+12065550199", metadata={"purpose": "marketing"}
    )
    assert isinstance(adapter.send(message, "k"), Accepted)


def test_a_request_the_model_refuses_never_leaves(signer: SnsSigner) -> None:
    # DestinationPhoneNumber has a minimum length of 1 in the model: botocore
    # refuses before any request is made (no stub is queued, none is needed).
    adapter = make_adapter(sms_client(), signer)
    result = adapter.send(OutboundMessage("sms", "", "x"), "k")
    assert isinstance(result, Rejected) and "DestinationPhoneNumber" in result.detail


@pytest.mark.parametrize(
    ("code", "fields", "kind", "normalized"),
    [
        ("ThrottlingException", {}, Retryable, RejectCode.RATE_LIMITED),
        (
            "ServiceQuotaExceededException",
            {"Reason": "MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT"},
            Retryable,
            RejectCode.RATE_LIMITED,
        ),
        ("InternalServerException", {"RequestId": "r"}, Indeterminate, RejectCode.PROVIDER_ERROR),
        ("AccessDeniedException", {"Reason": "ACCOUNT_DISABLED"}, Rejected, RejectCode.AUTH_FAILED),
        (
            "ValidationException",
            {"Reason": "DESTINATION_COUNTRY_BLOCKED"},
            Rejected,
            RejectCode.ACCOUNT_RESTRICTED,  # the account's country settings, not the number
        ),
        (
            "ValidationException",
            {"Reason": "DESTINATION_PHONE_NUMBER_NOT_VERIFIED"},
            Rejected,
            RejectCode.ACCOUNT_RESTRICTED,  # the sandbox sends only to verified numbers
        ),
        (
            "ValidationException",
            {"Reason": "INVALID_IDENTITY_FOR_DESTINATION_COUNTRY"},
            Rejected,
            RejectCode.SENDER_REJECTED,  # our origination identity, not the number
        ),
        (
            "ConflictException",
            {"Reason": "DESTINATION_PHONE_NUMBER_OPTED_OUT"},
            Rejected,
            RejectCode.OPTED_OUT,
        ),
        ("ResourceNotFoundException", {"ResourceType": "pool"}, Rejected, RejectCode.UNKNOWN),
    ],
)
def test_service_errors(
    client: Any,
    signer: SnsSigner,
    stubber: Stubber,
    code: str,
    fields: dict[str, str],
    kind: type,
    normalized: RejectCode,
) -> None:
    status = 500 if code == "InternalServerException" else 400
    stubber.add_client_error("send_text_message", code, "staged", status, modeled_fields=fields)
    result = make_adapter(client, signer).send(OutboundMessage("sms", "+12065550100", "x"), "k")
    assert isinstance(result, kind) and result.code is normalized


# --- events ---------------------------------------------------------------------

EVENT_TABLE = [
    ("TEXT_QUEUED", ObservedStatus.accepted, None),
    ("TEXT_PENDING", ObservedStatus.accepted, None),
    ("TEXT_SUCCESSFUL", ObservedStatus.delivered, None),
    ("TEXT_DELIVERED", ObservedStatus.delivered, None),
    ("TEXT_TTL_EXPIRED", ObservedStatus.undelivered, RejectCode.TIMEOUT),
    ("TEXT_CARRIER_UNREACHABLE", ObservedStatus.undelivered, RejectCode.UNREACHABLE),
    ("TEXT_UNREACHABLE", ObservedStatus.undelivered, RejectCode.UNREACHABLE),
    # AWS's "we do not know what happened" after 72 hours: not a non-delivery
    # that a resend may fix (that would invite a duplicate).
    ("TEXT_UNKNOWN", ObservedStatus.unknown, None),
    ("TEXT_BLOCKED", ObservedStatus.failed, RejectCode.CARRIER_FILTERED),
    ("TEXT_INVALID", ObservedStatus.failed, RejectCode.INVALID_DESTINATION),
    ("TEXT_INVALID_MESSAGE", ObservedStatus.failed, RejectCode.CONTENT_REJECTED),
    ("TEXT_CARRIER_BLOCKED", ObservedStatus.failed, RejectCode.CARRIER_FILTERED),
    ("TEXT_SPAM", ObservedStatus.failed, RejectCode.CARRIER_FILTERED),
    ("TEXT_PROTECT_BLOCKED", ObservedStatus.failed, RejectCode.CONTENT_REJECTED),
    ("VOICE_COMPLETED", ObservedStatus.unknown, None),
]


@pytest.mark.parametrize(("event_type", "status", "code"), EVENT_TABLE)
def test_event_mapping_table(
    client: Any, signer: SnsSigner, event_type: str, status: ObservedStatus, code: RejectCode | None
) -> None:
    doc = signer.message(sms_event("m-1", "offer:attempt:1", event_type))
    [observation] = make_adapter(client, signer).verify_webhook(
        WebhookRequest("POST", "https://t/", {}, json.dumps(doc).encode())
    )
    assert (observation.status, observation.code) == (status, code and code.value)
    assert observation.attempt_key == "offer:attempt:1"
    assert observation.occurred_at is not None and observation.occurred_at.year == 2030
    assert "+14255550156" not in repr(observation.raw)


# --- the SNS verifier (shared with SES) ------------------------------------------


def post(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


@pytest.mark.parametrize("version", ["1", "2"])
def test_both_signature_versions_verify(signer: SnsSigner, version: str) -> None:
    verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
    message = verifier.verify(post(signer.message({"x": 1}, version=version, Subject="hi")))
    assert message.type == "Notification" and json.loads(message.message) == {"x": 1}


def test_certificates_are_cached(signer: SnsSigner) -> None:
    verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
    for _ in range(3):
        verifier.verify(post(signer.message({"x": 1})))
    assert signer.fetched == [CERT_URL]


def test_subscription_confirmations_verify_and_yield_no_observations(
    client: Any, signer: SnsSigner
) -> None:
    doc = signer.message(
        "You have chosen to subscribe to the topic ...",
        kind="SubscriptionConfirmation",
        SubscribeURL="https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=t",
        Token="t",
    )
    assert (
        make_adapter(client, signer).verify_webhook(WebhookRequest("POST", "u", {}, post(doc)))
        == []
    )
    verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
    assert verifier.verify(post(doc)).subscribe_url.startswith("https://sns.")


@pytest.mark.parametrize(
    "url",
    [
        "http://sns.us-east-1.amazonaws.com/cert.pem",
        "https://sns.us-east-1.amazonaws.com.evil.test/cert.pem",
        "https://evil.test/sns.us-east-1.amazonaws.com/cert.pem",
        "https://s3.amazonaws.com/cert.pem",
        "https://sns.us-east-1.amazonaws.com:8443/cert.pem",
        "https://user@sns.us-east-1.amazonaws.com/cert.pem",
        "https://sns.us-east-1.amazonaws.com/cert.txt",
    ],
)
def test_certificate_urls_off_sns_hosts_are_refused_before_any_fetch(
    signer: SnsSigner, url: str
) -> None:
    assert not is_sns_cert_url(url)
    verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
    with pytest.raises(InvalidSignature, match="SigningCertURL"):
        verifier.verify(post(signer.message({"x": 1}, cert_url=url)))
    assert signer.fetched == []


def test_sns_urls_in_all_partitions_are_accepted() -> None:
    assert is_sns_cert_url("https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-a.pem")
    assert is_sns_cert_url(
        "https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-a.pem"
    )


def test_refusals(signer: SnsSigner) -> None:
    verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
    good = signer.message({"x": 1})
    cases = {
        "not signed": {k: v for k, v in good.items() if k != "Signature"},
        "mismatch": good | {"Message": '{"x": 2}'},
        "SignatureVersion": good | {"SignatureVersion": "3"},
        "unexpected topic": signer.message({"x": 1}, topic_arn=TOPIC_ARN + "-other"),
        "Type": good | {"Type": "Surprise"},
        "base64": good | {"Signature": "%%%"},
    }
    for reason, doc in cases.items():
        with pytest.raises(InvalidSignature, match=reason):
            verifier.verify(post(doc))
    with pytest.raises(InvalidSignature, match="JSON"):
        verifier.verify(b"<xml/>")


def test_a_certificate_not_issued_to_sns_is_refused() -> None:
    impostor = SnsSigner(common_name="www.example.test")
    with pytest.raises(InvalidSignature, match="SNS host"):
        verifier = SnsVerifier(cert_fetcher=impostor.fetch, topic_arns=[TOPIC_ARN])
        verifier.verify(post(impostor.message({"x": 1})))


def test_an_expired_certificate_is_refused(signer: SnsSigner) -> None:
    later = SnsVerifier(
        cert_fetcher=signer.fetch,
        topic_arns=[TOPIC_ARN],
        clock=lambda: 4_102_444_800.0,  # 2100
    )
    stamp = datetime.fromtimestamp(4_102_444_800.0, UTC)
    with pytest.raises(InvalidSignature, match="validity"):
        later.verify(post(signer.message({"x": 1}, timestamp=stamp)))


def test_a_certificate_that_cannot_be_fetched_is_not_a_bad_signature(signer: SnsSigner) -> None:
    def unreachable(url: str) -> bytes:
        raise OSError("network down")

    with pytest.raises(ProviderError) as raised:
        verifier = SnsVerifier(cert_fetcher=unreachable, topic_arns=[TOPIC_ARN])
        verifier.verify(post(signer.message({"x": 1})))
    assert isinstance(raised.value, ProviderUnavailable)  # the caller answers 5xx


def test_built_from_env_without_secrets_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {
        "TIDINGS_AWS_SMS_REGION": "eu-west-1",
        "TIDINGS_AWS_SMS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "TIDINGS_AWS_SMS_SECRET_ACCESS_KEY": "very-secret-key",
        "TIDINGS_AWS_SMS_FROM": "pool-123",
        "TIDINGS_AWS_SMS_SNS_TOPIC_ARNS": f"{TOPIC_ARN}, arn:aws:sns:eu-west-1:1:b",
    }
    adapter = adapter_from_env("aws_sms", environ)
    assert isinstance(adapter, AwsSmsAdapter) and "very-secret-key" not in repr(adapter)
    config = adapter._client.meta.config
    assert config.retries["total_max_attempts"] == 1  # botocore must never resend on its own
