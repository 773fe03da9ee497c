"""The simulator speaking AWS's wires, read by the real SES, End User
Messaging SMS and SNS adapters unchanged: botocore builds, signs and parses
every request and answer (its service models decide what an error is), and
SES and SMS events arrive as signed SNS notifications that the adapters'
own verifier checks against the simulator's certificate."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

import httpx
import pytest
import uvicorn
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from tidings.domain import feedback
from tidings.domain.keys import attempt_key
from tidings.providers.aws_base import boto_client
from tidings.providers.aws_sms import AwsSmsAdapter
from tidings.providers.errors import InvalidSignature
from tidings.providers.messages import OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    Observation,
    ObservedStatus,
    RejectCode,
    Rejected,
    Retryable,
)
from tidings.providers.ses import SesAdapter
from tidings.providers.settings import build
from tidings.providers.simulator import SimulatorConfig, SimulatorCore, wire_aws
from tidings.providers.simulator.app import create_app
from tidings.providers.simulator.receipts import ReceiptDispatcher
from tidings.providers.simulator.records import Receipt
from tidings.providers.simulator.wire_aws import AwsAccount, account_of
from tidings.providers.simulator.wire_aws_events import cert_url, certificate_pem, notification
from tidings.providers.sns import SnsSmsAdapter
from tidings.providers.sns_signature import SnsVerifier

T0 = 1_900_000_000.0
HOOK = "https://tidings.example/v1/webhooks/aws"
ENDPOINT = "https://aws.simulator.test"
SENDER = "Tidings <notify@tidings.test>"
TO_EMAIL = "someone@example.com"
TO_SMS = "+447700900123"
KEY = attempt_key(uuid.UUID(int=37), 1)
SERVICES = {"ses": "sesv2", "aws_sms": "pinpoint-sms-voice-v2", "sns": "sns"}


# --- botocore's own client, answered in process at its `before-send` event


class _Raw:
    """What botocore's AWSResponse reads a body from."""

    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def attach(client: Any, core: SimulatorCore, account: wire_aws.AwsAccount | None = None) -> Any:
    """Answer `client`'s requests (a boto3 client of sesv2, pinpoint-sms-voice-v2
    or sns) from `core`: every request is built, signed and parsed by botocore
    as for AWS, and handed over at botocore's `before-send` event."""

    def handle(*request: Any) -> wire_aws.WireAnswer:
        return wire_aws.answer(core, account or wire_aws.account_of(core.config), *request)

    return attach_handler(client, handle)


def attach_handler(
    client: Any, handle: Callable[[str, str, Mapping[str, str], bytes], wire_aws.WireAnswer]
) -> Any:
    def before_send(request: Any, **_: Any) -> Any:
        body = request.body or b""
        if hasattr(body, "read"):
            body = body.read()
        if isinstance(body, str):
            body = body.encode()
        headers = {
            k: v.decode() if isinstance(v, bytes) else str(v) for k, v in request.headers.items()
        }
        path = request.url.split("://", 1)[-1].partition("/")[2].partition("?")[0]
        wire = handle(request.method, "/" + path, headers, bytes(body))
        if wire.stall_s:
            # Accepted and recorded by the core; the caller never hears back.
            raise ReadTimeoutError(endpoint_url=request.url)
        return AWSResponse(request.url, wire.status_code, wire.headers, _Raw(wire.body))

    client.meta.events.register("before-send", before_send)
    return client


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def settings(account: AwsAccount, endpoint: str = ENDPOINT, **more: str) -> dict[str, str]:
    return {
        "region": account.region,
        "access_key_id": account.access_key_id,
        "secret_access_key": account.secret_access_key,
        "endpoint_url": endpoint,
        **more,
    }


def verifier(core: SimulatorCore, clock: Clock, **more: Any) -> SnsVerifier:
    options: dict[str, Any] = {
        "cert_fetcher": lambda url: certificate_pem(),
        "topic_arns": [account_of(core.config).topic_arn],
        "clock": clock,
        "trusted_cert_urls": [cert_url(core.config)],
        **more,
    }
    return SnsVerifier(**options)


