"""Twilio SendGrid's own wire over the simulator core, so the real
`SendGridAdapter` (providers/sendgrid.py) talks to the simulator unchanged.

What it speaks, each from SendGrid's published documentation:

* `POST /v3/mail/send`, a JSON body (`personalizations[].to[]`, `from`,
  `subject`, `content[]` or `template_id`, `custom_args`), authenticated by
  `Authorization: Bearer <API key>`; answers `202` with an empty body and
  the message id in `X-Message-Id`
  (https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send,
  and the vendored description tests/providers/peers/sendgrid_v3.json:
  `required: [personalizations, from]`, responses 202/400/401/403/413/500).
* errors as `{"errors": [{"message", "field", "help"}]}`, HTTP 400 for a
  request SendGrid will not take, each with the field at fault and the
  message of SendGrid's Mail Send errors table: `personalizations` ("You
  must have at least one personalization."), `personalizations.0.to` ("The
  to array is required for all personalization objects..."), `from`,
  `subject`, `content`, `personalizations.0.to.0.email` ("Does not contain
  a valid address."), `personalizations.0` ("Each email address in the
  personalization block should be unique between to, cc, and bcc.")
  (https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors,
  https://support.sendgrid.com/hc/en-us/articles/34677918767131);
  a wrong or missing key is 401 (globalErrors:401 in sendgrid_v3.json; its
  message here is the one SendGrid answers, not found on a docs page);
  `500` with `errors[].message` for its own fault.
* `429` with `X-RateLimit-Limit`, `X-RateLimit-Remaining: 0` and
  `X-RateLimit-Reset` (epoch seconds) and `{"errors": [{"field": null,
  "message": "too many requests"}]}`
  (https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits).
  No `Retry-After` is published: the simulator's is dropped, its
  `retry_after_seconds` becomes the reset time. The in-process transport
  adds a `Date` from the core's clock (the adapter reads the reset against
  it); over HTTP the server's own `Date` stands.
* the Event Webhook: a JSON array of events (`email`, `timestamp`,
  `event`, `sg_event_id`, `sg_message_id` whose first dot-separated part is
  the X-Message-Id, `smtp-id`), the send's `custom_args` as top-level
  fields; `bounce` with `type` (`bounce` or `blocked`), `reason`, `status`;
  `dropped` with its `reason`; `delivered` with `response`; `spamreport`
  (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event).
  Signed (the Signed Event Webhook): ECDSA P-256 over the
  `X-Twilio-Email-Event-Webhook-Timestamp` header's value followed by the
  raw body, SHA-256, the DER signature base64 in
  `X-Twilio-Email-Event-Webhook-Signature`; the verification key is
  published as base64 DER
  (https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features).

The core decides everything (faults, outcomes, receipts, duplicates,
reordering); this module only translates. SendGrid takes no idempotency
key: the core is given our key from `custom_args` where it is there, and
otherwise a key of the request's own, so a repeat is a new message as at
SendGrid. Message ids are the core's (`EM...`): the adapter treats them as
opaque. The signing key pair is derived from the simulator's
`webhook_secret`; `GET /v3/user/webhooks/event/settings/signed` gives the
verification key to configure, as SendGrid's API does.

Where SendGrid has no shape for what the core decided, the wire says so:
SendGrid refuses no suppressed recipient at send time (it accepts, then
posts a `dropped` event, "Unsubscribed Address"), so the core's `OPTED_OUT`
refusal answers a 400 without a field, which suppresses nobody; the
core's `SENDER_REJECTED` is the 403 on `from` SendGrid answers for a From
without a verified Sender Identity
(https://www.twilio.com/docs/sendgrid/for-developers/sending-email/sender-identity;
the message text is SendGrid's answer, not on a docs page);
`ACCOUNT_RESTRICTED` is a 403 "access forbidden" without a field (no
published message). A request with more than one recipient is answered
501 NOT_SUPPORTED: the core simulates one message per request.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import itertools
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tidings.providers.sendgrid import KEY_ARG, SIGNATURE_HEADER, TIMESTAMP_HEADER
from tidings.providers.simulator import views
from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.profiles import profile
from tidings.providers.simulator.records import Receipt, Reply

SEND_PATH = "/v3/mail/send"
# Where SendGrid hands out the Event Webhook's verification key: an operator
# pointing a worker at the simulator reads it here, as from SendGrid
# (https://www.twilio.com/docs/sendgrid/api-reference/webhooks/get-signed-event-webhooks-public-key).
PUBLIC_KEY_PATH = "/v3/user/webhooks/event/settings/signed"
HELP = "http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html"
RATE_LIMIT = 600  # X-RateLimit-Limit: the docs' example values are 500 and 150
# P-256's group order: a derived private scalar must lie in [1, n - 1].
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_serial = itertools.count(1)
# The core's refusal codes in SendGrid's words: (HTTP status, field, message).
_REFUSALS: dict[str, tuple[int, str | None, str]] = {
    "INVALID_DESTINATION": (
        400,
        "personalizations.0.to.0.email",
        "Does not contain a valid address.",
    ),
    "REQUEST_INVALID": (
        400,
        "personalizations.0",
        "Each email address in the personalization block should be unique between to, cc, and bcc.",
    ),
    "SENDER_REJECTED": (
        403,
        "from",
        "The from address does not match a verified Sender Identity. "
        "Mail cannot be sent until this error is resolved.",
    ),
    "ACCOUNT_RESTRICTED": (403, None, "access forbidden"),
}
_BOUNCE_STATUS = {"bounce": "5.0.0", "blocked": "4.0.0"}  # the SMTP status an event names


@dataclass(frozen=True)
class SendGridAccount:
    """The simulated account: its API key and the seed of its Event Webhook
    signing key pair."""

    api_key: str
    signing_seed: str

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        digest = hashlib.sha256(b"tidings-simulator-sendgrid|" + self.signing_seed.encode())
        scalar = int.from_bytes(digest.digest(), "big") % (_P256_ORDER - 1) + 1
        return ec.derive_private_key(scalar, ec.SECP256R1())

    def public_key(self) -> str:
        """The verification key as SendGrid's mail settings show it: base64 DER."""
        der = (
            self.private_key()
            .public_key()
            .public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return base64.b64encode(der).decode()


def account_of(config: SimulatorConfig) -> SendGridAccount:
    """The simulator's webhook secret is the API key and seeds the signing key."""
    return SendGridAccount(config.webhook_secret, config.webhook_secret)


def is_sendgrid_path(method: str, path: str) -> bool:
    return (method == "POST" and path == SEND_PATH) or (
        method == "GET" and path.startswith(PUBLIC_KEY_PATH)
    )


def answer(
    core: SimulatorCore,
    account: SendGridAccount,
    method: str,
    path: str,
    body: bytes,
    authorization: str | None,
) -> Reply:
    """SendGrid's answer to one request, from the core."""
    if not is_sendgrid_path(method, path):
        return _error(404, None, "not found")
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        key.encode(), account.api_key.encode()
    ):
        return _error(401, None, "The provided authorization grant is invalid, expired, or revoked")
    if method == "GET":
        return Reply(200, {"id": "simulator", "public_key": account.public_key()})
    return _send(core, body)


