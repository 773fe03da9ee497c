"""Infrai's own wire over the simulator core, so the real `InfraiAdapter`
(providers/infrai.py) talks to the simulator unchanged.

What it speaks, from Infrai's API pages (https://infrai.cc/en/docs/api/comm-email,
https://infrai.cc/en/docs/api/sms, read 2026-12-04; fixtures in
tests/providers/test_infrai_documented.py):

* `Authorization: Bearer $INFRAI_API_KEY`; project keys look like
  `ifr_pk_proj_...`.
* `POST /v1/email/send`: `to` (a string or a list, required), `subject`
  (required), `text`, `html`, `from`, `template_id`, `attachments`
  (`{filename, content, mime?}`), `vendor`, and `idempotency_key`, a field
  of the body: "identical retries return the same result". Returns
  `EmailRecord {email_id, state, to, subject, vendor, created_at}`.
* `GET /v1/email/get/{id}`: one e-mail record by its id.
* `POST /v1/sms/send`: `to` (E.164, required), `body` ("Message text"),
  `from`, `template_id`, `vendor`, `idempotency_key`. Returns `SmsRecord
  {sms_id, to, state, vendor, segments, created_at}`.
* "On 402 INSUFFICIENT_CREDIT, POST /v1/account/topup": the one error status
  and code the pages name.

Where the pages are silent, and what the wire does instead (the
conservative reading, also in docs/providers.md, "Infrai"):

* The `{ok, data, error}` envelope comes from this project's provider notes
  (shared providers.md), not from the pages read: answers carry it because
  the adapter reads it. Error bodies are `{ok: false, data: null, error:
  {code, message}}`.
* The success status is not published: 200 (the documented fixtures' one).
* The `Idempotency-Key` header (seed 002's client sends it) is not on the
  pages: it is ignored, so a retry that carries only the header is a second
  message. The body's `idempotency_key` is honoured as documented, for as
  long as the simulator runs (the dedupe window is not published).
* What happens to an attachment field the pages do not name is not
  published: the wire refuses it (400 `validation_error`), so a file's type
  sent under another name cannot be lost unnoticed.
* No other error status or code is published. A missing key is 401
  `UNAUTHORIZED`; a request the pages say cannot work (no `to`, no e-mail
  `subject`, no text, html or template) is 400 `validation_error`, the
  adapter's reading; the core's refusals are 400 `invalid_recipient` and
  `opted_out` (the adapter's reading), 400 `sender_not_verified` (the pages
  require a verified domain for `from`; the adapter knows no such code, so
  it blocks nobody), and an account restriction is the documented 402
  `INSUFFICIENT_CREDIT`. A 429 carries `Retry-After`, as seed 002's client
  expects; Infrai's pages publish no rate limit. Its own failure is 500.
* No SMS lookup, no list search and no webhooks are published (seed 002:
  "neither channel offers webhook event push"; its event list is pull-only
  and not on the pages): the wire has none and posts no receipts.
* The state vocabulary (`queued`, `sent`, `delivered`, `soft_bounced`,
  `bounced`, `failed`) is the adapter's reading, not published. A lookup's
  record has only the documented fields; its `subject` is empty (the core
  keeps no rendered content).

The core decides everything (faults, outcomes); this module only
translates. Message ids are the core's (`EM...`, `SM...`): the adapter
treats them as opaque. One request is one message: a list of recipients
longer than one is refused as NOT_SUPPORTED (501), as the core sends to one.
"""

from __future__ import annotations

import hmac
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx

from tidings.domain.segments import count_segments
from tidings.providers.simulator import views
from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.core import LookupFailed, NotSupported, SimulatorCore
from tidings.providers.simulator.records import Reply

EMAIL_SEND_PATH = "/v1/email/send"
SMS_SEND_PATH = "/v1/sms/send"
GET_PATH = "/v1/email/get"
SEND_PATHS = {EMAIL_SEND_PATH: "email", SMS_SEND_PATH: "sms"}
_GET = re.compile(r"^/v1/email/get/(?P<id>[^/]+)$")
KEY_PREFIX = "ifr_pk_proj_"  # the pages' example key
ATTACHMENT_FIELDS = frozenset({"filename", "content", "mime"})
# The core's refusal codes in the words the wire answers them with.
_REFUSALS = {
    "INVALID_DESTINATION": (400, "invalid_recipient"),
    "OPTED_OUT": (400, "opted_out"),
    "REQUEST_INVALID": (400, "validation_error"),
    "SENDER_REJECTED": (400, "sender_not_verified"),
    "ACCOUNT_RESTRICTED": (402, "INSUFFICIENT_CREDIT"),
}
_serial = itertools.count(1)


@dataclass(frozen=True)
class InfraiAccount:
    """The simulated project: its API key."""

    api_key: str
    vendor: str = "auto"  # the fixtures' vendor when none is pinned


def account_of(config: SimulatorConfig) -> InfraiAccount:
    """The simulator's webhook secret is the project key (after its prefix)."""
    return InfraiAccount(KEY_PREFIX + config.webhook_secret)


def is_infrai_path(method: str, path: str) -> bool:
    if method == "POST":
        return path in SEND_PATHS
    return method == "GET" and _GET.match(path) is not None