def wired(profile: str, access_key: str | None = None, **config: Any) -> tuple[Any, ...]:
    clock = Clock()
    core = SimulatorCore(
        SimulatorConfig(profile=profile, webhook_url=HOOK, wire=True, **config), clock=clock
    )
    account = account_of(core.config)
    if access_key:
        account = replace(account, access_key_id=access_key)
    client = attach(boto_client(SERVICES[profile], settings(account), profile, 5.0), core)
    adapter: Any
    if profile == "ses":
        adapter = SesAdapter(
            client, sender=SENDER, configuration_set="tidings", sns_verifier=verifier(core, clock)
        )
    elif profile == "aws_sms":
        adapter = AwsSmsAdapter(client, sns_verifier=verifier(core, clock))
    else:
        adapter = SnsSmsAdapter(client)
    return core, adapter, clock


def email(to: str = TO_EMAIL) -> OutboundMessage:
    return OutboundMessage("email", to, "hello", subject="Hi")


def sms(to: str = TO_SMS) -> OutboundMessage:
    return OutboundMessage("sms", to, "hello")


def events(core: SimulatorCore, clock: Clock, adapter: Any, version: str = "1") -> list[Any]:
    clock.now += 5
    seen = []
    for receipt in core.take_due_receipts():
        headers, body = notification(receipt, account_of(core.config), core.config, clock.now)
        assert headers["x-amz-sns-message-type"] == "Notification"
        [obs] = adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
        seen.append((obs, json.loads(json.loads(body)["Message"])))
    return seen


def refuses_nobody(result: Any) -> None:
    assert isinstance(result, Rejected)
    assert feedback.fault(result.code.value) != "recipient"
    assert feedback.send_lesson(result.code.value) is None


# --- SES v2 ------------------------------------------------------------------


def test_ses_accepts_and_its_events_end_delivered_naming_our_attempt() -> None:
    core, adapter, clock = wired("ses")
    accepted = adapter.send(email(), KEY)
    assert isinstance(accepted, Accepted)
    [entry] = core.ledger()
    assert entry["provider_message_id"] == accepted.provider_message_id
    seen = events(core, clock, adapter)
    # SES publishes Send too; the profile reports only the final stage.
    [(obs, event)] = seen
    assert event["mail"]["messageId"] == accepted.provider_message_id
    assert event["delivery"]["recipients"] == [TO_EMAIL]
    assert obs.status is ObservedStatus.delivered and obs.attempt_key == KEY


def test_ses_throttling_is_too_many_requests_and_retryable() -> None:
    _, adapter, _ = wired("ses", rate_429=1.0)
    result = adapter.send(email(), KEY)
    assert isinstance(result, Retryable) and result.code is RejectCode.RATE_LIMITED
    assert result.retry_after_seconds is None and "TooManyRequestsException" in result.detail


def test_ses_internal_failure_and_a_stall_are_indeterminate() -> None:
    _, adapter, _ = wired("ses", rate_5xx=1.0)
    failed = adapter.send(email(), KEY)
    assert isinstance(failed, Indeterminate) and failed.code is RejectCode.PROVIDER_ERROR
    core, adapter, _ = wired("ses", rate_timeout=1.0)
    stalled = adapter.send(email(), KEY)
    # botocore's ReadTimeoutError: an unknown outcome, never a resend.
    assert isinstance(stalled, Indeterminate) and stalled.code is RejectCode.TIMEOUT
    assert "ReadTimeoutError" in stalled.detail
    assert core.ledger()[0]["outcome"] == "timeout_after_accept"


def test_a_bad_request_about_the_sender_suppresses_nobody() -> None:
    """#37: the text "Missing final '@domain'" once read as the recipient's fault."""
    core, _, clock = wired("ses")
    account = account_of(core.config)
    client = attach(boto_client("sesv2", settings(account), "ses", 5.0), core)
    adapter = SesAdapter(client, sender="not-an-address", sns_verifier=verifier(core, clock))
    result = adapter.send(email(), KEY)
    refuses_nobody(result)
    assert result.code is RejectCode.REQUEST_INVALID and "BadRequestException" in result.detail
    assert core.ledger() == []


