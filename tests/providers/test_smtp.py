"""SMTP against a real aiosmtpd server started in the test process.

The server's handler stages each outcome by recipient: 250, a 451 rate
limit, a 550 permanent rejection, a refused recipient, or a final reply that
never comes (the message was received, the answer is lost).
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import ssl
from collections.abc import Iterator
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.providers.conformance import AdapterConformance, Outcome
from tests.providers.peer_support import new_id
from tests.providers.support import free_port
from tidings.providers.messages import AttachmentRef, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import Accepted, Indeterminate, RejectCode, Rejected, Retryable
from tidings.providers.settings import build
from tidings.providers.smtp import SmtpAdapter, SmtpReply, message_id_for

DOMAIN = "tidings.test"
CLIENT_TIMEOUT = 0.5
USER, PASSWORD = "relay-user", "relay-password-42"


class Handler:
    """aiosmtpd handler: records what arrives, answers as staged per recipient."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.received: list[Message] = []

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options):
        outcome = self.outcomes.get(address)
        if outcome == "rcpt_reject":
            return f"550 5.1.1 <{address}>: Recipient address rejected: User unknown"
        if outcome == "rcpt_busy":
            return "450 4.2.1 Mailbox busy, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        content = envelope.original_content or envelope.content
        self.received.append(email.message_from_bytes(content, policy=email.policy.default))
        outcome = self.outcomes.get(envelope.rcpt_tos[0], "accept")
        if outcome == "rate_limit":
            return "451 4.7.1 Rate limit exceeded, try again later"
        if outcome == "reject":
            return "550 5.7.1 Message rejected as spam"
        if outcome == "timeout":
            await asyncio.sleep(CLIENT_TIMEOUT * 3)  # past the client's patience
        return "250 2.0.0 Ok: queued as 4B6F1"


def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any):
    ok = isinstance(auth_data, LoginPassword) and (
        auth_data.login.decode(),
        auth_data.password.decode(),
    ) == (USER, PASSWORD)
    # handled=False: aiosmtpd answers the failure itself (535).
    return AuthResult(success=ok, handled=False)


@pytest.fixture
def server() -> Iterator[tuple[Handler, int]]:
    handler = Handler()
    port = free_port()
    controller = Controller(
        handler,
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticate,
        auth_require_tls=False,
    )
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


def make_adapter(port: int, **kw: Any) -> SmtpAdapter:
    options: dict[str, Any] = {"sender": f"Tidings <notify@{DOMAIN}>", "timeout": CLIENT_TIMEOUT}
    return SmtpAdapter("127.0.0.1", port, **(options | kw))


class SmtpPeer:
    retry_after_seconds = None
    reject_code = RejectCode.CONTENT_REJECTED  # 550 5.7.1 after the content
    webhooks = False

    def __init__(self, handler: Handler):
        self.handler = handler

    def message(self, outcome: Outcome, channel: str) -> OutboundMessage:
        to = f"member+{new_id()[:8]}@example.test"
        self.handler.outcomes[to] = outcome
        return OutboundMessage("email", to, "conformance body", subject="Hello")

    def undelivered_code(self, channel: str) -> RejectCode:
        return RejectCode.BOUNCED

    def requests_recorded(self, idempotency_key: str) -> int:
        expected = f"<{message_id_for(idempotency_key, DOMAIN)}>"
        return sum(1 for m in self.handler.received if m["Message-ID"] == expected)

    def settle(self) -> None:
        pytest.skip("smtp has no lookup")

    def webhook(self, *args: Any, **kwargs: Any) -> WebhookRequest:
        raise AssertionError("smtp has no webhooks")


class TestSmtpConformance(AdapterConformance):
    @pytest.fixture
    def adapter(self, server: tuple[Handler, int]) -> SmtpAdapter:
        return make_adapter(server[1])

    @pytest.fixture
    def peer(self, server: tuple[Handler, int]) -> SmtpPeer:
        return SmtpPeer(server[0])


def mail(to: str = "member@example.test", body: str = "Hello", **kw: Any) -> OutboundMessage:
    return OutboundMessage("email", to, body, subject="Subject", **kw)


def test_message_id_is_derived_from_the_attempt_key(server: tuple[Handler, int]) -> None:
    handler, port = server
    adapter = make_adapter(port)
    first = adapter.send(mail(), "intent-9:attempt:1")
    again = adapter.send(mail(), "intent-9:attempt:1")
    adapter.send(mail(), "intent-9:attempt:2")
    assert isinstance(first, Accepted) and first == again
    assert first.provider_message_id == message_id_for("intent-9:attempt:1", DOMAIN)
    ids = [m["Message-ID"] for m in handler.received]
    assert ids[0] == ids[1] != ids[2]  # a duplicate is recognisable as one