def _send(core: SimulatorCore, raw: bytes) -> Reply:
    try:
        sent = json.loads(raw)
    except ValueError:
        # The message of an unparsable body is not published.
        return _error(400, None, "Bad Request")
    if not isinstance(sent, dict):
        return _error(400, None, "Bad Request")
    invalid = _invalid(sent)
    if invalid is not None:
        return invalid
    [personalization] = sent["personalizations"]
    to = str(personalization["to"][0]["email"])
    args = {**(sent.get("custom_args") or {}), **(personalization.get("custom_args") or {})}
    key = args.get(KEY_ARG)
    content = sent.get("content") or [{"value": f"template {sent.get('template_id')}"}]
    payload: dict[str, Any] = {
        "to": to,
        "body": str(content[0].get("value", "")),
        "subject": sent.get("subject"),
        "sender": str(sent["from"]["email"]),
        "idempotency_key": key if isinstance(key, str) and key else _own_key(),
        "metadata": {},
    }
    reply = core.send("email", payload, played="sendgrid")
    latency = reply.latency_s
    if reply.status_code in (200, 201):
        headers = {"X-Message-Id": str(reply.body["message_id"])}
        return Reply(202, {}, headers, latency_s=latency, stall_s=reply.stall_s)
    if reply.status_code == 429:
        retry = float(reply.body.get("retry_after_seconds", 1))
        headers = {
            "X-RateLimit-Limit": str(RATE_LIMIT),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(math.ceil(core.now() + retry)),
        }
        limited = _error(429, None, "too many requests")
        return Reply(429, limited.body, headers, latency_s=latency)
    if reply.status_code >= 500:
        return Reply(500, {"errors": [{"message": "Internal Server Error"}]}, latency_s=latency)
    status, field, message = _REFUSALS.get(str(reply.body.get("code")), (400, None, "Bad Request"))
    refused = _error(status, field, message)
    return Reply(status, refused.body, latency_s=latency)


