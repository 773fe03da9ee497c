"""Amazon SNS direct SMS against moto's ``mock_aws``.

moto really publishes (messages are readable from its backend) and treats
numbers ending in 99 as opted out. What moto cannot stage, a throttle or a
lost answer, is staged on the client through botocore's events (see
peer_support.BotoStage): a throttle is answered before the request reaches
moto, a lost answer is raised after moto has recorded the message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from tests.providers.conformance import AdapterConformance, Outcome
from tests.providers.peer_support import BotoStage, new_id
from tidings.providers.aws_base import boto_client
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, Indeterminate, RejectCode, Rejected, Retryable
from tidings.providers.settings import build
from tidings.providers.sns import SnsSmsAdapter

REGION = "us-east-1"
SETTINGS = {
    "region": REGION,
    "access_key_id": "testing",
    "secret_access_key": "testing-secret",
    "sender_id": "Tidings",
}


def published() -> dict[str, tuple[str, str]]:
    return dict(sns_backends[DEFAULT_ACCOUNT_ID][REGION].sms_messages)


class SnsPeer:
    retry_after_seconds = None
    reject_code = RejectCode.OPTED_OUT
    webhooks = False  # delivery status goes to CloudWatch Logs only

    def __init__(self, stage: BotoStage):
        self.stage = stage
        self.last_to = ""

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        digits = f"{int(new_id()[:8], 16) % 10**7:07d}"
        self.last_to = f"+1555{digits[:-2]}{'99' if outcome == 'reject' else '10'}"
        if outcome == "rate_limit":
            self.stage.error("Publish", self.last_to, "Throttling", 400)
        if outcome == "timeout":
            self.stage.timeout("Publish", self.last_to)
        return OutboundMessage("sms", self.last_to, "conformance body")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.UNREACHABLE

    def requests_recorded(self, idempotency_key: str) -> int:
        # SNS carries no key, and every send asks the opt-out check once: one
        # send of the last message handed out = one check for its number.
        return self.stage.count(
            "CheckIfPhoneNumberIsOptedOut", lambda p: p.get("phoneNumber") == self.last_to
        )

    def settle(self) -> None:
        pytest.skip("sns has no lookup")

    def webhook(self, *args: Any, **kwargs: Any) -> WebhookRequest:
        raise AssertionError("sns sends no webhooks")


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def client(aws: None) -> Any:
    return boto_client("sns", SETTINGS, "sns", 10.0)


@pytest.fixture
def adapter(client: Any) -> SnsSmsAdapter:
    return SnsSmsAdapter(client, sender_id="Tidings")


@pytest.fixture
def stage(client: Any) -> BotoStage:
    destination = {"Publish": "PhoneNumber", "CheckIfPhoneNumberIsOptedOut": "phoneNumber"}
    return BotoStage(client, lambda op, p: p.get(destination.get(op, ""), None))


class TestSnsConformance(AdapterConformance):
    @pytest.fixture
    def peer(self, stage: BotoStage) -> SnsPeer:
        return SnsPeer(stage)


def test_publish_reaches_moto_with_the_sms_attributes(adapter: SnsSmsAdapter, stage: BotoStage):
    result = adapter.send(OutboundMessage("sms", "+15550001234", "Your spot is free"), "k")
    assert isinstance(result, Accepted)
    assert published()[result.provider_message_id] == ("+15550001234", "Your spot is free")
    [(_, params)] = [call for call in stage.calls if call[0] == "Publish"]
    attributes = params["MessageAttributes"]
    assert attributes["AWS.SNS.SMS.SMSType"] == {
        "DataType": "String",
        "StringValue": "Transactional",
    }
    assert attributes["AWS.SNS.SMS.SenderID"]["StringValue"] == "Tidings"


def test_an_opted_out_number_is_rejected_and_nothing_is_published(adapter: SnsSmsAdapter) -> None:
    result = adapter.send(OutboundMessage("sms", "+15550001299", "x"), "k")
    assert isinstance(result, Rejected) and result.code is RejectCode.OPTED_OUT
    assert published() == {}


def test_without_the_check_an_opted_out_number_is_published(client: Any) -> None:
    adapter = SnsSmsAdapter(client, check_opt_out=False)
    assert isinstance(adapter.send(OutboundMessage("sms", "+15550001299", "x"), "k"), Accepted)
    assert len(published()) == 1


def test_an_origination_number_and_promotional_purpose(client: Any, stage: BotoStage) -> None:
    adapter = SnsSmsAdapter(client, origination_number="+15550009999")
    message = OutboundMessage("sms", "+15550001234", "sale", metadata={"purpose": "promotional"})
    assert isinstance(adapter.send(message, "k"), Accepted)
    attributes = next(p for op, p in stage.calls if op == "Publish")["MessageAttributes"]
    assert attributes["AWS.MM.SMS.OriginationNumber"]["StringValue"] == "+15550009999"
    assert attributes["AWS.SNS.SMS.SMSType"]["StringValue"] == "Promotional"


def test_an_invalid_parameter_is_the_requests_fault_whatever_its_text(client: Any) -> None:
    # SNS's InvalidParameter covers every field; its text is no contract.
    adapter = SnsSmsAdapter(client, check_opt_out=False)
    result = adapter.send(OutboundMessage("sms", "0555-1234", "x"), "k")
    assert isinstance(result, Rejected) and result.code is RejectCode.REQUEST_INVALID


@pytest.mark.parametrize(
    ("operation", "code", "status", "kind", "normalized"),
    [
        ("Publish", "Throttling", 400, Retryable, RejectCode.RATE_LIMITED),
        ("Publish", "InternalError", 500, Indeterminate, RejectCode.PROVIDER_ERROR),
        ("Publish", "AuthorizationError", 403, Rejected, RejectCode.AUTH_FAILED),
        ("Publish", "KMSDisabled", 400, Rejected, RejectCode.AUTH_FAILED),
        # A failing pre-check published nothing: retryable even on a 5xx.
        ("CheckIfPhoneNumberIsOptedOut", "Throttled", 429, Retryable, RejectCode.RATE_LIMITED),
        (
            "CheckIfPhoneNumberIsOptedOut",
            "InternalError",
            500,
            Retryable,
            RejectCode.PROVIDER_ERROR,
        ),
    ],
)
def test_error_table(
    adapter: SnsSmsAdapter,
    stage: BotoStage,
    operation: str,
    code: str,
    status: int,
    kind: type,
    normalized: RejectCode,
) -> None:
    stage.error(operation, "+15550001234", code, status)
    result = adapter.send(OutboundMessage("sms", "+15550001234", "x"), "k")
    assert isinstance(result, kind) and result.code is normalized
    assert published() == {}


def test_a_lost_answer_to_the_pre_check_is_retryable(adapter: SnsSmsAdapter, stage: BotoStage):
    stage.timeout("CheckIfPhoneNumberIsOptedOut", "+15550001234")
    result = adapter.send(OutboundMessage("sms", "+15550001234", "x"), "k")
    assert isinstance(result, Retryable) and published() == {}


def test_no_lookups_and_no_webhooks(adapter: SnsSmsAdapter) -> None:
    with pytest.raises(ProviderConfigError):
        adapter.status("any")
    with pytest.raises(ProviderConfigError):
        adapter.verify_webhook(WebhookRequest("POST", "https://t/", {}, b"{}"))


def test_settings_are_checked_and_secrets_stay_out_of_repr(aws: None) -> None:
    adapter = build("sns", SETTINGS | {"check_opt_out": "no", "sms_type": "Promotional"})
    assert isinstance(adapter, SnsSmsAdapter) and "testing-secret" not in repr(adapter)
    with pytest.raises(ProviderConfigError, match="region"):
        build("sns", {"access_key_id": "a"})
    with pytest.raises(ProviderConfigError, match="sms_type"):
        build("sns", SETTINGS | {"sms_type": "urgent"})
