"""Only a fact about the recipient suppresses it (issue #37, items 1 and 3).

Each case sends one intent through the worker with the real adapter, over
a peer answering exactly what the provider documents for that situation,
and then reads the blocks the database holds for the destination:

- a fact about the request, the sender, the account or its configuration
  (Postmark 300, Vonage 3 and 29, the AWS SMS sandbox, SES refusing our
  sender) fails the intent and blocks nobody;
- a fact about the recipient (a number barred or de-activated, a number
  that opted out at AWS) still blocks the destination.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from tests.providers import test_postmark as postmark
from tests.providers import test_ses as ses
from tests.providers import test_vonage as vonage
from tests.providers.peer_support import SnsSigner
from tests.providers.test_aws_sms import make_adapter as aws_sms_adapter
from tests.providers.test_aws_sms import sms_client
from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.observe import apply_observation
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.domain.keys import attempt_key
from tidings.providers.aws_base import boto_client
from tidings.providers.base import ProviderAdapter
from tidings.providers.messages import WebhookRequest
from tidings.providers.postmark import PostmarkAdapter
from tidings.providers.vonage import VonageAdapter

PHONE = "+14155550123"
EMAIL = "reader@example.org"


# --- peers answering one documented answer ----------------------------------------


class OneAnswer:
    """An httpx peer that answers every request with one documented answer."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body = status, body
        self.requests = 0

    def client(self, base_url: str) -> httpx.Client:
        return httpx.Client(base_url=base_url, transport=httpx.MockTransport(self._answer))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return httpx.Response(self.status, json=self.body)


def postmark_answering(status: int, error_code: int, message: str) -> Callable[[], Any]:
    # "HTTP response codes" and "API error codes", https://postmarkapp.com/developer/api/overview:
    # a 422 whose body is {"ErrorCode": n, "Message": "details"}.
    def build() -> Iterator[tuple[ProviderAdapter, Callable[[], int]]]:
        peer = OneAnswer(status, {"ErrorCode": error_code, "Message": message})
        client = peer.client("https://api.postmarkapp.com")
        with PostmarkAdapter(postmark.TOKEN, sender="notify@tidings.test", client=client) as a:
            yield a, lambda: peer.requests

    return build


def vonage_answering(status: str, error_text: str) -> Callable[[], Any]:
    # The SMS API answers HTTP 200 with messages[].status and error-text
    # (tests/providers/peers/vonage_sms.yml: the Error schema and x-errors).
    def build() -> Iterator[tuple[ProviderAdapter, Callable[[], int]]]:
        body = {"message-count": "1", "messages": [{"status": status, "error-text": error_text}]}
        peer = OneAnswer(200, body)
        client = peer.client("https://rest.nexmo.com")
        options = {"sender": "Tidings", "signature_secret": vonage.SIGNATURE_SECRET}
        with VonageAdapter(vonage.API_KEY, vonage.API_SECRET, client=client, **options) as a:
            yield a, lambda: peer.requests

    return build


def aws_sms_answering(code: str, reason: str) -> Callable[[], Any]:
    # Codes and reasons from botocore's model of pinpoint-sms-voice-v2
    # (ConflictExceptionReason, ValidationExceptionReason), which is what
    # SendTextMessage raises; moto does not model SendTextMessage.
    def build() -> Iterator[tuple[ProviderAdapter, Callable[[], int]]]:
        client = sms_client()
        with Stubber(client) as stubber:
            fields = {"Reason": reason}
            stubber.add_client_error("send_text_message", code, reason, 400, modeled_fields=fields)
            adapter = aws_sms_adapter(client, SnsSigner(), origination_identity="+12065550152")
            yield adapter, lambda: _answered(stubber)

    return build


def ses_refusing_an_unverified_sender() -> Iterator[tuple[ProviderAdapter, Callable[[], int]]]:
    # moto models SES v2 SendEmail: an unverified sender identity is refused
    # with MessageRejected ("Email address is not verified"), as SES does.
    with mock_aws():
        client = boto_client("sesv2", ses.SETTINGS, "ses", 10.0)  # no identity verified
        answered: list[str] = []
        client.meta.events.register(
            "after-call.sesv2.SendEmail", lambda **kw: answered.append(kw["model"].name)
        )
        yield ses.make_adapter(client, SnsSigner()), lambda: len(answered)