@pytest.mark.parametrize(
    ("local", "wire_code", "code"),
    [
        # SES's "Email address is not verified": naming our sender, or in the
        # sandbox the recipient (the account's restriction).
        ("badsender", "MessageRejected", RejectCode.SENDER_REJECTED),
        ("restricted", "MessageRejected", RejectCode.ACCOUNT_RESTRICTED),
        ("badrequest", "BadRequestException", RejectCode.REQUEST_INVALID),
        ("optout", "BadRequestException", RejectCode.REQUEST_INVALID),
    ],
)
def test_ses_refusals_at_send_suppress_nobody(local: str, wire_code: str, code: RejectCode) -> None:
    _, adapter, _ = wired("ses")
    result = adapter.send(email(f"{local}@example.com"), KEY)
    refuses_nobody(result)
    assert result.code is code and result.detail.startswith(wire_code)


def _final(core: SimulatorCore, clock: Clock, adapter: Any) -> tuple[Observation, dict[str, Any]]:
    return events(core, clock, adapter)[-1]  # type: ignore[no-any-return]


def test_a_permanent_bounce_and_a_complaint_suppress_the_recipient() -> None:
    core, adapter, clock = wired("ses")
    adapter.send(email("hardbounce@example.com"), KEY)
    obs, event = _final(core, clock, adapter)
    assert event["bounce"]["bounceType"] == "Permanent"
    assert event["bounce"]["bouncedRecipients"] == [
        {"emailAddress": "hardbounce@example.com", "action": "failed"}
    ]
    assert obs.status is ObservedStatus.failed and obs.code == RejectCode.BOUNCED
    assert feedback.lesson(obs.status.value, obs.code) == feedback.Lesson(
        "suppression", feedback.HARD_BOUNCE
    )
    core, adapter, clock = wired("ses")
    adapter.send(email("complaint@example.com"), KEY)
    obs, event = _final(core, clock, adapter)
    assert event["eventType"] == "Complaint"
    assert obs.code == RejectCode.COMPLAINT
    assert feedback.lesson(obs.status.value, obs.code) == feedback.Lesson(
        "suppression", feedback.COMPLAINT
    )


@pytest.mark.parametrize(
    ("local", "event_type", "status"),
    [
        ("bounce", "Bounce", ObservedStatus.undelivered),  # Transient
        ("fail", "Reject", ObservedStatus.failed),
    ],
)
def test_a_soft_bounce_or_a_reject_suppresses_nobody(
    local: str, event_type: str, status: ObservedStatus
) -> None:
    core, adapter, clock = wired("ses")
    adapter.send(email(f"{local}@example.com"), KEY)
    obs, event = _final(core, clock, adapter)
    assert event["eventType"] == event_type and obs.status is status
    assert feedback.lesson(obs.status.value, obs.code) is None


# --- signatures ----------------------------------------------------------------


@pytest.mark.parametrize("version", ["1", "2"])
def test_envelopes_are_signed_and_only_an_explicitly_trusted_certificate_passes(
    version: str,
) -> None:
    core, adapter, clock = wired("ses")
    adapter.send(email(), KEY)
    clock.now += 5
    receipt = core.take_due_receipts()[-1]
    account = account_of(core.config)
    headers, body = notification(receipt, account, core.config, clock.now, version)
    assert json.loads(body)["SignatureVersion"] == version
    [obs] = adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
    assert obs.status is ObservedStatus.delivered
    tampered = body.replace(b"Delivery", b"Bounce")
    with pytest.raises(InvalidSignature):
        adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, tampered))
    # Production's verifier (no trusted URL) refuses the simulator's certificate URL.
    production = SesAdapter(
        adapter._client,
        sender=SENDER,
        sns_verifier=verifier(core, clock, trusted_cert_urls=()),
    )
    with pytest.raises(InvalidSignature, match="SigningCertURL"):
        production.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
    # A trusted certificate does not open the topic pin.
    stranger = SesAdapter(
        adapter._client,
        sender=SENDER,
        sns_verifier=verifier(core, clock, topic_arns=["arn:aws:sns:us-east-1:1:other"]),
    )
    with pytest.raises(InvalidSignature, match="topic"):
        stranger.verify_webhook(WebhookRequest("POST", HOOK, headers, body))