def _own_key() -> str:
    return f"sendgrid-request-{next(_serial)}"


def _invalid(sent: dict[str, Any]) -> Reply | None:
    """The Mail Send errors table's refusals of the request's shape."""
    personalizations = sent.get("personalizations")
    if not isinstance(personalizations, list) or not personalizations:
        return _error(400, "personalizations", "You must have at least one personalization.")
    recipients: list[list[Any]] = [
        p["to"] for p in personalizations if isinstance(p, dict) and isinstance(p.get("to"), list)
    ]
    if len(recipients) != len(personalizations) or not all(
        to and all(isinstance(r, dict) and r.get("email") for r in to) for to in recipients
    ):
        return _error(
            400,
            "personalizations.0.to",
            "The to array is required for all personalization objects, and must have at "
            "least one email object with a valid email address.",
        )
    sender = sent.get("from")
    if not isinstance(sender, dict) or not sender.get("email"):
        return _error(
            400,
            "from",
            "The from object must be provided for every email send. It is an object that "
            "requires the email parameter, but may also contain a name parameter.",
        )
    templated = bool(sent.get("template_id"))
    if sent.get("subject") is None and not templated:
        return _error(
            400,
            "subject",
            "The subject is required. You can get around this requirement if you use a "
            "template with a subject defined or if every personalization has a subject defined.",
        )
    if not sent.get("content") and not templated:
        return _error(
            400,
            "content",
            "Unless a valid template_id is provided, the content parameter is required. "
            "There must be at least one defined content block.",
        )
    if sum(len(to) for to in recipients) > 1:
        return Reply(501, {"code": "NOT_SUPPORTED", "detail": "one recipient per request"})
    return None


def _error(status: int, field: str | None, message: str) -> Reply:
    return Reply(status, {"errors": [{"message": message, "field": field, "help": HELP}]})


def event_webhook(
    receipt: Receipt, account: SendGridAccount, timestamp: int
) -> tuple[dict[str, str], bytes]:
    """A receipt as SendGrid posts it: signed JSON headers and body (an
    array of one event)."""
    event = receipt.event
    raw, code = str(event["status"]), event.get("code")
    message_id = str(event["message_id"])
    played = profile(receipt.profile)
    posted: dict[str, Any] = {
        "email": receipt.to,
        "timestamp": int(datetime.fromisoformat(str(event["occurred_at"])).timestamp()),
        "smtp-id": f"<{message_id}@simulator.tidings>",
        "event": raw,
        # Duplicates of one transition share the event id, as SendGrid's retries do.
        "sg_event_id": str(event["event_id"]),
        "sg_message_id": f"{message_id}.filter0001.simulator.0",
    }
    reference = views.echoed_reference(played, event, receipt.query)
    if reference:
        posted[KEY_ARG] = reference  # custom_args come back as top-level fields
    if raw == "bounce":
        kind = str(code or "bounce")
        posted |= {
            "type": kind,
            "reason": f"simulated {kind}",
            "status": _BOUNCE_STATUS.get(kind, "5.0.0"),
        }
    elif raw == "dropped":
        posted["reason"] = str(code or "")
    elif raw == "delivered":
        posted["response"] = "250 OK"
    body = json.dumps([posted], separators=(",", ":")).encode()
    stamp = str(timestamp)
    signature = account.private_key().sign(stamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: base64.b64encode(signature).decode(),
        TIMESTAMP_HEADER: stamp,
    }
    return headers, body


def to_response(reply: Reply, date: float | None = None) -> httpx.Response:
    """The httpx response for a reply: 202 has an empty body."""
    headers = dict(reply.headers)
    if date is not None:
        headers["Date"] = email.utils.formatdate(date, usegmt=True)
    if reply.status_code == 202:
        return httpx.Response(202, headers=headers)
    return httpx.Response(reply.status_code, json=reply.body, headers=headers)


class SendGridTransport(httpx.BaseTransport):
    """An httpx transport answering SendGrid's wire from a core in this
    process: the real adapter, given a client over it, runs unchanged."""

    def __init__(self, core: SimulatorCore, account: SendGridAccount | None = None):
        self._core = core
        self._account = account

    @property
    def account(self) -> SendGridAccount:
        # Without an explicit account, follow the core's config as it changes.
        return self._account or account_of(self._core.config)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        reply = answer(
            self._core,
            self.account,
            request.method,
            request.url.path,
            request.content,
            request.headers.get("Authorization"),
        )
        if reply.stall_s:
            # Accepted and recorded by the core; the caller never hears back.
            raise httpx.ReadTimeout("simulated stall after accept", request=request)
        return to_response(reply, self._core.now())
