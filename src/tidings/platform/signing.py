"""Signatures on what tidings sends out (alerts, application events):
`t=<unix>,v1=<hex HMAC-SHA256 of "<t>." + body>`. The time is signed so a
receiver can refuse a replayed request."""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Tidings-Signature"


def sign(secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def verify_signature(
    secret: str, header: str, body: bytes, *, now: float | None = None, tolerance: float = 300.0
) -> bool:
    """What a receiver runs: the signature matches and is recent."""
    parts = dict(p.strip().split("=", 1) for p in header.split(",") if "=" in p)
    stamp, given = parts.get("t", ""), parts.get("v1", "")
    if not (stamp.isascii() and stamp.isdigit()) or not given:
        return False
    expected = sign(secret, body, int(stamp)).split("v1=", 1)[1]
    fresh = abs((time.time() if now is None else now) - int(stamp)) <= tolerance
    return hmac.compare_digest(expected, given) and fresh