def test_the_dispatcher_posts_signed_sns_envelopes() -> None:
    posted: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        request.read()
        posted.append(request)
        return httpx.Response(200)

    core, adapter, clock = wired("aws_sms")
    adapter.send(sms(), KEY)
    clock.now += 5
    receiver = httpx.Client(transport=httpx.MockTransport(receive))
    ReceiptDispatcher(core, client=receiver, wall_clock=clock).run_once()
    statuses = []
    for request in posted:
        assert request.headers["content-type"].startswith("text/plain")
        webhook = WebhookRequest("POST", str(request.url), dict(request.headers), request.content)
        [obs] = adapter.verify_webhook(webhook)
        assert obs.attempt_key == KEY
        statuses.append(obs.status)
    assert sorted(statuses) == [ObservedStatus.accepted, ObservedStatus.delivered]


def test_a_duplicated_event_keeps_its_sns_message_id_and_dedupe_key() -> None:
    core, adapter, clock = wired("aws_sms", duplicate_rate=1.0)
    adapter.send(sms(), KEY)
    clock.now += 5
    account = account_of(core.config)
    finals = [r for r in core.take_due_receipts() if r.event["status"] == "TEXT_DELIVERED"]
    assert len(finals) == 2
    ids, keys = set(), set()
    for receipt in finals:
        headers, body = notification(receipt, account, core.config, clock.now)
        ids.add(headers["x-amz-sns-message-id"])
        keys.add(adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))[0].dedupe_key)
    assert len(ids) == 1 and len(keys) == 1


# --- End User Messaging SMS ------------------------------------------------------


def test_aws_sms_accepts_with_our_context_and_ends_delivered() -> None:
    core, adapter, clock = wired("aws_sms")
    accepted = adapter.send(sms(), KEY)
    assert isinstance(accepted, Accepted)
    seen = events(core, clock, adapter)
    assert [event["eventType"] for _, event in seen] == ["TEXT_QUEUED", "TEXT_DELIVERED"]
    obs, event = seen[-1]
    assert event["messageId"] == accepted.provider_message_id and event["isFinal"] is True
    assert event["destinationPhoneNumber"] == TO_SMS and event["messageStatus"] == "DELIVERED"
    assert obs.status is ObservedStatus.delivered and obs.attempt_key == KEY


def test_aws_sms_throttling_and_internal_errors() -> None:
    _, adapter, _ = wired("aws_sms", rate_429=1.0)
    limited = adapter.send(sms(), KEY)
    assert isinstance(limited, Retryable) and limited.code is RejectCode.RATE_LIMITED
    assert "ThrottlingException" in limited.detail
    _, adapter, _ = wired("aws_sms", rate_5xx=1.0)
    failed = adapter.send(sms(), KEY)
    assert isinstance(failed, Indeterminate) and failed.code is RejectCode.PROVIDER_ERROR


@pytest.mark.parametrize(
    ("suffix", "reason", "code"),
    [
        ("0000", "CANNOT_PARSE", RejectCode.INVALID_DESTINATION),
        ("0009", "DESTINATION_PHONE_NUMBER_OPTED_OUT", RejectCode.OPTED_OUT),
        ("0422", "INVALID_PARAMETER", RejectCode.REQUEST_INVALID),
        ("0451", "INVALID_IDENTITY_FOR_DESTINATION_COUNTRY", RejectCode.SENDER_REJECTED),
        ("0403", "DESTINATION_PHONE_NUMBER_NOT_VERIFIED", RejectCode.ACCOUNT_RESTRICTED),
    ],
)
def test_aws_sms_refusals_carry_their_modeled_reason(
    suffix: str, reason: str, code: RejectCode
) -> None:
    _, adapter, _ = wired("aws_sms")
    result = adapter.send(sms("+4477009" + suffix), KEY)
    assert isinstance(result, Rejected) and result.code is code
    assert result.provider_code == reason
    if code not in (RejectCode.INVALID_DESTINATION, RejectCode.OPTED_OUT):
        refuses_nobody(result)  # #37: the sandbox and our request block nobody


def test_a_blocked_destination_country_suppresses_nobody() -> None:
    core, _, clock = wired("aws_sms")
    account = replace(account_of(core.config), blocked_countries=("+98",))
    client = boto_client("pinpoint-sms-voice-v2", settings(account), "aws_sms", 5.0)
    attach(client, core, account)
    adapter = AwsSmsAdapter(client, sns_verifier=verifier(core, clock))
    result = adapter.send(sms("+989121234567"), KEY)
    refuses_nobody(result)
    assert result.code is RejectCode.ACCOUNT_RESTRICTED
    assert result.provider_code == "DESTINATION_COUNTRY_BLOCKED"
    assert core.ledger() == []


