"""Twilio's own wire over the simulator core, so the real `TwilioAdapter`
(providers/twilio.py) talks to the simulator unchanged.

What it speaks, each from Twilio's published documentation:

* `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded
  (`To`, `Body`, `From` or `MessagingServiceSid`, `StatusCallback`,
  `ValidityPeriod`), HTTP Basic auth with the Account SID and Auth Token
  (https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource,
  https://www.twilio.com/docs/usage/requests-to-twilio). Answers `201` with
  the Message resource, `status` `queued`, dates in RFC 2822.
* errors as Twilio's JSON error body `{code, message, more_info, status}`
  (https://www.twilio.com/docs/usage/twilios-response): 20003 on a bad
  credential (401), 20404 for an unknown Message (404), 20429 "Too Many
  Requests" (429) with no `Retry-After` (none is documented:
  https://www.twilio.com/docs/api/errors/20429), 20500 for its own fault.
* `GET .../Messages/{Sid}.json` and the Messages list filtered by `To`,
  newest first, paged with `next_page_uri`
  (https://www.twilio.com/docs/messaging/api/message-resource#read-multiple-message-resources).
* status callbacks: a form post of `MessageSid`, `MessageStatus`,
  `ErrorCode`... to the `StatusCallback` URL, signed with
  `X-Twilio-Signature`, base64 HMAC-SHA1 keyed by the Auth Token over the
  full URL followed by each POST parameter sorted by name
  (https://www.twilio.com/docs/usage/webhooks/webhooks-security,
  https://www.twilio.com/docs/messaging/guides/track-outbound-message-status).

The core decides everything (faults, outcomes, receipts, duplicates,
reordering); this module only translates. Twilio takes no idempotency key:
the core is given our reference from the StatusCallback's query where it is
there, and otherwise a key of the request's own, so a repeat is a new message
as at Twilio.
"""

from __future__ import annotations

import base64
import email.utils
import hmac
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.core import LookupFailed, NotSupported, SimulatorCore
from tidings.providers.simulator.records import Receipt, Reply
from tidings.providers.twilio import KEY_PARAM, TwilioAdapter, signature

API_VERSION = "2010-04-01"
_PATH = re.compile(r"^/2010-04-01/Accounts/(?P<account>[^/]+)/Messages(?:/(?P<sid>[^/]+))?\.json$")
# Our normalized refusal codes in Twilio's words: the first Twilio code the
# real adapter maps to each (providers/twilio.py `code_map`).
_TWILIO_CODE = {
    code.value: int(raw)
    for raw, code in reversed(list(TwilioAdapter.code_map.items()))
    if raw.isdigit()
}
_serial = itertools.count(1)


@dataclass(frozen=True)
class TwilioAccount:
    """The credentials the simulated Twilio account accepts and signs with."""

    account_sid: str = "AC" + "5" * 32
    auth_token: str = "simulator-twilio-auth-token"


def account_of(config: SimulatorConfig) -> TwilioAccount:
    """The simulated account: the simulator's webhook secret is its Auth
    Token, which both authenticates requests and signs status callbacks."""
    return TwilioAccount(auth_token=config.webhook_secret)


def is_twilio_path(path: str) -> bool:
    return _PATH.match(path) is not None


def answer(
    core: SimulatorCore,
    account: TwilioAccount,
    method: str,
    path: str,
    query: Mapping[str, str],
    form: Mapping[str, str],
    authorization: str | None,
) -> Reply:
    """Twilio's answer to one request, from the core."""
    matched = _PATH.match(path)
    if matched is None:
        return _error(404, 20404, "The requested resource was not found")
    if matched["account"] != account.account_sid or not _authorized(account, authorization):
        return _error(401, 20003, "Authenticate")
    sid = matched["sid"]
    try:
        if method == "POST" and sid is None:
            return _send(core, account, form)
        if method == "GET" and sid is not None:
            found = core.lookup(sid)
            if found is None:
                return _error(404, 20404, f"The requested resource {path} was not found")
            return Reply(200, _resource(account, found))
        if method == "GET":
            return _list(core, account, path, query)
    except NotSupported as exc:
        return Reply(501, {"code": "NOT_SUPPORTED", "detail": str(exc)})
    except LookupFailed:
        return _error(500, 20500, "Internal Server Error")
    return _error(405, 20004, "Method not allowed")


def _authorized(account: TwilioAccount, authorization: str | None) -> bool:
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        given = base64.b64decode(encoded, validate=True)
    except ValueError:
        return False
    expected = f"{account.account_sid}:{account.auth_token}".encode()
    return hmac.compare_digest(given, expected)


def _send(core: SimulatorCore, account: TwilioAccount, form: Mapping[str, str]) -> Reply:
    to, body = form.get("To"), form.get("Body")
    if not to:
        return _error(400, 21604, "A 'To' phone number is required.")
    sender = form.get("From") or form.get("MessagingServiceSid")
    if not sender:
        return _error(400, 21603, "A 'From' phone number is required.")
    if not body:
        return _error(400, 21602, "Message body is required.")
    callback = form.get("StatusCallback") or ""
    reference = parse_qs(urlsplit(callback).query).get(KEY_PARAM, [""])[0]
    payload = {
        "to": to,
        "body": body,
        "sender": sender,
        "idempotency_key": reference or f"twilio-request-{next(_serial)}",
        "metadata": {},
    }
    reply = core.send("sms", payload, played="twilio")
    if reply.status_code in (200, 201):
        message = str(reply.body["message_id"])
        now = core.now()
        created = {
            "message_id": message,
            "status": "queued",
            "code": None,
            "created_at": now,
            "updated_at": now,
        }
        resource = _resource(account, created, to=to, sender=sender, body=body)
        return Reply(201, resource, latency_s=reply.latency_s, stall_s=reply.stall_s)
    if reply.status_code == 429:
        # Twilio documents no Retry-After for 20429: the simulator's is dropped.
        limited = _error(429, 20429, "Too Many Requests")
        return Reply(429, limited.body, latency_s=reply.latency_s)
    if reply.status_code >= 500:
        failed = _error(500, 20500, "Internal Server Error")
        return Reply(500, failed.body, latency_s=reply.latency_s)
    code = _TWILIO_CODE.get(str(reply.body.get("code")), 21211)
    refused = _error(400, code, f"Message refused ({code})")
    return Reply(400, refused.body, latency_s=reply.latency_s)