def ses_bad_request_about_the_sender() -> Iterator[tuple[ProviderAdapter, Callable[[], int]]]:
    # A From with no domain: SES answers "Missing final '@domain'" about the
    # sender (reported in cloud-custodian/cloud-custodian#885 and
    # boto/boto#351); SES v2 raises it as BadRequestException.
    client = boto_client("sesv2", ses.SETTINGS, "ses", 10.0)
    with Stubber(client) as stubber:
        answer = "Missing final '@domain'"
        stubber.add_client_error("send_email", "BadRequestException", answer, 400)
        signer = SnsSigner()
        adapter = ses.make_adapter(client, signer)
        yield adapter, lambda: _answered(stubber)


def _answered(stubber: Stubber) -> int:
    stubber.assert_no_pending_responses()  # the staged answer was taken
    return 1


@dataclass(frozen=True)
class Case:
    channel: str
    peer: Callable[[], Iterator[tuple[ProviderAdapter, Callable[[], int]]]]
    blocks: frozenset[str]  # what the database holds for the destination afterwards


NONE: frozenset[str] = frozenset()
EMPTY_BODY = "Provide either email TextBody or HtmlBody or both."
NOT_VERIFIED = "DESTINATION_PHONE_NUMBER_NOT_VERIFIED"

REQUEST_LEVEL = [
    pytest.param(
        # Postmark's own example of a 422 (support article "Troubleshooting
        # 422 Unprocessable Entity Errors").
        Case(
            "email",
            postmark_answering(
                422,
                300,
                "Invalid 'From' address: 'sender@example.com' is not a verified sender signature.",
            ),
            NONE,
        ),
        id="postmark-300-unverified-from",
    ),
    pytest.param(
        # "What does Error Code: '300' mean?" (Postmark support article 1180):
        # an empty body is one of its three common causes.
        Case("email", postmark_answering(422, 300, EMPTY_BODY), NONE),
        id="postmark-300-empty-body",
    ),
    pytest.param(
        Case("sms", vonage_answering("3", "Invalid Parameters"), NONE),
        id="vonage-3-invalid-parameters",
    ),
    pytest.param(
        Case("sms", vonage_answering("29", "Non White-listed Destination - rejected"), NONE),
        id="vonage-29-demo-account-whitelist",
    ),
    pytest.param(
        Case("sms", vonage_answering("15", "Illegal Sender Address - rejected"), NONE),
        id="vonage-15-sender-not-allowed",
    ),
    pytest.param(
        Case("sms", aws_sms_answering("ConflictException", NOT_VERIFIED), NONE),
        id="aws-sms-sandbox-number-not-verified",
    ),
    pytest.param(
        Case("sms", aws_sms_answering("ValidationException", "DESTINATION_COUNTRY_BLOCKED"), NONE),
        id="aws-sms-country-blocked",
    ),
    pytest.param(
        Case("email", ses_refusing_an_unverified_sender, NONE),
        id="ses-unverified-sender",
    ),
    pytest.param(
        Case("email", ses_bad_request_about_the_sender, NONE),
        id="ses-bad-request-about-the-sender",
    ),
]

RECIPIENT_LEVEL = [
    pytest.param(
        # vonage_sms.yml x-errors 33: "The number you are trying to send
        # messages to is de-activated and may not receive them."
        Case("sms", vonage_answering("33", "Number De-activated"), frozenset({"suppression"})),
        id="vonage-33-number-deactivated",
    ),
    pytest.param(
        # vonage_sms.yml x-errors 7: "The number you are trying to send
        # messages to is blacklisted and may not receive them."
        Case("sms", vonage_answering("7", "Number Barred"), frozenset({"opt_out"})),
        id="vonage-7-number-barred",
    ),
    pytest.param(
        Case(
            "sms",
            aws_sms_answering("ConflictException", "DESTINATION_PHONE_NUMBER_OPTED_OUT"),
            frozenset({"opt_out"}),
        ),
        id="aws-sms-number-opted-out",
    ),
]