def test_content_arrives_intact_with_dot_stuffing_and_attachments(server: tuple[Handler, int]):
    handler, port = server
    ref = AttachmentRef("r-1", 3, "report.csv", "text/csv", "/reports/r-1")
    adapter = make_adapter(port, attachment_loader=lambda r: b"a,b\r\n1,2\r\n")
    body = "line one\n.starts with a dot\n..two dots\nlast"
    assert isinstance(adapter.send(mail(body=body, attachments=(ref,)), "k"), Accepted)
    [received] = handler.received
    text, attachment = [p for p in received.walk() if not p.is_multipart()]
    assert text.get_content().replace("\r\n", "\n").rstrip("\n") == body
    assert attachment.get_filename() == "report.csv"


@pytest.mark.parametrize(
    ("outcome", "kind", "code"),
    [
        ("rcpt_reject", Rejected, RejectCode.INVALID_DESTINATION),
        ("rcpt_busy", Retryable, RejectCode.PROVIDER_ERROR),
        ("rate_limit", Retryable, RejectCode.RATE_LIMITED),
        ("reject", Rejected, RejectCode.CONTENT_REJECTED),
        ("timeout", Indeterminate, RejectCode.TIMEOUT),
    ],
)
def test_outcomes_by_phase(
    server: tuple[Handler, int], outcome: str, kind: type, code: RejectCode
) -> None:
    handler, port = server
    handler.outcomes["x@example.test"] = outcome
    result = make_adapter(port).send(mail("x@example.test"), "k")
    assert isinstance(result, kind) and result.code is code
    # Only an outcome after the content was sent may have queued the message.
    assert len(handler.received) == (0 if outcome.startswith("rcpt") else 1)


def test_auth_success_and_failure(server: tuple[Handler, int]) -> None:
    _, port = server
    good = make_adapter(port, credentials=(USER, PASSWORD))
    assert isinstance(good.send(mail(), "k"), Accepted)
    bad = make_adapter(port, credentials=(USER, "wrong"))
    result = bad.send(mail(), "k2")
    assert isinstance(result, Rejected) and result.code is RejectCode.AUTH_FAILED
    assert PASSWORD not in repr(good)


def test_required_starttls_that_is_not_offered_sends_nothing(server: tuple[Handler, int]) -> None:
    handler, port = server
    context = ssl.create_default_context()
    result = make_adapter(port, starttls=True, ssl_context=context).send(mail(), "k")
    assert isinstance(result, Retryable) and handler.received == []


def test_nobody_listening_is_retryable() -> None:
    result = make_adapter(free_port()).send(mail(), "k")
    assert isinstance(result, Retryable) and result.code is RejectCode.PROVIDER_ERROR


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (SmtpReply("content", 250, "ok", "id@x"), Accepted("id@x", raw_status="250 ok")),
        (SmtpReply("content", None, "SMTPServerDisconnected('closed')"), Indeterminate),
        (SmtpReply("content", 552, "5.2.2 Mailbox full"), RejectCode.BOUNCED),
        (SmtpReply("rcpt", 553, "mailbox name not allowed"), RejectCode.INVALID_DESTINATION),
        (SmtpReply("auth", 535, "5.7.8 Authentication failed"), RejectCode.AUTH_FAILED),
        (SmtpReply("mail", 550, "sender rejected"), RejectCode.UNKNOWN),
        (SmtpReply("connect", None, "ConnectionRefusedError()"), Retryable),
        (SmtpReply("data", 421, "4.3.2 Service shutting down"), Retryable),
    ],
)
def test_reply_mapping_table(reply: SmtpReply, expected: Any) -> None:
    result = make_adapter(25).parse_response(reply)
    if isinstance(expected, RejectCode):
        assert isinstance(result, Rejected) and result.code is expected
    elif isinstance(expected, type):
        assert isinstance(result, expected)
    else:
        assert result == expected


def test_built_from_settings() -> None:
    adapter = build(
        "smtp",
        {
            "host": "smtp.example.test",
            "port": "587",
            "starttls": "true",
            "from": "a@b.test",
            "username": USER,
            "password": PASSWORD,
        },
    )
    assert isinstance(adapter, SmtpAdapter) and PASSWORD not in repr(adapter)