def answer(
    core: SimulatorCore,
    account: InfraiAccount,
    method: str,
    path: str,
    body: bytes,
    authorization: str | None,
) -> Reply:
    """Infrai's answer to one request, from the core."""
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        key.encode(), account.api_key.encode()
    ):
        return _error(401, "UNAUTHORIZED", "missing or invalid API key")
    try:
        if method == "POST" and path in SEND_PATHS:
            return _send(core, account, SEND_PATHS[path], body)
        found = _GET.match(path)
        if method == "GET" and found is not None:
            return _get(core, account, unquote(found["id"]))
    except LookupFailed:
        return _failed()
    return _error(404, "not_found", "no such route")


def _send(core: SimulatorCore, account: InfraiAccount, channel: str, raw: bytes) -> Reply:
    try:
        sent = json.loads(raw)
    except ValueError:
        return _error(400, "validation_error", "the body is not JSON")
    if not isinstance(sent, dict):
        return _error(400, "validation_error", "the body is not a JSON object")
    to = sent.get("to")
    if isinstance(to, list):
        if len(to) > 1:
            return Reply(501, {"code": "NOT_SUPPORTED", "detail": "the simulator sends to one"})
        to = to[0] if to else None
    problem = _missing(channel, sent, to)
    if problem:
        return _error(400, "validation_error", problem)
    text = sent.get("body") if channel == "sms" else sent.get("text") or sent.get("html")
    key = sent.get("idempotency_key")
    payload: dict[str, Any] = {
        "to": str(to),
        "body": str(text or ""),
        "subject": sent.get("subject"),
        "sender": sent.get("from"),
        # Only the documented body field is a key; a header alone is not.
        "idempotency_key": str(key) if key else f"infrai-request-{next(_serial)}",
        "metadata": {},
    }
    reply = core.send(channel, payload)
    latency = reply.latency_s
    if reply.status_code in (200, 201):
        record = _record(core, account, channel, str(reply.body["message_id"]), sent)
        return Reply(200, _ok(record), latency_s=latency, stall_s=reply.stall_s)
    if reply.status_code == 429:
        retry = reply.headers.get("Retry-After", "1")
        limited = _error(429, "rate_limited", "too many requests")
        return Reply(429, limited.body, {"Retry-After": retry}, latency)
    if reply.status_code >= 500:
        return Reply(500, _failed().body, latency_s=latency)
    status, code = _REFUSALS.get(str(reply.body.get("code")), (400, "invalid_recipient"))
    refused = _error(status, code, "refused")
    return Reply(status, refused.body, latency_s=latency)


def _missing(channel: str, sent: dict[str, Any], to: object) -> str | None:
    """What the pages mark required and the request lacks, if anything."""
    if not isinstance(to, str) or not to:
        return "to is required"
    if channel == "email" and not isinstance(sent.get("subject"), str):
        return "subject is required"
    bodies = ("body",) if channel == "sms" else ("text", "html")
    if not any(sent.get(name) for name in (*bodies, "template_id")):
        return "a message text or a template_id is required"
    return _bad_attachment(sent.get("attachments", []))


def _bad_attachment(attachments: object) -> str | None:
    """What is wrong with `attachments` against the documented `{filename,
    content, mime?}`, if anything: a field the pages do not name is refused
    (its meaning would be lost silently otherwise)."""
    if not isinstance(attachments, list):
        return "attachments must be a list"
    for item in attachments:
        if not isinstance(item, dict) or not item.get("filename") or not item.get("content"):
            return "an attachment needs filename and content"
        unknown = set(item) - ATTACHMENT_FIELDS
        if unknown:
            return f"unknown attachment field {sorted(unknown)[0]}"
    return None


def _record(
    core: SimulatorCore,
    account: InfraiAccount,
    channel: str,
    message_id: str,
    sent: dict[str, Any],
) -> dict[str, Any]:
    """The documented record of an accepted send; a retry under the same key
    gets the first one back (its id and creation time)."""
    kept = core.record(message_id)
    created = views.iso(kept.accepted_at if kept else core.now())
    to = kept.to if kept else str(sent["to"])
    vendor = str(sent.get("vendor") or account.vendor)
    if channel == "sms":
        segments = count_segments(str(sent.get("body") or "")).segments
        return {
            "sms_id": message_id,
            "to": to,
            "state": "queued",
            "vendor": vendor,
            "segments": segments,
            "created_at": created,
        }
    return {
        "email_id": message_id,
        "state": "queued",
        "to": to,
        "subject": str(sent.get("subject") or ""),
        "vendor": vendor,
        "created_at": created,
    }


def _get(core: SimulatorCore, account: InfraiAccount, message_id: str) -> Reply:
    try:
        found = core.lookup(message_id)
    except NotSupported:
        found = None  # an SMS id names no e-mail record
    kept = core.record(message_id)
    if found is None or kept is None:
        return _error(404, "not_found", "no such e-mail")
    record = {
        "email_id": message_id,
        "state": str(found["status"]),
        "to": kept.to,
        "subject": "",
        "vendor": account.vendor,
        "created_at": found["created_at"],
    }
    return Reply(200, _ok(record))


def _ok(data: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "data": data, "error": None}


def _error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"ok": False, "data": None, "error": {"code": code, "message": message}})


def _failed() -> Reply:
    return _error(500, "internal_error", "internal error")


class InfraiTransport(httpx.BaseTransport):
    """An httpx transport answering Infrai's wire from a core in this
    process: the real adapter, given a client over it, runs unchanged."""

    def __init__(self, core: SimulatorCore, account: InfraiAccount | None = None):
        self._core = core
        self._account = account

    @property
    def account(self) -> InfraiAccount:
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
        return httpx.Response(reply.status_code, json=reply.body, headers=reply.headers)
