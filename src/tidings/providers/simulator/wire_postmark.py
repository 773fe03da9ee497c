"""Postmark's own wire over the simulator core, so the real `PostmarkAdapter`
(providers/postmark.py) talks to the simulator unchanged.

What it speaks, each from Postmark's published documentation:

* `POST /email`, a JSON body (`From`, `To`, `Subject`, `TextBody` or
  `HtmlBody`, `MessageStream`, `Tag`, `Metadata`), authenticated by the
  `X-Postmark-Server-Token` header; answers `200` with `{To, SubmittedAt,
  MessageID, ErrorCode: 0, Message: "OK"}`
  (https://postmarkapp.com/developer/api/email-api).
* errors as `{ErrorCode, Message}`: a wrong or missing token is HTTP 401
  (ErrorCode 10, "Bad or missing API token"); a request Postmark will not
  take is HTTP 422 with its ErrorCode: 300 "Invalid email request" (no
  From, no body, a bad or more than 50 recipients), 402 "Invalid JSON", 406
  "Inactive recipient"; 429 "Rate Limit Exceeded"; and 500 for its own
  fault (https://postmarkapp.com/developer/api/overview#response-codes,
  https://postmarkapp.com/developer/api/overview#error-codes).
* `GET /messages/outbound/{messageid}/details` (`Status`, `Metadata`,
  `MessageEvents` oldest first; an unknown id is 422 ErrorCode 701 "Message
  not found") and the outbound search `GET /messages/outbound?count=&offset=`
  filtered by one Metadata field, `metadata_{name}=value`, newest first, as
  `{TotalCount, Messages}`
  (https://postmarkapp.com/developer/api/messages-api,
  https://postmarkapp.com/blog/messageevents-every-message-event-in-one-api-call).
* webhooks: a JSON POST per event, `RecordType` `Delivery`, `Bounce` (with
  `Type` and `TypeCode` from Postmark's bounce types, `Inactive` after a
  hard bounce) or `SpamComplaint` (the address deactivated for good),
  unsigned and authenticated only by the Basic credentials written into the
  webhook URL
  (https://postmarkapp.com/developer/webhooks/delivery-webhook,
  https://postmarkapp.com/developer/webhooks/bounce-webhook,
  https://postmarkapp.com/developer/webhooks/spam-complaint-webhook,
  https://postmarkapp.com/developer/api/bounce-api#bounce-types,
  https://postmarkapp.com/developer/webhooks/webhooks-overview).

The core decides everything (faults, outcomes, receipts, duplicates,
reordering); this module only translates. Postmark takes no idempotency
key: the core is given our key from `Metadata` where it is there, and
otherwise a key of the request's own, so a repeat is a new message as at
Postmark. Message ids are the core's (`EM...`), not Postmark's UUIDs: the
adapter treats them as opaque.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from tidings.providers.correlation import chunk, unchunk
from tidings.providers.postmark import KEY_FIELD, METADATA_KEY_FIELDS, METADATA_VALUE_LIMIT
from tidings.providers.simulator import views
from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.core import LookupFailed, NotSupported, SimulatorCore
from tidings.providers.simulator.profiles import profile
from tidings.providers.simulator.records import Receipt, Reply

SEND_PATH = "/email"
SEARCH_PATH = "/messages/outbound"
_DETAILS = re.compile(r"^/messages/outbound/(?P<id>[^/]+)/details$")
MAX_RECIPIENTS = 50
# Postmark's bounce types and their TypeCode (the bounce API's table).
TYPE_CODES = {
    "HardBounce": 1,
    "Transient": 2,
    "Unsubscribe": 16,
    "DnsError": 256,
    "SpamNotification": 512,
    "Unknown": 2048,
    "SoftBounce": 4096,
    "BadEmailAddress": 100000,
    "SpamComplaint": 100001,
    "ManuallyDeactivated": 100002,
    "Blocked": 100006,
    "DMARCPolicy": 100009,
}
# After these Postmark deactivates the address (support article 815, as the
# adapter cites it): later sends to it answer ErrorCode 406.
_DEACTIVATING = frozenset({"HardBounce", "SpamComplaint"})
# Bounce types that are temporary: the details list them as a `Transient`
# event. Which MessageEvents type each bounce type gets is not published;
# this follows the adapter's reading (Transient undelivered, Bounced failed).
_TEMPORARY = frozenset({"SoftBounce", "Transient", "DnsError"})
_serial = itertools.count(1)


@dataclass(frozen=True)
class PostmarkServer:
    """The simulated Postmark server: its API token and the Basic credentials
    its webhook URL carries."""

    server_token: str
    webhook_password: str
    webhook_user: str = "tidings-simulator"
    server_id: int = 1
    message_stream: str = "outbound"


def server_of(config: SimulatorConfig) -> PostmarkServer:
    """The simulator's webhook secret is both the server token and the
    webhook password (Postmark signs nothing: the credentials are all)."""
    return PostmarkServer(config.webhook_secret, config.webhook_secret)


def is_postmark_path(method: str, path: str) -> bool:
    if method == "POST":
        return path == SEND_PATH
    return method == "GET" and (path == SEARCH_PATH or _DETAILS.match(path) is not None)


def answer(
    core: SimulatorCore,
    server: PostmarkServer,
    method: str,
    path: str,
    query: Mapping[str, str],
    body: bytes,
    token: str | None,
) -> Reply:
    """Postmark's answer to one request, from the core."""
    if token != server.server_token:
        # The overview: wrong or missing headers are HTTP 401.
        return _error(401, 10, "Bad or missing API token")
    try:
        if method == "POST" and path == SEND_PATH:
            return _send(core, body)
        details = _DETAILS.match(path)
        if method == "GET" and details is not None:
            return _details(core, details["id"])
        if method == "GET" and path == SEARCH_PATH:
            return _search(core, query)
    except NotSupported as exc:
        return Reply(501, {"code": "NOT_SUPPORTED", "detail": str(exc)})
    except LookupFailed:
        return _failed()
    # The overview: a resource that does not exist is HTTP 404.
    return Reply(404, {"ErrorCode": 404, "Message": "Entity doesn't exist"})


