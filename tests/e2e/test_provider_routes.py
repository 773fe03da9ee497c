"""One route per channel, end to end: intents through the worker to a real peer.

Each test records real intents in PostgreSQL, runs the Worker (one
``dispatch_once`` at a time, on the injected ManualClock) with a real
adapter, and reads what arrived back from the peer:

- e-mail through SES v2 on moto (Simple content, and Raw MIME carrying a
  registered report loaded from disk at send time);
- e-mail through SMTP to an aiosmtpd server in this process (accepted, a
  permanent 550, and a 451 that a later dispatch gets through once);
- SMS through SNS Publish on moto (accepted, and moto's opted-out number).

The peers only ever see what the test itself sent, so that is all asserted.
"""

from __future__ import annotations

import email
import email.policy
import json
from collections.abc import Iterator
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import boto3
import pytest
from aiosmtpd.controller import Controller
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends
from moto.sns.models import sns_backends

from tests.integration.dispatch_helpers import offer, publish_offer_template
from tests.providers.support import free_port
from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.domain.keys import attempt_key
from tidings.domain.states import AttemptState
from tidings.providers.aws_base import boto_client
from tidings.providers.base import ProviderAdapter
from tidings.providers.correlation import unescape_tag
from tidings.providers.ses import TAG_NAME, SesAdapter, tag_value
from tidings.providers.settings import build
from tidings.providers.smtp import message_id_for
from tidings.providers.sns import SnsSmsAdapter

REGION = "us-east-1"
AWS = {"region": REGION, "access_key_id": "testing", "secret_access_key": "testing-secret"}
SENDER = "notify@tidings.test"
OFFER_TEXT = "A spot opened in Spin 7am. Reply by 18:00 to claim it."
PDF = b"%PDF-1.7 report 8421 revision 7 \x00\x01\x02"


def run_worker(t: Tidings, channel: str, adapter: ProviderAdapter) -> Worker:
    return Worker(t.runtime, {channel: adapter}, config=WorkerConfig(seed=7))


def mail_intent(t: Tidings, n: int, to: str, **overrides: Any) -> Any:
    request: dict[str, Any] = {
        "idempotency_key": f"receipt:{n}",
        "channel": "email",
        "recipient": {"ref": f"member-{n}", "email": to},
        "template": "receipt",
        "variables": {"order": f"A-{n}"},
        "purpose": "transactional",
        "event_class": "receipt",
        "expires_at": t.clock.now() + timedelta(hours=1),
    }
    return t.notify(**(request | overrides))


def publish_receipt_template(t: Tidings) -> None:
    t.publish_template(
        "receipt",
        channel="email",
        subject="Receipt {{ order }}",
        body="Thanks for order {{ order }}.",
        required_variables=["order"],
    )


def only_attempt(t: Tidings, intent_id: Any) -> Any:
    [attempt] = t.get(intent_id).attempts
    return attempt


