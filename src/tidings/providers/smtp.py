"""Any SMTP relay, through smtplib: optional implicit TLS or STARTTLS, optional AUTH.

What an SMTP failure means depends on *when* it happened:

    before the message content was sent    nothing was accepted:
        4xx, refused, reset, timed out          Retryable
        5xx                                     Rejected
    after the content was sent (final reply)
        250                                     Accepted
        4xx / 5xx                               Retryable / Rejected: the server
                                                said no to this very message
        no reply (timeout, disconnect)          Indeterminate: it may have queued it

So the DATA phase is driven by hand rather than through ``sendmail``, which
cannot tell a refused DATA command from a lost final reply.

The Message-ID is derived from our attempt key, so a duplicate that reaches a
mailbox or a relay's logs is recognisable as one. There is no lookup and no
webhook: bounces come back later as mail. ``verify_webhook`` raises
ProviderConfigError rather than returning [] so that an HTTP route wired to
this adapter fails loudly instead of answering 2xx to anyone who posts to it.
"""

from __future__ import annotations

import hashlib
import re
import smtplib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from email.message import EmailMessage
from email.utils import parseaddr
from typing import Any, Literal

from tidings.domain.redaction import redact_text
from tidings.providers import settings as cfg
from tidings.providers.base import DEFAULT_TIMEOUT, ProviderAdapter
from tidings.providers.errors import ProviderConfigError
from tidings.providers.messages import AttachmentLoader, OutboundMessage, WebhookRequest
from tidings.providers.outcomes import (
    Accepted,
    Indeterminate,
    Observation,
    RejectCode,
    Rejected,
    Retryable,
    SendResult,
)
from tidings.providers.registry import register

Step = Literal["connect", "hello", "auth", "mail", "rcpt", "data", "content"]
AUTH_REPLIES = frozenset({530, 534, 535, 538})
_ENHANCED = re.compile(r"\b[245]\.(\d{1,3})\.\d{1,3}\b")
_RATE_WORDS = ("rate", "too many", "throttl")
_EOL = re.compile(rb"\r\n|\n|\r")


@dataclass(frozen=True)
class SmtpRequest:
    envelope_from: str
    recipient: str = field(repr=False)
    content: bytes = field(repr=False)
    message_id: str = ""


@dataclass(frozen=True)
class SmtpReply:
    """Where the dialogue ended, and what the server said (code None: no answer)."""

    step: Step
    code: int | None
    text: str
    message_id: str = ""

    @property
    def content_sent(self) -> bool:
        return self.step == "content"


def message_id_for(idempotency_key: str, domain: str) -> str:
    """The Message-ID (without <>) every attempt with this key carries."""
    return f"tidings.{hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]}@{domain}"


class SmtpAdapter(ProviderAdapter):
    name = "smtp"
    channels = frozenset({"email"})

    def __init__(
        self,
        host: str,
        port: int = 25,
        *,
        sender: str | None = None,
        credentials: tuple[str, str] | None = None,
        starttls: bool = False,
        implicit_tls: bool = False,
        message_id_domain: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        attachment_loader: AttachmentLoader | None = None,
    ):
        super().__init__(timeout=timeout, attachment_loader=attachment_loader)
        self._address = (host, port)
        self._sender = sender
        self._credentials = credentials
        self._tls = (starttls, implicit_tls)
        self._domain = message_id_domain
        self._ssl_context = ssl_context

    def __repr__(self) -> str:
        host, port = self._address
        return f"SmtpAdapter(host={host!r}, port={port})"

    # --- send ---------------------------------------------------------------

    def build_request(self, message: OutboundMessage, idempotency_key: str) -> SmtpRequest:
        sender = message.sender or self._sender
        if not sender:
            raise ProviderConfigError("smtp needs a sender: set 'from' or the message sender")
        envelope_from = parseaddr(sender)[1]
        domain = self._domain or envelope_from.rpartition("@")[2] or "tidings.invalid"
        message_id = message_id_for(idempotency_key, domain)
        mime = self._mime(message, sender, message_id)
        return SmtpRequest(envelope_from, message.to, mime.as_bytes(), message_id)

    def _mime(self, message: OutboundMessage, sender: str, message_id: str) -> EmailMessage:
        mime = EmailMessage()
        mime["From"] = sender
        mime["To"] = message.to
        mime["Subject"] = message.subject or ""
        mime["Message-ID"] = f"<{message_id}>"
        mime.set_content(message.body)
        for ref in message.attachments:
            maintype, _, subtype = ref.content_type.partition("/")
            mime.add_attachment(
                self.load_attachment(ref),
                maintype=maintype or "application",
                subtype=subtype or "octet-stream",
                filename=ref.filename,
            )
        return mime

    def transmit(self, request: SmtpRequest) -> SmtpReply:
        try:
            smtp = self._connect()
        except (OSError, smtplib.SMTPException) as exc:
            return _failed("connect", exc)
        try:
            return replace(self._dialogue(smtp, request), message_id=request.message_id)
        finally:
            _quit(smtp)

    def _connect(self) -> smtplib.SMTP:
        host, port = self._address
        if self._tls[1]:
            return smtplib.SMTP_SSL(host, port, timeout=self.timeout, context=self._context())
        return smtplib.SMTP(host, port, timeout=self.timeout)

    def _context(self) -> ssl.SSLContext:
        return self._ssl_context or ssl.create_default_context()

    def _dialogue(self, smtp: smtplib.SMTP, request: SmtpRequest) -> SmtpReply:
        step: Step = "hello"
        try:
            self._hello(smtp)
            step = "mail"
            code, text = smtp.mail(request.envelope_from)
            if code != 250:
                return SmtpReply("mail", code, _text(text))
            step = "rcpt"
            code, text = smtp.rcpt(request.recipient)
            if code not in (250, 251):
                return SmtpReply("rcpt", code, _text(text))
            step = "data"
            return _data(smtp, request.content)
        except (OSError, smtplib.SMTPException) as exc:
            return _failed(step, exc)

    def _hello(self, smtp: smtplib.SMTP) -> None:
        smtp.ehlo()
        if self._tls[0]:
            smtp.starttls(context=self._context())
            smtp.ehlo()
        if self._credentials is not None:
            smtp.login(*self._credentials)

    def parse_response(self, response: SmtpReply) -> SendResult:
        if response.content_sent:
            return _after_content(response)
        return _before_content(response)

    def verify_webhook(self, request: WebhookRequest) -> list[Observation]:
        raise ProviderConfigError("smtp has no delivery webhooks: bounces arrive later as mail")