def _list(
    core: SimulatorCore, account: TwilioAccount, path: str, query: Mapping[str, str]
) -> Reply:
    """One page of the Messages list, newest first, paged as Twilio pages it:
    `next_page_uri` names the next page (`Page`, and a `PageToken` naming the
    last message of this one, so messages arriving meanwhile do not shift
    it) and is null only on the last page. A list truncated to one page
    with a null `next_page_uri` told the adapter a message beyond it did
    not exist, and an attempt the provider had was judged never received
    and sent again (docs/reliability.md, the third hour)."""
    to = query.get("To")
    if not to:
        return _error(400, 21604, "The list search needs 'To' here")
    size = min(int(query.get("PageSize") or 50), 1000)
    number = int(query.get("Page") or 0)
    found = core.search("sms", to, 0.0, None, played="twilio")
    found.sort(key=lambda m: (_stamp(m["created_at"]), str(m["message_id"])), reverse=True)
    start = 0
    token = query.get("PageToken")
    if token:
        try:
            start = [str(m["message_id"]) for m in found].index(token.removeprefix("PA")) + 1
        except ValueError:
            return _error(400, 20001, f"Invalid PageToken {token}")
    chosen = found[start : start + size]
    following = None
    if start + size < len(found):
        params = urlencode(
            {
                "To": to,
                "PageSize": size,
                "Page": number + 1,
                "PageToken": "PA" + str(chosen[-1]["message_id"]),
            }
        )
        following = f"{path}?{params}"
    body = {
        "messages": [_resource(account, m) for m in chosen],
        "page": number,
        "page_size": size,
        "uri": path,
        "first_page_uri": f"{path}?{urlencode({'To': to, 'PageSize': size, 'Page': 0})}",
        "previous_page_uri": None,
        "next_page_uri": following,
    }
    return Reply(200, body)


def _resource(
    account: TwilioAccount,
    found: Mapping[str, Any],
    *,
    to: str | None = None,
    sender: str | None = None,
    body: str | None = None,
) -> dict[str, Any]:
    sid = str(found["message_id"])
    code = found.get("code")
    return {
        "sid": sid,
        "account_sid": account.account_sid,
        "api_version": API_VERSION,
        "to": to,
        "from": sender,
        "body": body,
        "status": found["status"],
        "error_code": int(code) if code is not None and str(code).isdigit() else None,
        "error_message": None,
        "direction": "outbound-api",
        "num_segments": "1",
        "date_created": _rfc2822(found["created_at"]),
        "date_updated": _rfc2822(found["updated_at"]),
        "date_sent": None if found["status"] == "queued" else _rfc2822(found["updated_at"]),
        "uri": f"/{API_VERSION}/Accounts/{account.account_sid}/Messages/{sid}.json",
    }


def _error(status: int, code: int, message: str) -> Reply:
    body = {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }
    return Reply(status, body)


def _stamp(value: object) -> float:
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(str(value)).timestamp()


def _rfc2822(value: object) -> str:
    return email.utils.formatdate(_stamp(value), usegmt=False).replace("-0000", "+0000")


def status_callback(
    receipt: Receipt, account: TwilioAccount, url: str
) -> tuple[dict[str, str], bytes]:
    """A receipt as Twilio posts it to the StatusCallback `url` (our
    reference in its query): the form's headers and body."""
    event = receipt.event
    params = {
        "AccountSid": account.account_sid,
        "ApiVersion": API_VERSION,
        "MessageSid": str(event["message_id"]),
        "SmsSid": str(event["message_id"]),
        "MessageStatus": str(event["status"]),
        "SmsStatus": str(event["status"]),
    }
    if event.get("code"):
        params["ErrorCode"] = str(event["code"])
    body = urlencode(sorted(params.items())).encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Twilio-Signature": signature(account.auth_token.encode(), url, params),
    }
    return headers, body


class TwilioTransport(httpx.BaseTransport):
    """An httpx transport answering Twilio's wire from a core in this
    process: the real adapter, given a client over it, runs unchanged."""

    def __init__(self, core: SimulatorCore, account: TwilioAccount | None = None):
        self._core = core
        self.account = account or account_of(core.config)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        form: dict[str, str] = {}
        if request.method == "POST":
            request.read()
            form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        query = dict(request.url.params)
        reply = answer(
            self._core,
            self.account,
            request.method,
            request.url.path,
            query,
            form,
            request.headers.get("Authorization"),
        )
        if reply.stall_s:
            # Accepted and recorded by the core; the caller never hears back.
            raise httpx.ReadTimeout("simulated stall after accept", request=request)
        return httpx.Response(reply.status_code, json=reply.body, headers=reply.headers)