class WireLog:
    """What each boto3 call put on the wire, keyed by the MessageId it got back.

    moto keeps the sent message but drops SendEmail's EmailTags, so the tag
    is read from the serialized request body on its way to moto.
    """

    def __init__(self, client: Any) -> None:
        self.by_message_id: dict[str, dict[str, Any]] = {}
        self.operations: list[tuple[str, dict[str, Any]]] = []
        client.meta.events.register("before-call", self._before)
        client.meta.events.register("after-call", self._after)

    def _before(
        self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        body = params.get("body") or {}
        # JSON protocols (sesv2) serialize to bytes; the query protocol (sns) to a dict.
        context["wire"] = dict(body) if isinstance(body, dict) else json.loads(body)
        self.operations.append((model.name, context["wire"]))

    def _after(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if "MessageId" in parsed:
            self.by_message_id[str(parsed["MessageId"])] = context["wire"]


# --- e-mail: SES v2 on moto ----------------------------------------------------


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def test_email_through_ses_on_moto_simple_and_raw_with_attachment(
    tidings: Tidings, clock: ManualClock, tmp_path: Path, aws: None
) -> None:
    boto3.client("ses", region_name=REGION).verify_email_identity(EmailAddress=SENDER)
    client = boto_client("sesv2", AWS, "ses", 10.0)
    wire = WireLog(client)
    adapter = SesAdapter(client, sender=f"Tidings <{SENDER}>")  # default loader: reads the path

    publish_receipt_template(tidings)
    tidings.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report_name }} is ready",
        body="Your report {{ report_name }} is attached.",
        required_variables=["report_name"],
        attachment_policy="required",
    )
    report = tmp_path / "q3.pdf"
    report.write_bytes(PDF)
    tidings.register_report(
        "8421", 7, filename="q3.pdf", content_type="application/pdf", location=str(report)
    )
    plain = mail_intent(tidings, 1, "member1@example.test")
    job = tidings.create_job(
        idempotency_key="report:8421:revision:7",
        event_class="report_ready",
        purpose="transactional",
        template="report_ready",
        channels=["email"],
        variables={"report_name": "Q3 media"},
        audience=[{"ref": "reader-1", "email": "reader1@example.test"}],
        report={"id": "8421", "revision": 7},
    )
    assert tidings.prepare_jobs() == 1
    [row] = tidings.job_recipients(job["id"])["items"]

    assert run_worker(tidings, "email", adapter).dispatch_once() == 2

    sent = {m.id: m for m in ses_backends[DEFAULT_ACCOUNT_ID][REGION].sent_messages}
    assert len(sent) == 2
    for intent_id in (plain.id, row["intent_id"]):
        intent = tidings.get(intent_id)
        [attempt] = intent.attempts
        assert intent.state is IntentState.ACCEPTED
        assert attempt.state is AttemptState.ACCEPTED and attempt.provider == "ses"
        assert attempt.attempt_key == attempt_key(intent.id, 1)
        message_id = attempt.provider_message_id
        assert message_id is not None and message_id in sent
        tags = wire.by_message_id[message_id]["EmailTags"]
        assert tags == [{"Name": TAG_NAME, "Value": tag_value(attempt.attempt_key)}]
        assert unescape_tag(tags[0]["Value"]) == attempt.attempt_key

    simple = sent[only_attempt(tidings, plain.id).provider_message_id]
    assert simple.destinations["ToAddresses"] == ["member1@example.test"]
    assert (simple.subject, simple.body) == ("Receipt A-1", "Thanks for order A-1.")

    raw = sent[only_attempt(tidings, row["intent_id"]).provider_message_id]
    # moto adds the To header's addresses to the envelope's, hence the set.
    assert set(raw.destinations) == {"reader1@example.test"}
    assert wire.by_message_id[raw.id]["Destination"] == {"ToAddresses": ["reader1@example.test"]}
    mime = email.message_from_string(raw.raw_data, policy=email.policy.default)
    assert (mime["To"], mime["Subject"]) == ("reader1@example.test", "Report Q3 media is ready")
    text, attachment = [p for p in mime.walk() if not p.is_multipart()]
    assert text.get_content().strip() == "Your report Q3 media is attached."
    assert attachment.get_filename() == "q3.pdf"
    assert attachment.get_content_type() == "application/pdf"
    assert attachment.get_payload(decode=True) == PDF


# --- e-mail: SMTP to aiosmtpd --------------------------------------------------


class RelayHandler:
    """A relay that refuses one mailbox for good and greylists another once."""

    def __init__(self) -> None:
        self.unknown: set[str] = set()
        self.greylisted: set[str] = set()
        self.received: list[tuple[list[str], EmailMessage]] = []

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        if address in self.unknown:
            return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
        if address in self.greylisted:
            self.greylisted.discard(address)
            return "451 4.7.1 Greylisted, please try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.received.append((list(envelope.rcpt_tos), parsed))
        return "250 2.0.0 Ok: queued"

    def to(self, address: str) -> list[EmailMessage]:
        return [m for rcpts, m in self.received if rcpts == [address]]


@pytest.fixture
def relay() -> Iterator[tuple[RelayHandler, int]]:
    handler = RelayHandler()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


