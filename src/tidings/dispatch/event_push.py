"""Pushing application-facing events to a tenant's endpoint.

Pages come from the same gap-free cursor as `GET /v1/events`, are POSTed as
one signed JSON body, and the cursor moves only after a 2xx: delivery is at
least once and in order; receivers dedupe by event id. A failing endpoint
backs off exponentially, up to five minutes, and never blocks other tenants.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import httpx

from tidings.signing import SIGNATURE_HEADER, sign
from tidings.store import events
from tidings.store.database import Database, execute, fetch_all
from tidings.vault import Vault

LEASE = timedelta(seconds=30)
IDLE_POLL = timedelta(seconds=1)
MAX_BACKOFF_SECONDS = 300
PAGE = 100
TIMEOUT = 5.0


def push_due(db: Database, vault: Vault, now: datetime, client: httpx.Client) -> int:
    """Deliver one page to each due endpoint; returns the events delivered."""
    with db.transaction() as conn:
        due = fetch_all(
            conn, "due_event_webhooks", {"now": now, "lease_until": now + LEASE, "limit": 20}
        )
    return sum(_push_one(db, vault, now, client, sub) for sub in due)


def _push_one(
    db: Database, vault: Vault, now: datetime, client: httpx.Client, sub: dict[str, Any]
) -> int:
    tenant = sub["tenant_id"]
    with db.transaction() as conn:
        page = events.page(
            conn, tenant, events.Cursor(int(sub["cursor_txid"]), sub["cursor_id"]), PAGE
        )
    if not page.items:
        with db.transaction() as conn:
            execute(conn, "event_webhook_idle", {"tenant_id": tenant, "next": now + IDLE_POLL})
        return 0
    error = _post(client, sub["url"], vault.decrypt(sub["secret_ciphertext"]), page.items, now)
    with db.transaction() as conn:
        if error is None:
            execute(
                conn,
                "event_webhook_delivered",
                {
                    "tenant_id": tenant,
                    "txid": str(page.next.txid),
                    "id": page.next.id,
                    "now": now,
                    "next": now if len(page.items) == PAGE else now + IDLE_POLL,
                },
            )
            return len(page.items)
        backoff = min(2 ** (sub["failures"] + 1), MAX_BACKOFF_SECONDS)
        execute(
            conn,
            "event_webhook_failed",
            {
                "tenant_id": tenant,
                "error": error,
                "now": now,
                "next": now + timedelta(seconds=backoff),
            },
        )
    return 0


def _post(
    client: httpx.Client, url: str, secret: str, items: list[dict[str, Any]], now: datetime
) -> str | None:
    body = json.dumps({"events": [_event(e) for e in items]}, default=str).encode()
    headers = {
        "content-type": "application/json",
        SIGNATURE_HEADER: sign(secret, body, int(now.timestamp())),
    }
    try:
        response = client.post(url, content=body, headers=headers, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"
    return None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"


def _event(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": row["type"],
        "intent_id": row["intent_id"],
        "job_id": row["job_id"],
        "payload": row["payload"],
        "created_at": row["created_at"],
    }
