"""Receipts feed suppression: from each provider's webhook to the next decision.

An intent is sent through the worker with the real adapter over its test
peer (tests/providers: the fakes replay each provider's published answers);
the provider's receipt, in its published shape and signed or authenticated
the way that provider does it, is posted to the HTTP webhook route; the
next intent to the same destination is then decided by the worker. An
unsubscribe or STOP opts the destination out (OPTED_OUT), a spam complaint
and a hard bounce suppress it (COMPLAINED, BOUNCED), a soft bounce changes
nothing, and each block keeps its evidence.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import boto3
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from fastapi.testclient import TestClient
from moto import mock_aws

from tests.integration.dispatch_helpers import publish_offer_template
from tests.providers import test_postmark as postmark
from tests.providers import test_sendgrid as sendgrid
from tests.providers import test_ses as ses
from tests.providers import test_vonage as vonage
from tests.providers import twilio_peer as twilio
from tests.providers.peer_support import TOPIC_ARN, SnsSigner
from tidings import IntentState, Tidings
from tidings.api.app import create_app
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.domain.keys import attempt_key
from tidings.policies import builtin_document
from tidings.providers.aws_base import boto_client
from tidings.providers.base import ProviderAdapter
from tidings.providers.messages import WebhookRequest
from tidings.providers.sns_signature import SnsVerifier

PHONE = "+14155550123"
EMAIL = "reader@example.org"
# Twilio signs the StatusCallback URL as it was given: the API answers there.
PUBLIC = "https://hooks.tidings.test"

# Builds the provider's receipt for (provider message id, our attempt key, destination).
Receipt = Callable[[str, str, str], WebhookRequest]


class Route:
    """One provider end to end: the adapter the worker sends with, and the
    receipts that provider posts back."""

    def __init__(self, adapter: ProviderAdapter, channel: str, to: str, **receipts: Receipt):
        self.adapter, self.channel, self.to, self.receipts = adapter, channel, to, receipts


def _policy(t: Tidings) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc["version"] = "receipt-feedback-1"
    t.publish_policy(doc)


def _templates(t: Tidings) -> None:
    publish_offer_template(t)
    t.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report }}",
        body="Your report {{ report }} is ready.",
        required_variables=["report"],
    )


def _notify(t: Tidings, route: Route, n: int) -> Any:
    sms = route.channel == "sms"
    return t.notify(
        idempotency_key=f"feedback:{route.adapter.name}:{n}",
        channel=route.channel,
        recipient={"ref": f"reader-{n}", ("phone" if sms else "email"): route.to},
        template="waitlist_offer" if sms else "report_ready",
        variables={"class_name": "Spin 7am", "deadline": "18:00"} if sms else {"report": "8421"},
        purpose="transactional",
        event_class="waitlist_offer" if sms else "report_ready",
        expires_at=t.clock.now() + timedelta(hours=1),
    )


class Run:
    def __init__(self, t: Tidings, route: Route) -> None:
        _policy(t)
        _templates(t)
        self.t, self.route = t, route
        self.worker = Worker(t.runtime, {route.channel: route.adapter}, config=WorkerConfig(seed=7))
        self.http = TestClient(
            create_app(t, adapters={route.adapter.name: route.adapter}),
            base_url=PUBLIC,
            raise_server_exceptions=False,
        )

    def send(self, n: int = 1) -> tuple[Any, str, str]:
        """Intent n through the worker: (intent, provider message id, attempt key)."""
        intent = _notify(self.t, self.route, n)
        assert self.worker.dispatch_once() == 1
        [attempt] = self.t.get(intent.id).attempts
        assert attempt.provider_message_id, attempt
        return intent, attempt.provider_message_id, attempt_key(intent.id, 1)

    def post(self, kind: str, pmid: str, key: str) -> list[str]:
        request = self.route.receipts[kind](pmid, key, self.route.to)
        path = request.url.removeprefix(PUBLIC) if request.url.startswith(PUBLIC) else ""
        path = path or f"/v1/webhooks/{self.route.adapter.name}"
        answer = self.http.post(path, content=request.body, headers=dict(request.headers))
        assert answer.status_code == 200, answer.text
        effects: list[str] = answer.json()["effects"]
        return effects

    def next_decision(self, n: int = 2) -> tuple[IntentState, str | None]:
        intent = _notify(self.t, self.route, n)
        self.worker.dispatch_once()
        after = self.t.get(intent.id)
        return after.state, after.decision_code


def blocks(db_url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            """SELECT 'opt_out', channel, source, provider, attempt_n, raw_status FROM opt_outs
               UNION ALL
               SELECT 'suppression', channel, reason, provider, attempt_n, raw_status
               FROM suppressions ORDER BY 1"""
        ).fetchall()


# --- the providers and their receipts ----------------------------------------


def _sendgrid() -> Iterator[Route]:
    key = ec.generate_private_key(ec.SECP256R1())

    def hook(status: str, **extra: Any) -> Receipt:
        def build(pmid: str, attempt: str, to: str) -> WebhookRequest:
            event = sendgrid.sendgrid_event(pmid, attempt, status, to) | extra
            body = json.dumps([event]).encode() + b"\r\n"
            headers = sendgrid.sign(key, body, int(time.time()))
            return WebhookRequest("POST", "", headers | {"Content-Type": "application/json"}, body)

        return build

    with sendgrid.make_adapter(sendgrid.SendGridFake(), key) as adapter:
        yield Route(
            adapter,
            "email",
            EMAIL,
            unsubscribe=hook("unsubscribe"),
            complaint=hook("spamreport"),
            hard_bounce=hook("bounce"),
            soft_bounce=hook("bounce", type="blocked", reason="451 try again later"),
        )


def _postmark() -> Iterator[Route]:
    auth = {"Authorization": postmark.basic(postmark.HOOK_USER, postmark.HOOK_PASSWORD)}

    def hook(record: str, **extra: Any) -> Receipt:
        def build(pmid: str, attempt: str, to: str) -> WebhookRequest:
            event = postmark.postmark_event(record, pmid, attempt, to, **extra)
            headers = auth | {"Content-Type": "application/json"}
            return WebhookRequest("POST", "", headers, json.dumps(event).encode())

        return build

    with postmark.make_adapter(postmark.PostmarkFake()) as adapter:
        yield Route(
            adapter,
            "email",
            EMAIL,
            complaint=hook("SpamComplaint"),
            hard_bounce=hook("Bounce"),
            soft_bounce=hook("Bounce", Type="SoftBounce", TypeCode=4096),
        )


def _ses() -> Iterator[Route]:
    signer = SnsSigner()

    def hook(kind: str, **detail: Any) -> Receipt:
        def build(pmid: str, attempt: str, to: str) -> WebhookRequest:
            event = ses.ses_event(kind, pmid, attempt, to, **detail)
            doc = signer.message(event, message_id=f"{pmid}-{kind}")
            return WebhookRequest("POST", "", {}, json.dumps(doc).encode())

        return build

    with mock_aws():
        boto3.client("ses", region_name=ses.REGION).verify_email_identity(EmailAddress=ses.SENDER)
        client = boto_client("sesv2", ses.SETTINGS, "ses", 10.0)
        verifier = SnsVerifier(cert_fetcher=signer.fetch, topic_arns=[TOPIC_ARN])
        adapter = ses.SesAdapter(
            client,
            sender=ses.SETTINGS["from"],
            configuration_set=ses.SETTINGS["configuration_set"],
            sns_verifier=verifier,
        )
        yield Route(
            adapter,
            "email",
            EMAIL,
            complaint=hook("Complaint"),
            hard_bounce=hook("Bounce"),
            soft_bounce=hook("Bounce", bounceType="Transient", bounceSubType="MailboxFull"),
        )


def _twilio() -> Iterator[Route]:
    def hook(status: str, error_code: str) -> Receipt:
        def build(sid: str, attempt: str, to: str) -> WebhookRequest:
            params = _twilio_params(sid, to)
            params |= {"MessageStatus": status, "SmsStatus": status, "ErrorCode": error_code}
            url = f"{twilio.CALLBACK}?{urlencode({'tidings_attempt': attempt})}"
            headers = {
                "X-Twilio-Signature": twilio.twilio_signature(twilio.TOKEN, url, params),
                "Content-Type": "application/x-www-form-urlencoded",
            }
            return WebhookRequest("POST", url, headers, urlencode(params).encode())

        return build

    if not twilio.SPEC_PATH.is_file():
        twilio.missing_peer(f"Twilio OpenAPI description not found at {twilio.SPEC_PATH}")
    spec = json.loads(twilio.SPEC_PATH.read_text())
    with twilio.make_adapter(twilio.TwilioFake(spec)) as adapter:
        yield Route(
            adapter,
            "sms",
            PHONE,
            # 21610: "Attempt to send to unsubscribed recipient" (the number replied STOP).
            unsubscribe=hook("failed", "21610"),
            soft_bounce=hook("undelivered", "30003"),  # unreachable handset: may pass later
        )


def _twilio_params(sid: str, to: str) -> dict[str, str]:
    return {
        "AccountSid": twilio.ACCOUNT,
        "ApiVersion": "2010-04-01",
        "From": "+15550009999",
        "MessageSid": sid,
        "SmsSid": sid,
        "To": to,
    }


def _vonage() -> Iterator[Route]:
    def hook(status: str, err_code: str) -> Receipt:
        def build(message_id: str, attempt: str, to: str) -> WebhookRequest:
            params = vonage.receipt(message_id, attempt, status, to) | {"err-code": err_code}
            params["sig"] = vonage.vonage_sig(params, vonage.SIGNATURE_SECRET)
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            return WebhookRequest("POST", "", headers, urlencode(params).encode())

        return build

    with vonage.make_adapter(vonage.VonageFake()) as adapter:
        yield Route(
            adapter,
            "sms",
            PHONE,
            # err-code 4, "Call barred by user": the handset refuses our messages.
            unsubscribe=hook("failed", "4"),
            soft_bounce=hook("failed", "2"),  # absent subscriber, temporary
        )


ROUTES = {
    "sendgrid": _sendgrid,
    "postmark": _postmark,
    "ses": _ses,
    "twilio": _twilio,
    "vonage": _vonage,
}

EXPECTED = {
    "unsubscribe": ("opt_out", "OPTED_OUT"),
    "complaint": ("suppression", "COMPLAINED"),
    "hard_bounce": ("suppression", "BOUNCED"),
}

CASES = [
    (provider, kind)
    for provider, kinds in {
        "sendgrid": ("unsubscribe", "complaint", "hard_bounce"),
        "postmark": ("complaint", "hard_bounce"),
        "ses": ("complaint", "hard_bounce"),
        "twilio": ("unsubscribe",),
        "vonage": ("unsubscribe",),
    }.items()
    for kind in kinds
]


@pytest.fixture
def route(request: pytest.FixtureRequest) -> Iterator[Route]:
    yield from ROUTES[request.param]()


@pytest.mark.parametrize(("route", "kind"), CASES, indirect=["route"])
def test_a_receipt_blocks_the_next_send_to_its_destination(
    tidings: Tidings, db_url: str, route: Route, kind: str
) -> None:
    run = Run(tidings, route)
    _, pmid, key = run.send()
    assert run.next_decision(n=9)[0] is not IntentState.SUPPRESSED  # nothing blocks it yet
    effects = run.post(kind, pmid, key)
    assert effects and "duplicate" not in effects and "unmatched" not in effects
    table, code = EXPECTED[kind]
    [(found_table, channel, why, provider, attempt_n, raw_status)] = blocks(db_url)
    assert (found_table, channel, provider, attempt_n) == (
        table,
        route.channel,
        route.adapter.name,
        1,
    )
    assert raw_status and why == (f"provider:{route.adapter.name}" if table == "opt_out" else kind)
    assert run.next_decision() == (IntentState.SUPPRESSED, code)


@pytest.mark.parametrize("route", list(ROUTES), indirect=True)
def test_a_soft_bounce_blocks_nothing(tidings: Tidings, db_url: str, route: Route) -> None:
    if "soft_bounce" not in route.receipts:
        pytest.skip(f"{route.adapter.name} reports no soft bounce")
    run = Run(tidings, route)
    _, pmid, key = run.send()
    assert run.post("soft_bounce", pmid, key)
    assert blocks(db_url) == []
    state, _ = run.next_decision()
    assert state is not IntentState.SUPPRESSED


@pytest.mark.parametrize("route", ["sendgrid"], indirect=True)
def test_a_replayed_or_later_receipt_keeps_the_first_evidence(
    tidings: Tidings, db_url: str, route: Route
) -> None:
    run = Run(tidings, route)
    _, pmid, key = run.send()
    run.post("complaint", pmid, key)
    assert run.post("complaint", pmid, key) == ["duplicate"]
    run.post("hard_bounce", pmid, key)  # already suppressed: the first reason stays
    assert [(b[0], b[2], b[4]) for b in blocks(db_url)] == [("suppression", "complaint", 1)]
    assert run.next_decision() == (IntentState.SUPPRESSED, "COMPLAINED")