def test_email_through_smtp_to_aiosmtpd(
    tidings: Tidings, clock: ManualClock, relay: tuple[RelayHandler, int]
) -> None:
    handler, port = relay
    settings = {"host": "127.0.0.1", "port": str(port), "from": f"Tidings <{SENDER}>"}
    worker = run_worker(tidings, "email", build("smtp", settings | {"timeout": "5"}))
    ok, unknown, grey = "ok@example.test", "gone@example.test", "grey@example.test"
    handler.unknown.add(unknown)
    handler.greylisted.add(grey)
    publish_receipt_template(tidings)
    accepted = mail_intent(tidings, 1, ok)
    bounced = mail_intent(tidings, 2, unknown)
    deferred = mail_intent(tidings, 3, grey)

    assert worker.dispatch_once() == 3

    # Accepted, and the relay holds it under a Message-ID derived from the attempt key.
    attempt = only_attempt(tidings, accepted.id)
    assert tidings.get(accepted.id).state is IntentState.ACCEPTED
    [message] = handler.to(ok)
    assert message["Message-ID"] == f"<{attempt.provider_message_id}>"
    assert attempt.provider_message_id == message_id_for(attempt.attempt_key, "tidings.test")
    assert (message["Subject"], message.get_content().strip()) == (
        "Receipt A-1",
        "Thanks for order A-1.",
    )

    # 550 5.1.1 at RCPT: failed for good with the normalized code, nothing received.
    failed = tidings.get(bounced.id)
    assert (failed.state, failed.decision_code) == (IntentState.FAILED, "INVALID_DESTINATION")
    assert [(a.state, a.code) for a in failed.attempts] == [
        (AttemptState.FAILED, "INVALID_DESTINATION")
    ]
    assert handler.to(unknown) == []

    # 451 at RCPT: deferred, with a time to try again; nothing received yet.
    waiting = tidings.get(deferred.id)
    assert (waiting.state, waiting.decision_code) == (IntentState.PENDING, "PROVIDER_ERROR")
    assert waiting.next_due_at is not None and waiting.next_due_at > clock.now()
    assert handler.to(grey) == []

    assert worker.dispatch_once() == 0  # not due yet
    clock.set(waiting.next_due_at + timedelta(seconds=1))
    assert worker.dispatch_once() == 1  # only the deferred one: the 550 is not retried

    retried = tidings.get(deferred.id)
    assert retried.state is IntentState.ACCEPTED
    assert [a.state for a in retried.attempts] == [AttemptState.FAILED, AttemptState.ACCEPTED]
    [message] = handler.to(grey)
    second = retried.attempts[1]
    assert second.attempt_key == attempt_key(retried.id, 2)
    assert message["Message-ID"] == f"<{message_id_for(second.attempt_key, 'tidings.test')}>"
    assert tidings.get(bounced.id).attempt_count == 1
    assert len(handler.received) == 2


# --- SMS: SNS Publish on moto --------------------------------------------------


def test_sms_through_sns_on_moto_and_the_opted_out_number(
    tidings: Tidings, clock: ManualClock, aws: None
) -> None:
    client = boto_client("sns", AWS, "sns", 10.0)
    wire = WireLog(client)
    worker = run_worker(tidings, "sms", SnsSmsAdapter(client, sender_id="Tidings"))
    publish_offer_template(tidings)
    reachable, opted = "+14155550123", "+14155550199"  # moto: a number ending in 99 opted out
    sent = offer(tidings, 1, recipient={"ref": "member-1", "phone": reachable})
    refused = offer(tidings, 2, recipient={"ref": "member-2", "phone": opted})

    assert worker.dispatch_once() == 2

    published = dict(sns_backends[DEFAULT_ACCOUNT_ID][REGION].sms_messages)
    attempt = only_attempt(tidings, sent.id)
    assert tidings.get(sent.id).state is IntentState.ACCEPTED
    assert attempt.state is AttemptState.ACCEPTED and attempt.provider == "sns"
    assert published == {attempt.provider_message_id: (reachable, OFFER_TEXT)}

    # The pre-check said opted out: nothing published, intent failed, opt-out learned.
    failed = tidings.get(refused.id)
    assert (failed.state, failed.decision_code) == (IntentState.FAILED, "OPTED_OUT")
    assert [(a.state, a.code) for a in failed.attempts] == [(AttemptState.FAILED, "OPTED_OUT")]
    checks = [w["phoneNumber"] for op, w in wire.operations if op == "CheckIfPhoneNumberIsOptedOut"]
    assert sorted(checks) == sorted([reachable, opted])
    assert [w["PhoneNumber"] for op, w in wire.operations if op == "Publish"] == [reachable]

    # A second intent to that number is stopped by policy, before any provider call.
    again = offer(tidings, 3, recipient={"ref": "member-3", "phone": opted})
    assert worker.dispatch_once() == 0
    stopped = tidings.get(again.id)
    assert (stopped.state, stopped.decision_code) == (IntentState.SUPPRESSED, "OPTED_OUT")
    assert stopped.attempts == ()
    assert len(wire.operations) == 3  # two checks and one publish: nothing more
    assert len(sns_backends[DEFAULT_ACCOUNT_ID][REGION].sms_messages) == 1
