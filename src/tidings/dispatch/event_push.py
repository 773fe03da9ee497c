"""Pushing application-facing events to a tenant's endpoint.

Pages come from the same gap-free cursor as `GET /v1/events`, are POSTed as
one signed JSON body, and the cursor moves only after a 2xx: delivery is at
least once and in order; receivers dedupe by event id. A failing endpoint
backs off exponentially, up to five minutes.

The endpoint is the tenant's choice, so it may be slow on purpose: a
tarpit answering a byte every few seconds held the worker's maintenance
round (heartbeats, sweeps, alerts, reconciliation) for 45 s. Pushes run on
a pool of their own, at most `concurrency` tenants at a time, each request
within one overall deadline, to addresses the policy allows
(tidings/platform/outbound.py).
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from tidings.domain.clock import Clock
from tidings.platform.outbound import OutboundClient, OutboundError
from tidings.platform.signing import signed_headers
from tidings.platform.vault import Vault
from tidings.store import event_webhooks, events
from tidings.store.database import Database
from tidings.store.isolation import FAILS_ALONE, ROW_UNREADABLE, note_alone

log = logging.getLogger("tidings.events")
# A leased endpoint is not due elsewhere; the lease outlasts the request.
LEASE = timedelta(seconds=30)
LEASE_MARGIN = timedelta(seconds=10)
IDLE_POLL = timedelta(seconds=1)
MAX_BACKOFF_SECONDS = 300
PAGE = 100


class EventPusher:
    """Pushes on threads of its own: nothing else in the worker waits on a
    tenant's server, and one tenant holds at most one thread, for at most
    the client's deadline."""

    def __init__(
        self, db: Database, vault: Vault, clock: Clock, client: OutboundClient, concurrency: int
    ) -> None:
        self._db = db
        self._vault = vault
        self._clock = clock
        self._client = client
        self.concurrency = max(1, concurrency)
        self._lease = max(LEASE, timedelta(seconds=client.deadline_seconds) + LEASE_MARGIN)
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="event-push")
        self._in_flight: set[Future[int]] = set()
        self._lock = threading.Lock()

    def start_due(self) -> list[Future[int]]:
        """Lease as many due endpoints as there are free threads and push
        one page to each; returns at once."""
        with self._lock:
            room = self.concurrency - len(self._in_flight)
        if room <= 0:
            return []
        now = self._clock.now()
        with self._db.transaction() as conn:
            due = event_webhooks.lease_due(conn, now, now + self._lease, room)
        started = []
        for sub in due:
            future = self._pool.submit(self._push_one, sub)
            with self._lock:
                self._in_flight.add(future)
            future.add_done_callback(self._finished)
            started.append(future)
        return started

    def push_once(self) -> int:
        """One round, waited for (tests step with this): events delivered."""
        started = self.start_due()
        try:
            return sum(future.result() for future in started)
        finally:
            with self._lock:
                self._in_flight.difference_update(started)

    def run(self, stop: threading.Event, interval: float) -> None:
        try:
            while not stop.wait(interval):
                try:
                    self.start_due()
                except Exception as exc:  # the database may be away: try next round
                    log.warning("event push: %s", type(exc).__name__)
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _finished(self, future: Future[int]) -> None:
        with self._lock:
            self._in_flight.discard(future)
        if not future.cancelled() and future.exception() is not None:
            log.warning("event push failed: %s", type(future.exception()).__name__)

    def _push_one(self, sub: dict[str, Any]) -> int:
        try:
            return self._push_page(sub)
        except FAILS_ALONE as exc:
            # An event or secret of this tenant that cannot be read or sent
            # (written around the checks): noted and alerted for the tenant,
            # its endpoint backs off like a failing one; the others push on.
            now = self._clock.now()
            tenant = sub["tenant_id"]
            note_alone(self._db, tenant, "event_push", "event_webhook", exc, now)
            with self._db.transaction() as conn:
                until = now + timedelta(seconds=MAX_BACKOFF_SECONDS)
                event_webhooks.failed(conn, tenant, ROW_UNREADABLE, now, until)
            return 0

    def _push_page(self, sub: dict[str, Any]) -> int:
        tenant = sub["tenant_id"]
        now = self._clock.now()
        with self._db.transaction() as conn:
            page = events.page(
                conn, tenant, events.Cursor(int(sub["cursor_txid"]), sub["cursor_id"]), PAGE
            )
        if not page.items:
            with self._db.transaction() as conn:
                event_webhooks.idle(conn, tenant, now + IDLE_POLL)
            return 0
        secret = self._vault.decrypt(sub["secret_ciphertext"])
        error = _post(self._client, tenant, sub["url"], secret, page.items, now)
        now = self._clock.now()  # the request may have taken its whole deadline
        with self._db.transaction() as conn:
            if error is None:
                next_at = now if len(page.items) == PAGE else now + IDLE_POLL
                event_webhooks.delivered(conn, tenant, page.next, now, next_at)
                return len(page.items)
            backoff = min(2 ** (sub["failures"] + 1), MAX_BACKOFF_SECONDS)
            event_webhooks.failed(conn, tenant, error, now, now + timedelta(seconds=backoff))
        return 0


def _post(
    client: OutboundClient,
    tenant: str,
    url: str,
    secret: str,
    items: list[dict[str, Any]],
    now: datetime,
) -> str | None:
    """None on a 2xx; else a short, stable reason (never the server's words)."""
    body = json.dumps({"events": [_event(e) for e in items]}, default=str).encode()
    # One id per batch, the same on its retries: its first and last event.
    batch_id = f"events_{items[0]['id']}_{items[-1]['id']}" if items else "events_empty"
    headers = {
        "content-type": "application/json",
        **signed_headers(secret, body, int(now.timestamp()), batch_id),
    }
    try:
        answer = client.post(url, body, headers, tenant)
    except OutboundError as exc:
        return exc.code
    return None if 200 <= answer.status_code < 300 else f"HTTP {answer.status_code}"


def _event(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": row["type"],
        "intent_id": row["intent_id"],
        "job_id": row["job_id"],
        "payload": row["payload"],
        "created_at": row["created_at"],
    }
