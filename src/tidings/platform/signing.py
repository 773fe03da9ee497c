"""Signatures on what tidings sends out (alerts, application events, token
minting), two ways on every request, over the same body:

- Standard Webhooks (https://www.standardwebhooks.com/, signed by its own
  `standardwebhooks` package): `webhook-id`, `webhook-timestamp` and
  `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<t>." + body>`, which
  Svix's and every other Standard Webhooks library verify. Their key is
  the configured secret's bytes, given to those libraries as
  `standard_webhooks_secret(secret)` (`whsec_` + base64).
- `X-Tidings-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>." + body>`,
  what receivers written before the standard one verify.

The time is signed so a receiver can refuse a replayed request; the id is
stable across retries of one delivery so it can drop a repeat."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import UTC, datetime

from standardwebhooks import Webhook

SIGNATURE_HEADER = "X-Tidings-Signature"


def sign(secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def standard_webhooks_secret(secret: str) -> str:
    """The configured secret as Standard Webhooks libraries take it."""
    return "whsec_" + base64.b64encode(secret.encode()).decode()


def signed_headers(secret: str, body: bytes, timestamp: int, message_id: str) -> dict[str, str]:
    """Both signatures of `body`, sent at `timestamp`, as request headers."""
    at = datetime.fromtimestamp(timestamp, UTC)
    return {
        SIGNATURE_HEADER: sign(secret, body, timestamp),
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": Webhook(standard_webhooks_secret(secret)).sign(message_id, at, body),
    }


def verify_signature(
    secret: str, header: str, body: bytes, *, now: float | None = None, tolerance: float = 300.0
) -> bool:
    """What a receiver of `X-Tidings-Signature` runs: it matches and is recent."""
    parts = dict(p.strip().split("=", 1) for p in header.split(",") if "=" in p)
    stamp, given = parts.get("t", ""), parts.get("v1", "")
    if not (stamp.isascii() and stamp.isdigit()) or not given:
        return False
    expected = sign(secret, body, int(stamp)).split("v1=", 1)[1]
    fresh = abs((time.time() if now is None else now) - int(stamp)) <= tolerance
    return hmac.compare_digest(expected, given) and fresh
