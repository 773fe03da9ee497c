"""Vonage's SMS API wire over the simulator core, so the real `VonageAdapter`
(providers/vonage.py) talks to the simulator unchanged.

What it speaks, each from Vonage's published description of the SMS API
(vendored as tests/providers/peers/vonage_sms.yml, Nexmo/api-specification
`definitions/sms.yml` 1.0.10; https://developer.vonage.com/en/api/sms) and
its guides:

* `POST /sms/json` with the `NewMessage` parameters (`api_key`,
  `api_secret`, `from`, `to`, `text`, `type`, `ttl`, `status-report-req`,
  `callback`, `client-ref`), form-encoded as the description says
  (https://developer.vonage.com/en/messaging/sms/code-snippets/send-an-sms).
  A JSON body (`Content-Type: application/json`) is read too: clients send
  one to this endpoint, but no Vonage page describing it was found. The
  snippet's HTTP Basic credentials are not read: the adapter sends
  `api_key`/`api_secret` parameters.
* every answer is HTTP 200 with `{"message-count", "messages": [...]}`:
  `status` "0" with `message-id`, `to`, `remaining-balance`,
  `message-price`, `network` and the `client-ref` sent, or a non-zero
  `status` with its `error-text` (the `SMS` and `Error` schemas). Statuses
  from the description's `x-errors` table
  (https://developer.vonage.com/en/messaging/sms/guides/troubleshooting-sms):
  1 Throttled (the core's 429; no Retry-After exists in this protocol),
  2 Missing Parameters, 3 Invalid Parameters, 4 Invalid Credentials,
  5 Internal Error (the core's 500), 6 Invalid Message ("an un-recognized
  number prefix": the core's INVALID_DESTINATION), 7 Number Barred (the
  core's OPTED_OUT), 15 Invalid Sender Address (SENDER_REJECTED), 29
  Non-Whitelisted Destination (ACCOUNT_RESTRICTED).
* `client-ref`: "your own reference of up to 40 characters" (`NewMessage`),
  echoed in the answer and in every delivery receipt. What Vonage does with
  a longer one is not published: the wire answers status 3.
* delivery receipts (the `delivery-receipt` callback, `DeliveryReceipt`
  schema, posted as JSON): `msisdn`, `to` (the sender id), `network-code`,
  `messageId`, `price`, `status` (delivered, expired, failed, rejected,
  accepted, buffered, unknown), `scts` (`YYMMDDHHMM`), `err-code`,
  `api-key`, `client-ref`, `message-timestamp` (`YYYY-MM-DD HH:MM:SS`) and,
  signatures enabled, `timestamp`, `nonce` and `sig`
  (https://developer.vonage.com/en/messaging/sms/guides/delivery-receipts).
  `sig` is Vonage's signature of every other parameter with the account's
  signature secret: "MD5 hash" by default, or an MD5, SHA-1, SHA-256 or
  SHA-512 HMAC (https://developer.vonage.com/en/getting-started/concepts/signing-messages),
  computed by the adapter's own `signature` (as the Twilio wire signs
  with the Twilio adapter's).

The core decides everything (faults, outcomes, receipts, duplicates,
reordering); this module only translates. Vonage takes no idempotency key:
the core is given our `client-ref` where it is there, and otherwise a key of
the request's own, so a repeat is a new message as at Vonage. Message ids
are the core's (`SM...`): the adapter treats them as opaque. One request is
one message (no concatenated parts are simulated). The receipt's `to` is
the account's sender id: the core keeps no sender.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import httpx

from tidings.providers.simulator import views
from tidings.providers.simulator.config import SimulatorConfig
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.profiles import profile
from tidings.providers.simulator.records import Receipt, Reply
from tidings.providers.vonage import CLIENT_REF_LIMIT, signature

SEND_PATH = "/sms/json"
NETWORK = "12345"  # the description's example network code
PRICE = "0.03330000"  # the description's example message price
# The core's refusal codes in Vonage's words: (status, error-text).
_REFUSALS = {
    "INVALID_DESTINATION": ("6", "Invalid Message"),
    "OPTED_OUT": ("7", "Number Barred"),
    "REQUEST_INVALID": ("3", "Invalid Parameters"),
    "SENDER_REJECTED": ("15", "Invalid Sender Address"),
    "ACCOUNT_RESTRICTED": ("29", "Non-Whitelisted Destination"),
}
_REQUIRED = ("api_key", "api_secret", "from", "to", "text")
_serial = itertools.count(1)


@dataclass(frozen=True)
class VonageAccount:
    """The simulated account: its API key and secret, and the signature
    secret and method its delivery receipts are signed with."""

    api_secret: str
    signature_secret: str
    api_key: str = "tidings1"  # eight characters, as the description's api_key
    signature_method: str = "md5hash"  # Vonage's default
    sender_id: str = "Tidings"


def account_of(config: SimulatorConfig) -> VonageAccount:
    """The simulator's webhook secret is the API secret and the signature secret."""
    return VonageAccount(api_secret=config.webhook_secret, signature_secret=config.webhook_secret)