def test_carrier_failures_are_read_without_suppressing() -> None:
    core, adapter, clock = wired("aws_sms")
    adapter.send(sms("+447700900001"), attempt_key(uuid.UUID(int=1), 1))
    adapter.send(sms("+447700900002"), attempt_key(uuid.UUID(int=2), 1))
    finals = {
        event["destinationPhoneNumber"]: (obs, event)
        for obs, event in events(core, clock, adapter)
        if event["isFinal"]
    }
    unreachable, event = finals["+447700900001"]
    assert event["eventType"] == "TEXT_CARRIER_UNREACHABLE"
    assert unreachable.status is ObservedStatus.undelivered
    blocked, event = finals["+447700900002"]
    assert event["eventType"] == "TEXT_BLOCKED" and blocked.code == RejectCode.CARRIER_FILTERED
    for obs, _ in finals.values():
        assert feedback.lesson(obs.status.value, obs.code) is None


def test_text_unknown_is_an_unknown_outcome_that_invites_no_resend() -> None:
    """AWS reports UNKNOWN after 72 hours "as we do not know what happened to
    that message" (sms-voice/latest/userguide/configuration-sets-event-types)."""
    core, adapter, clock = wired("aws_sms")
    accepted = adapter.send(sms(), KEY)
    clock.now += 5
    [_, delivered] = core.take_due_receipts()
    event = {**delivered.event, "status": "TEXT_UNKNOWN", "code": None}
    receipt = Receipt(event, delivered.due_at, profile="aws_sms", to=TO_SMS)
    headers, body = notification(receipt, account_of(core.config), core.config, clock.now)
    [obs] = adapter.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
    assert obs.provider_message_id == accepted.provider_message_id
    assert obs.status is ObservedStatus.unknown and obs.code is None
    assert obs.raw_status == "TEXT_UNKNOWN" and obs.attempt_key == KEY
    assert feedback.lesson(obs.status.value, obs.code) is None


# --- SNS ---------------------------------------------------------------------------


def test_sns_publishes_and_its_opt_out_check_refuses_an_opted_out_number() -> None:
    core, adapter, _ = wired("sns")
    accepted = adapter.send(sms(), KEY)
    assert isinstance(accepted, Accepted)
    assert core.ledger()[0]["provider_message_id"] == accepted.provider_message_id
    opted_out = adapter.send(sms("+447700900009"), KEY)
    assert isinstance(opted_out, Rejected) and opted_out.code is RejectCode.OPTED_OUT
    assert len(core.ledger()) == 1  # nothing was published


@pytest.mark.parametrize(
    ("config", "kind", "code", "wire_code"),
    [
        ({"rate_429": 1.0}, Retryable, RejectCode.RATE_LIMITED, "Throttling"),
        ({"rate_5xx": 1.0}, Indeterminate, RejectCode.PROVIDER_ERROR, "InternalError"),
    ],
)
def test_sns_throttling_and_internal_errors(
    config: dict[str, float], kind: type, code: RejectCode, wire_code: str
) -> None:
    _, adapter, _ = wired("sns", **config)
    result = adapter.send(sms(), KEY)
    assert isinstance(result, kind) and result.code is code  # type: ignore[attr-defined]
    assert wire_code in result.detail  # type: ignore[attr-defined]


@pytest.mark.parametrize("suffix", ["0000", "0422", "0451", "0403"])
def test_sns_refusals_are_invalid_parameter_and_suppress_nobody(suffix: str) -> None:
    _, adapter, _ = wired("sns")
    result = adapter.send(sms("+4477009" + suffix), KEY)
    refuses_nobody(result)
    assert result.code is RejectCode.REQUEST_INVALID and "InvalidParameter" in result.detail


@pytest.mark.parametrize("profile", ["ses", "aws_sms", "sns"])
def test_a_request_signed_with_another_access_key_is_refused(profile: str) -> None:
    core, adapter, _ = wired(profile, access_key="AKIAOTHER00000000000")
    message = email() if profile == "ses" else sms()
    result = adapter.send(message, KEY)
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED
    assert core.ledger() == []