def _send_one(tidings: Tidings, adapter: ProviderAdapter, channel: str) -> Any:
    sms = channel == "sms"
    tidings.publish_template(
        "rule", channel=channel, subject=None if sms else "Hello", body="Your code is ready."
    )
    intent = tidings.notify(
        idempotency_key="suppression-rule-1",
        channel=channel,
        recipient={"ref": "reader", ("phone" if sms else "email"): PHONE if sms else EMAIL},
        template="rule",
        purpose="transactional",
        event_class="rule",
    )
    worker = Worker(tidings.runtime, {channel: adapter}, config=WorkerConfig(seed=7))
    assert worker.dispatch_once() == 1
    return tidings.get(intent.id)


def _blocks(tidings: Tidings) -> set[str]:
    with tidings.db.transaction() as conn:
        rows = conn.execute(
            "SELECT 'opt_out' AS block FROM opt_outs"
            " UNION ALL SELECT 'suppression' FROM suppressions"
        ).fetchall()
    return {row["block"] for row in rows}


@pytest.mark.parametrize("case", REQUEST_LEVEL + RECIPIENT_LEVEL)
def test_only_a_fact_about_the_recipient_blocks_it(tidings: Tidings, case: Case) -> None:
    for adapter, requests_seen in case.peer():
        after = _send_one(tidings, adapter, case.channel)
        assert requests_seen() == 1  # the provider did answer: the case was exercised
        assert after.state is IntentState.FAILED, (after.state, after.decision_code)
        assert _blocks(tidings) == case.blocks, after.decision_code


# --- receipts: Postmark's bounce types and subscription changes ---------------------

RECEIPTS = [
    pytest.param(
        # "Bounce types" (https://postmarkapp.com/developer/api/bounce-api#bounce-types):
        # HardBounce, "the server was unable to deliver your message (ex: unknown
        # user, mailbox not found)", and Postmark deactivates the address.
        ("Bounce", {"Type": "HardBounce", "TypeCode": 1}, frozenset({"suppression"})),
        id="postmark-hard-bounce",
    ),
    pytest.param(
        # Same table: Blocked (TypeCode 100000), "ISP block", a verdict on the
        # sending (content, reputation), which Postmark does not deactivate.
        ("Bounce", {"Type": "Blocked", "TypeCode": 100000}, NONE),
        id="postmark-blocked-bounce",
    ),
    pytest.param(
        # "Subscription change webhook"
        # (https://postmarkapp.com/developer/webhooks/subscription-change-webhook):
        # SuppressionReason ManualSuppression is the recipient unsubscribing.
        (
            "SubscriptionChange",
            {"SuppressSending": True, "SuppressionReason": "ManualSuppression"},
            frozenset({"opt_out"}),
        ),
        id="postmark-subscription-change-unsubscribe",
    ),
    pytest.param(
        # Same page: a HardBounce reason is a bounce, not an opt-out by the person.
        (
            "SubscriptionChange",
            {"SuppressSending": True, "SuppressionReason": "HardBounce"},
            frozenset({"suppression"}),
        ),
        id="postmark-subscription-change-hard-bounce",
    ),
    pytest.param(
        # Same page: SuppressSending false is a reactivation; it blocks nothing.
        ("SubscriptionChange", {"SuppressSending": False, "SuppressionReason": None}, NONE),
        id="postmark-subscription-change-reactivated",
    ),
]


@pytest.mark.parametrize("receipt", RECEIPTS)
def test_only_a_receipt_about_the_recipient_blocks_it(
    tidings: Tidings, clock: ManualClock, receipt: tuple[str, dict[str, Any], frozenset[str]]
) -> None:
    record, fields, expected = receipt
    with postmark.make_adapter(postmark.PostmarkFake()) as adapter:
        sent = _send_one(tidings, adapter, "email")
        [attempt] = sent.attempts
        assert sent.state is IntentState.ACCEPTED and attempt.provider_message_id
        key = attempt_key(sent.id, 1)
        event = postmark.postmark_event(record, attempt.provider_message_id, key, EMAIL, **fields)
        auth = postmark.basic(postmark.HOOK_USER, postmark.HOOK_PASSWORD)
        headers = {"Authorization": auth, "Content-Type": "application/json"}
        hook = WebhookRequest("POST", "", headers, json.dumps(event).encode())
        [observation] = adapter.verify_webhook(hook)
        with tidings.db.transaction() as conn:
            apply_observation(conn, observation, "webhook", clock.now())
        assert _blocks(tidings) == expected, observation
