"""Signed status webhooks, delivered by a background thread.

Delay, loss, duplication and reordering are decided by the core when the
message is accepted (so they are seeded and repeatable); this module only
delivers what falls due, signs it, and retries a receiver that is down, as
real providers do.

Signature: header `X-Simulator-Signature: t=<unix>,v1=<hex>` where hex is
HMAC-SHA256(secret, f"{t}.{body}") over the raw body bytes, or, when the
receipt's URL carries a query of ours (the Twilio profile's callback
reference), HMAC-SHA256(secret, f"{t}.{query}.{body}"): like Twilio's, the
signature then covers what the URL says. With `wire` on, the `twilio`,
`postmark`, `sendgrid`, `vonage`, `ses` and `aws_sms` profiles' receipts are
those providers' own (wire_twilio.py, wire_postmark.py, wire_sendgrid.py,
wire_vonage.py, and SNS envelopes from wire_aws_events.py); the `infrai`
profile plans none at all (Infrai documents no webhooks: wire_infrai.py).
`t` is wall-clock time of signing,
never the simulated clock, so `advance()` cannot make a receipt look stale
to the receiver.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import httpx

from tidings.providers.simulator import (
    wire_aws,
    wire_aws_events,
    wire_postmark,
    wire_sendgrid,
    wire_twilio,
    wire_vonage,
)
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.records import Receipt

SIGNATURE_HEADER = "X-Simulator-Signature"
# Which provider profile speaks: the receiver reads the receipt in its words.
PROFILE_HEADER = "X-Simulator-Profile"
log = logging.getLogger(__name__)


def signed_part(timestamp: int | str, query: str, body: bytes) -> bytes:
    """What the signature covers: the time, the receipt's own query if any, the body."""
    prefix = f"{timestamp}." + (f"{query}." if query else "")
    return prefix.encode() + body


def sign(secret: str, body: bytes, timestamp: int, query: str = "") -> str:
    mac = hmac.new(secret.encode(), signed_part(timestamp, query, body), hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def render(
    event: dict[str, Any], secret: str, timestamp: int, query: str = "", profile: str = "ideal"
) -> tuple[dict[str, str], bytes]:
    """Headers and body of one webhook delivery."""
    body = json.dumps(event, separators=(",", ":"), sort_keys=True).encode()
    signature = sign(secret, body, timestamp, query)
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature,
        PROFILE_HEADER: profile,
    }
    return headers, body


def receipt_url(webhook_url: str, query: str) -> str:
    if not query:
        return webhook_url
    return webhook_url + ("&" if "?" in webhook_url else "?") + query


class ReceiptDispatcher:
    def __init__(
        self,
        core: SimulatorCore,
        *,
        client: httpx.Client | None = None,
        max_attempts: int = 4,
        retry_backoff_s: float = 0.25,
        idle_wait_s: float = 0.05,
        wall_clock: Callable[[], float] = time.time,
    ):
        self._core = core
        self._client = client or httpx.Client(timeout=5.0)
        self._max_attempts = max_attempts
        self._retry_backoff_s = retry_backoff_s
        self._idle_wait_s = idle_wait_s
        self._wall_clock = wall_clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sim-receipts", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def close(self) -> None:
        self.stop()
        self._client.close()

    def run_once(self) -> int:
        """Deliver every receipt due now, in due order; returns how many were tried."""
        due = self._core.take_due_receipts()
        for receipt in due:
            self._deliver(receipt)
        return len(due)

    def _loop(self) -> None:
        while not self._stop.wait(self._wait_time()):
            try:
                self.run_once()
            except Exception:  # one bad delivery must not end all later ones
                log.exception("receipt delivery failed")

    def _wait_time(self) -> float:
        due = self._core.next_receipt_due()
        if due is None:
            return self._idle_wait_s
        return min(max(due - self._core.now(), 0.0), self._idle_wait_s)

    def _deliver(self, receipt: Receipt) -> None:
        config = self._core.config
        if not config.webhook_url:
            self._core.mark(receipt, "dropped", attempted=False)
            return
        query = urlencode(receipt.query)
        stamp = int(self._wall_clock())
        url = receipt_url(config.webhook_url, query)
        if config.wire and receipt.profile == "twilio":
            account = wire_twilio.account_of(config)
            headers, body = wire_twilio.status_callback(receipt, account, url)
        elif config.wire and receipt.profile == "postmark":
            posted = wire_postmark.webhook(receipt, wire_postmark.server_of(config))
            if posted is None:  # a stage Postmark posts no webhook for ("Sent")
                self._core.mark(receipt, "dropped", attempted=False)
                return
            headers, body = posted
        elif config.wire and receipt.profile == "sendgrid":
            sendgrid = wire_sendgrid.account_of(config)
            headers, body = wire_sendgrid.event_webhook(receipt, sendgrid, stamp)
        elif config.wire and receipt.profile == "vonage":
            vonage = wire_vonage.account_of(config)
            headers, body = wire_vonage.delivery_receipt(receipt, vonage, stamp)
        elif config.wire and receipt.profile in ("ses", "aws_sms"):
            # Through SNS: a signed notification envelope (wire_aws_events.py).
            aws = wire_aws.account_of(config)
            now = self._wall_clock()
            headers, body = wire_aws_events.notification(receipt, aws, config, now)
        else:
            headers, body = render(
                receipt.event, config.webhook_secret, stamp, query, receipt.profile
            )
        if self._post(url, headers, body):
            self._core.mark(receipt, "delivered")
        elif receipt.attempts + 1 < self._max_attempts:
            self._core.mark(receipt, "pending")
            self._core.requeue(receipt, self._retry_backoff_s * 2**receipt.attempts)
        else:
            self._core.mark(receipt, "failed")

    def _post(self, url: str, headers: dict[str, str], body: bytes) -> bool:
        try:
            return self._client.post(url, content=body, headers=headers).is_success
        except httpx.HTTPError as exc:
            log.info("receipt to %s failed: %r", url, exc)
            return False
