"""Announcing alerts: a signed JSON POST per opening, escalation and
resolution, with bounded retries and a timeout, delivered at least once.

Delivery state lives on the alert row (`notified_severity`,
`resolved_notified_at`, `notify_after`), so a receiver that is down only
delays announcements: the next round retries with backoff. Rows are
claimed by pushing `notify_after` forward, so the HTTP call happens
outside any transaction and two workers never announce the same change.

Receivers verify `X-Tidings-Signature` (`t=<unix>,v1=<hex>`, HMAC-SHA256
over `"<t>." + body`) with :func:`verify_signature`, and may drop repeats
by `X-Tidings-Delivery`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import httpx

from tidings.platform.signing import signed_headers
from tidings.store import alerts as stored
from tidings.store.database import Database, Row

log = logging.getLogger("tidings.alerts")


class AlertWebhook:
    """POSTs one JSON announcement with bounded retries and a timeout."""

    def __init__(
        self,
        url: str,
        secret: str | None,
        *,
        timeout: float = 5.0,
        attempts: int = 3,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.secret = secret
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.sleep = sleep

    def post(self, payload: Mapping[str, Any], delivery_id: str) -> bool:
        body = json.dumps(payload, sort_keys=True, default=str).encode()
        with httpx.Client(timeout=self.timeout) as client:
            for attempt in range(self.attempts):
                if attempt:
                    self.sleep(self.backoff * 2 ** (attempt - 1))
                status = self._once(client, body, str(payload.get("type")), delivery_id)
                if status is not None and 200 <= status < 300:
                    return True
                if status is not None and 400 <= status < 500 and status not in (408, 429):
                    return False  # the receiver refuses it; retrying now will not help
        return False

    def _once(self, client: httpx.Client, body: bytes, kind: str, delivery: str) -> int | None:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "tidings-alerts",
            "X-Tidings-Event": kind,
            # Stable across retries: the receiver can drop a repeat.
            "X-Tidings-Delivery": delivery,
        }
        if self.secret:
            headers.update(signed_headers(self.secret, body, int(time.time()), delivery))
        try:
            return client.post(self.url, content=body, headers=headers).status_code
        except httpx.HTTPError as exc:
            log.warning("alert webhook: %s", type(exc).__name__)
            return None


def deliver_pending(
    db: Database, webhook: AlertWebhook, now: datetime, *, budget_seconds: float = 10.0
) -> int:
    """Announce what is owed; returns how many were delivered. Failures are
    retried on a later round with backoff, so an outage of the receiver
    delays announcements but never loses them."""
    with db.transaction() as conn:
        claimed = stored.claim_notifications(
            conn,
            now,
            lease_until=now + timedelta(seconds=60),
            resolved_since=now - timedelta(days=1),
            limit=20,
        )
    started, delivered = time.monotonic(), 0
    for row in claimed:
        if time.monotonic() - started > budget_seconds:
            break  # the rest keep their lease and go out on the next round
        announced = _announced(row)
        payload = {"type": f"alert.{announced}", "alert": alert_json(row)}
        ok = webhook.post(payload, f"{row['id']}:{announced}:{row['severity']}")
        with db.transaction() as conn:
            if ok:
                delivered += 1
                stored.mark_notified(
                    conn, row["tenant_id"], row["id"], announced, row["severity"], now
                )
            else:
                wait = min(900.0, 30.0 * 2 ** row["notify_failures"])
                retry_at = now + timedelta(seconds=wait)
                stored.mark_notify_failed(conn, row["tenant_id"], row["id"], retry_at)
    return delivered


def _announced(row: Row) -> str:
    if row["resolved_at"] is not None:
        return "resolved"
    return "escalated" if row["notified_severity"] == "warning" else "opened"


def alert_json(row: Row) -> dict[str, Any]:
    """An alert row as the webhook and the console show it."""
    keys = (
        "id",
        "tenant_id",
        "key",
        "condition",
        "severity",
        "summary",
        "details",
        "opened_at",
        "updated_at",
        "resolved_at",
    )
    return {k: jsonable(row[k]) for k in keys}


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