def is_vonage_path(method: str, path: str) -> bool:
    return method == "POST" and path == SEND_PATH


def params_of(content_type: str, body: bytes) -> dict[str, str]:
    """The request's parameters, from a form or a JSON body."""
    if "json" in content_type.lower():
        try:
            parsed = json.loads(body)
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in parsed.items()} if isinstance(parsed, dict) else {}
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def answer(core: SimulatorCore, account: VonageAccount, params: Mapping[str, str]) -> Reply:
    """Vonage's answer to one send, from the core: always HTTP 200."""
    missing = [name for name in _REQUIRED if not params.get(name)]
    if missing:
        return _refused("2", f"Missing {missing[0]}")
    given = (params["api_key"], params["api_secret"])
    if not (
        hmac.compare_digest(given[0].encode(), account.api_key.encode())
        and hmac.compare_digest(given[1].encode(), account.api_secret.encode())
    ):
        return _refused("4", "Bad Credentials")
    reference = params.get("client-ref", "")
    if len(reference) > CLIENT_REF_LIMIT:
        return _refused("3", f"Invalid client-ref: more than {CLIENT_REF_LIMIT} characters")
    to = params["to"]
    payload: dict[str, Any] = {
        "to": to,
        "body": params["text"],
        "sender": params["from"],
        "idempotency_key": reference or f"vonage-request-{next(_serial)}",
        "metadata": {},
    }
    reply = core.send("sms", payload, played="vonage")
    latency = reply.latency_s
    if reply.status_code in (200, 201):
        message = {
            "to": to,
            "message-id": str(reply.body["message_id"]),
            "status": "0",
            "remaining-balance": "10.00000000",
            "message-price": PRICE,
            "network": NETWORK,
        }
        if reference:
            message["client-ref"] = reference
        body = {"message-count": "1", "messages": [message]}
        return Reply(200, body, latency_s=latency, stall_s=reply.stall_s)
    if reply.status_code == 429:
        status, text = "1", "Throttled"
    elif reply.status_code >= 500:
        status, text = "5", "Internal Error"
    else:
        status, text = _REFUSALS.get(str(reply.body.get("code")), ("6", "Invalid Message"))
    refused = _refused(status, text)
    return Reply(200, refused.body, latency_s=latency)


def _refused(status: str, text: str) -> Reply:
    return Reply(200, {"message-count": "1", "messages": [{"status": status, "error-text": text}]})


def delivery_receipt(
    receipt: Receipt, account: VonageAccount, timestamp: int
) -> tuple[dict[str, str], bytes]:
    """A receipt as Vonage posts it: a signed JSON delivery receipt."""
    event = receipt.event
    at = datetime.fromisoformat(str(event["occurred_at"])).astimezone(UTC)
    params = {
        "msisdn": receipt.to.lstrip("+"),
        "to": account.sender_id,
        "network-code": NETWORK,
        "messageId": str(event["message_id"]),
        "price": PRICE,
        "status": str(event["status"]),
        "scts": at.strftime("%y%m%d%H%M"),
        "err-code": str(event.get("code") or "0"),
        "api-key": account.api_key,
        "message-timestamp": at.strftime("%Y-%m-%d %H:%M:%S"),
        "timestamp": str(timestamp),
        # Random at Vonage; derived here, so a run is repeatable.
        "nonce": str(uuid.UUID(bytes=_digest(f"{event['event_id']}|{timestamp}"))),
    }
    reference = views.echoed_reference(profile(receipt.profile), event, receipt.query)
    if reference:
        params["client-ref"] = reference
    params["sig"] = signature(params, account.signature_secret, account.signature_method)
    body = json.dumps(params, separators=(",", ":")).encode()
    return {"Content-Type": "application/json"}, body


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()[:16]


class VonageTransport(httpx.BaseTransport):
    """An httpx transport answering Vonage's SMS API from a core in this
    process: the real adapter, given a client over it, runs unchanged."""

    def __init__(self, core: SimulatorCore, account: VonageAccount | None = None):
        self._core = core
        self._account = account

    @property
    def account(self) -> VonageAccount:
        # Without an explicit account, follow the core's config as it changes.
        return self._account or account_of(self._core.config)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        if not is_vonage_path(request.method, request.url.path):
            return httpx.Response(404, json={"code": "NOT_FOUND"})
        params = params_of(request.headers.get("Content-Type", ""), request.content)
        reply = answer(self._core, self.account, params)
        if reply.stall_s:
            # Accepted and recorded by the core; the caller never hears back.
            raise httpx.ReadTimeout("simulated stall after accept", request=request)
        return httpx.Response(reply.status_code, json=reply.body, headers=reply.headers)