def _send(core: SimulatorCore, raw: bytes) -> Reply:
    try:
        sent = json.loads(raw)
    except ValueError:
        return _error(422, 402, "Invalid JSON")
    if not isinstance(sent, dict):
        return _error(422, 402, "Invalid JSON")
    to, sender = str(sent.get("To") or ""), str(sent.get("From") or "")
    body = sent.get("TextBody") or sent.get("HtmlBody")
    if not sender or not to or not body:
        return _error(422, 300, "Invalid email request: From, To and a body are required")
    if len(to.split(",")) > MAX_RECIPIENTS:
        return _error(422, 300, f"Invalid email request: more than {MAX_RECIPIENTS} recipients")
    metadata = sent.get("Metadata")
    key = unchunk(metadata, KEY_FIELD) if isinstance(metadata, dict) else None
    payload: dict[str, Any] = {
        "to": to,
        "body": str(body),
        "subject": sent.get("Subject"),
        "sender": sender,
        "idempotency_key": key or f"postmark-request-{next(_serial)}",
        "metadata": {},
    }
    reply = core.send("email", payload, played="postmark")
    if reply.status_code in (200, 201):
        accepted = {
            "To": to,
            "SubmittedAt": views.iso(core.now()),
            "MessageID": str(reply.body["message_id"]),
            "ErrorCode": 0,
            "Message": "OK",
        }
        return Reply(200, accepted, latency_s=reply.latency_s, stall_s=reply.stall_s)
    if reply.status_code == 429:
        # No Retry-After is published for Postmark's 429: the simulator's is dropped.
        limited = _error(429, 429, "Rate Limit Exceeded")
        return Reply(429, limited.body, latency_s=reply.latency_s)
    if reply.status_code >= 500:
        return Reply(500, _failed().body, latency_s=reply.latency_s)
    if reply.body.get("code") == "OPTED_OUT":
        inactive = _error(422, 406, "The recipient has been marked as inactive.")
        return Reply(422, inactive.body, latency_s=reply.latency_s)
    # An address Postmark cannot send to is a fault of the request: 300.
    invalid = _error(422, 300, f"Invalid 'To' address: '{to}'.")
    return Reply(422, invalid.body, latency_s=reply.latency_s)


def _details(core: SimulatorCore, message_id: str) -> Reply:
    found = core.lookup(message_id)
    if found is None:
        return _error(422, 701, f"Message not found ({message_id})")
    status, event = _state(str(found["status"]), found.get("code"))
    details = _message(core, found, status)
    details["MessageEvents"] = []
    if event is not None:
        # The core's view names no recipient: the event's Recipient stays empty.
        details["MessageEvents"].append(
            {"Recipient": "", "Type": event, "ReceivedAt": found["updated_at"], "Details": {}}
        )
    return Reply(200, details)


def _search(core: SimulatorCore, query: Mapping[str, str]) -> Reply:
    try:
        count, offset = int(query["count"]), int(query["offset"])
    except (KeyError, ValueError):
        # Both are required; the ErrorCode for their absence is not published.
        return _error(422, 300, "count and offset are required")
    wanted = [(k[len("metadata_") :], v) for k, v in query.items() if k.startswith("metadata_")]
    first = f"{KEY_FIELD}_0"
    if len(wanted) != 1 or wanted[0][0] != first:
        raise NotSupported(f"the simulator searches Postmark by metadata_{first} only")
    found = core.find_by_reference("email", wanted[0][1], played="postmark")
    found.reverse()  # newest first, as Postmark lists them
    page = found[offset : offset + count]
    messages = [_message(core, m, _state(str(m["status"]), m.get("code"))[0]) for m in page]
    return Reply(200, {"TotalCount": len(found), "Messages": messages})