def _data(smtp: smtplib.SMTP, content: bytes) -> SmtpReply:
    code, text = smtp.docmd("DATA")
    if code != 354:
        return SmtpReply("data", code, _text(text))
    try:
        smtp.send(_dot_stuffed(content))
        code, text = smtp.getreply()
    except (OSError, smtplib.SMTPException) as exc:
        return SmtpReply("content", None, repr(exc))
    return SmtpReply("content", code, _text(text))


def _dot_stuffed(content: bytes) -> bytes:
    """RFC 5321 transparency: CRLF line ends, a leading '.' doubled, then CRLF.CRLF."""
    lines = _EOL.split(content)
    if lines and lines[-1] == b"":
        lines.pop()
    stuffed = [b"." + line if line.startswith(b".") else line for line in lines]
    return b"\r\n".join(stuffed) + b"\r\n.\r\n"


def _after_content(reply: SmtpReply) -> SendResult:
    if reply.code is None:
        code = (
            RejectCode.TIMEOUT if "timed out" in reply.text.lower() else RejectCode.PROVIDER_ERROR
        )
        return Indeterminate(code, f"no final reply to DATA: {redact_text(reply.text)}")
    if reply.code == 250:
        return Accepted(reply.message_id, raw_status=f"{reply.code} {reply.text}")
    return _refused(reply)


def _before_content(reply: SmtpReply) -> SendResult:
    if reply.code is None:
        return Retryable(
            RejectCode.PROVIDER_ERROR, None, f"{reply.step}: {redact_text(reply.text)}"
        )
    return _refused(reply)


def _refused(reply: SmtpReply) -> SendResult:
    detail = f"{reply.step}: {reply.code} {redact_text(reply.text)}"
    code = reply.code or 0
    if 400 <= code < 500:
        rate = any(word in reply.text.lower() for word in _RATE_WORDS)
        return Retryable(
            RejectCode.RATE_LIMITED if rate else RejectCode.PROVIDER_ERROR, None, detail
        )
    return Rejected(_reject_code(reply), detail)


def _reject_code(reply: SmtpReply) -> RejectCode:
    if reply.code in AUTH_REPLIES:
        return RejectCode.AUTH_FAILED
    enhanced = _ENHANCED.search(reply.text)
    subject = enhanced.group(1) if enhanced else None
    if subject == "1":  # X.1.x: addressing
        return RejectCode.INVALID_DESTINATION
    if subject == "2":  # X.2.x: mailbox (full, disabled)
        return RejectCode.BOUNCED
    if subject == "7":  # X.7.x: security or policy
        return RejectCode.CONTENT_REJECTED
    if reply.step == "rcpt":
        return RejectCode.INVALID_DESTINATION
    return RejectCode.CONTENT_REJECTED if reply.step in ("data", "content") else RejectCode.UNKNOWN


def _failed(step: Step, exc: BaseException) -> SmtpReply:
    if isinstance(exc, smtplib.SMTPResponseException):
        return SmtpReply(step, exc.smtp_code, _text(exc.smtp_error))
    return SmtpReply(step, None, repr(exc))


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _quit(smtp: smtplib.SMTP) -> None:
    try:
        smtp.quit()
    except (OSError, smtplib.SMTPException):
        smtp.close()


def _from_settings(settings: Mapping[str, Any]) -> SmtpAdapter:
    user, password = cfg.optional(settings, "username"), cfg.optional(settings, "password")
    return SmtpAdapter(
        cfg.required(settings, "host", "smtp"),
        int(cfg.number(settings, "port", 25, "smtp")),
        sender=cfg.optional(settings, "from"),
        credentials=(user, password) if user and password else None,
        starttls=cfg.flag(settings, "starttls", False, "smtp"),
        implicit_tls=cfg.flag(settings, "implicit_tls", False, "smtp"),
        message_id_domain=cfg.optional(settings, "message_id_domain"),
        timeout=cfg.timeout(settings, "smtp"),
        attachment_loader=cfg.loader(settings),
    )


register("smtp", _from_settings)