# --- over HTTP: botocore's own transport, the certificate fetched from the simulator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served() -> Iterator[tuple[SimulatorCore, str]]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    core = SimulatorCore(
        SimulatorConfig(
            profile="ses", webhook_url=HOOK, wire=True, public_url=url, receipt_delay_ms=0
        )
    )
    config = uvicorn.Config(
        create_app(core, deliver_receipts=False),
        host="127.0.0.1",
        port=port,
        log_config=None,  # uvicorn's own dictConfig would reroute this process's logging
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield core, url
    server.should_exit = True
    thread.join(5)


def test_the_http_app_speaks_aws_and_serves_its_certificate(
    served: tuple[SimulatorCore, str],
) -> None:
    core, url = served
    account = account_of(core.config)
    events_settings = {
        "sns_topic_arns": account.topic_arn,
        "sns_trusted_cert_urls": cert_url(core.config),
    }
    ses = build("ses", settings(account, url, **{"from": SENDER}, **events_settings))
    accepted = ses.send(email(), KEY)
    assert isinstance(accepted, Accepted)
    refused = ses.send(email("restricted@example.com"), KEY)
    assert isinstance(refused, Rejected) and refused.code is RejectCode.ACCOUNT_RESTRICTED
    aws_sms = build("aws_sms", settings(account, url, **events_settings))
    limited = aws_sms.send(sms("+447700900429"), KEY)
    assert isinstance(limited, Retryable) and limited.code is RejectCode.RATE_LIMITED
    sns = build("sns", settings(account, url))
    assert isinstance(sns.send(sms(), KEY), Accepted)
    [*_, last] = [r for r in core.take_due_receipts() if r.profile == "ses"]
    headers, body = notification(last, account, core.config, time.time())
    [obs] = ses.verify_webhook(WebhookRequest("POST", HOOK, headers, body))
    assert obs.status is ObservedStatus.delivered and obs.attempt_key == KEY


# Each accepted and recorded, its answer then held back (magic.py `timeout`, `0408`).
STALLS = {"ses": email("timeout@example.com"), "aws_sms": sms("+447700900408")}
STALLS["sns"] = STALLS["aws_sms"]


@pytest.mark.parametrize("profile", sorted(STALLS))
def test_a_stalled_answer_is_a_timeout_whose_outcome_is_unknown(
    served: tuple[SimulatorCore, str], profile: str
) -> None:
    """#37: botocore's read timeout read as PROVIDER_ERROR. The simulator
    took the message and holds its answer back (SNS's opt-out check is
    answered at once): the request was sent, so the outcome is unknown
    (reconciled, never resent), and it is a timeout."""
    core, url = served
    core.configure({"timeout_stall_ms": 2_000})
    sender = {"from": SENDER} if profile == "ses" else {}
    adapter = build(profile, settings(account_of(core.config), url, timeout="0.5", **sender))
    result = adapter.send(STALLS[profile], KEY)
    assert isinstance(result, Indeterminate) and result.code is RejectCode.TIMEOUT, result
    assert "ReadTimeoutError" in result.detail
    [entry] = core.ledger()
    assert entry["outcome"] == "timeout_after_accept"


@pytest.mark.parametrize("profile", sorted(STALLS))
def test_a_connect_timeout_is_certainly_not_sent(profile: str) -> None:
    """A peer whose accept queue is full never completes the handshake: the
    request never left, so it is safe to send again (Retryable)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        waiting = [socket.socket() for _ in range(3)]
        for pending in waiting:  # fill the queue: later handshakes go unanswered
            pending.setblocking(False)
            pending.connect_ex(("127.0.0.1", port))
        time.sleep(0.2)
        try:
            account = AwsAccount(secret_access_key="unused")
            sender = {"from": SENDER} if profile == "ses" else {}
            endpoint = f"http://127.0.0.1:{port}"
            adapter = build(profile, settings(account, endpoint, timeout="0.5", **sender))
            result = adapter.send(STALLS[profile], KEY)
        finally:
            for pending in waiting:
                pending.close()
    assert isinstance(result, Retryable) and result.code is RejectCode.PROVIDER_ERROR, result
    assert result.detail.startswith("not sent: ") and "ConnectTimeoutError" in result.detail