def _message(core: SimulatorCore, found: Mapping[str, Any], status: str) -> dict[str, Any]:
    reference = views.echoed_reference(profile("postmark"), dict(found), {})
    return {
        "MessageID": str(found["message_id"]),
        "Status": status,
        "ReceivedAt": found["created_at"],
        "Metadata": _metadata(reference),
    }


def _metadata(reference: str | None) -> dict[str, str]:
    """Our key as the adapter stored it in Metadata (providers/postmark.py)."""
    if not reference:
        return {}
    return chunk(reference, KEY_FIELD, METADATA_VALUE_LIMIT, METADATA_KEY_FIELDS)


def _state(raw_status: str, raw_code: object) -> tuple[str, str | None]:
    """A message's `Status` and its latest MessageEvents `Type`, from the
    core's view in the profile's words (or the simulator's own)."""
    kind = raw_status.lower()
    if kind == "queued":
        return "Queued", None
    if kind in ("delivery", "delivered", "spamcomplaint"):
        return "Sent", "Delivered"
    if kind == "bounce":
        return "Sent", "Transient" if raw_code in _TEMPORARY else "Bounced"
    if kind in ("undelivered", "failed"):
        return "Sent", "Transient" if kind == "undelivered" else "Bounced"
    return "Sent", None


def _error(status: int, code: int, message: str) -> Reply:
    return Reply(status, {"ErrorCode": code, "Message": message})


def _failed() -> Reply:
    # Postmark's 500 carries no ErrorCode of its own (the overview lists none).
    return Reply(500, {"Message": "Internal Server Error"})


def webhook(receipt: Receipt, server: PostmarkServer) -> tuple[dict[str, str], bytes] | None:
    """A receipt as Postmark posts it: JSON headers and body, or None for a
    stage Postmark posts no webhook for (it has none for "Sent")."""
    event = receipt.event
    raw, code = str(event["status"]), event.get("code")
    played = profile(receipt.profile)
    reference = views.echoed_reference(played, event, receipt.query)
    common: dict[str, Any] = {
        "MessageID": str(event["message_id"]),
        "ServerID": server.server_id,
        "MessageStream": server.message_stream,
        "Tag": "",
        "Metadata": _metadata(reference),
    }
    if raw in ("Delivery", "delivered"):
        body = {
            "RecordType": "Delivery",
            "Recipient": receipt.to,
            "DeliveredAt": event["occurred_at"],
            "Details": "smtp;250 2.0.0 OK (simulated)",
            **common,
        }
    elif raw == "Bounce" and isinstance(code, str):
        body = {
            "RecordType": "Bounce",
            # Duplicates of one transition share the event id, so the ID too.
            "ID": int(str(event["event_id"])[2:14], 16),
            "Type": code,
            "TypeCode": TYPE_CODES.get(code, TYPE_CODES["Unknown"]),
            "Name": code,
            "Description": f"Simulated {code}",
            "Details": "simulated bounce",
            "Email": receipt.to,
            "From": "",
            "BouncedAt": event["occurred_at"],
            "DumpAvailable": False,
            "Inactive": code in _DEACTIVATING,
            "CanActivate": True,
            "Subject": "",
            **common,
        }
    elif raw == "SpamComplaint":
        body = {
            "RecordType": "SpamComplaint",
            "ID": int(str(event["event_id"])[2:14], 16),
            "Type": "SpamComplaint",
            # The webhook page's example says 512 where the bounce types
            # table lists 100001 for SpamComplaint: the webhook's is kept.
            "TypeCode": 512,
            "Name": "Spam complaint",
            "Description": "",
            "Details": "simulated spam complaint",
            "Email": receipt.to,
            "From": "",
            "BouncedAt": event["occurred_at"],
            "DumpAvailable": False,
            "Inactive": True,
            "CanActivate": False,
            "Subject": "",
            **common,
        }
    else:
        return None
    credentials = f"{server.webhook_user}:{server.webhook_password}".encode()
    headers = {
        "Content-Type": "application/json",
        "Authorization": "Basic " + base64.b64encode(credentials).decode(),
    }
    return headers, json.dumps(body, separators=(",", ":")).encode()


class PostmarkTransport(httpx.BaseTransport):
    """An httpx transport answering Postmark's wire from a core in this
    process: the real adapter, given a client over it, runs unchanged."""

    def __init__(self, core: SimulatorCore, server: PostmarkServer | None = None):
        self._core = core
        self._server = server

    @property
    def server(self) -> PostmarkServer:
        # Without an explicit server, follow the core's config as it changes.
        return self._server or server_of(self._core.config)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        reply = answer(
            self._core,
            self.server,
            request.method,
            request.url.path,
            dict(request.url.params),
            request.content,
            request.headers.get("X-Postmark-Server-Token"),
        )
        if reply.stall_s:
            # Accepted and recorded by the core; the caller never hears back.
            raise httpx.ReadTimeout("simulated stall after accept", request=request)
        return httpx.Response(reply.status_code, json=reply.body, headers=reply.headers)
