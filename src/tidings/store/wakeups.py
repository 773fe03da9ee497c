"""Waking idle workers for intents created alone, after they committed.

Workers idle on `LISTEN tidings_due` (dispatch/runner.py). A create that
sent its `NOTIFY` inside its own transaction would hold PostgreSQL's
notification-queue lock through its commit's WAL flush, and every other
such create waits for it: creates committed one at a time, however many
clients sent them (docs/benchmarks.md, "One wake-up for many creates").
So a create that commits alone (`Tidings.notify` without `conn=`, the
HTTP API) asks this process's `Waker` instead, once it has committed; the
waker sends one `NOTIFY` per channel for every create that asked while the
last one was on its way. A create inside the caller's transaction still
notifies from it: nobody else knows when that commits.

A wake-up that cannot be sent (the database is down) is dropped: idle
workers look for due intents every second anyway, so it costs latency,
never an intent.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg

from tidings.store.database import fetch_all
from tidings.store.queries import q

log = logging.getLogger("tidings.wakeups")


class Waker:
    def __init__(self, url: str, *, prepare: bool = True) -> None:
        self._url = url
        self._prepare = prepare
        self._due: set[str] = set()
        self._changed = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None

    def due(self, channel: str) -> None:
        """An intent of `channel` committed and is due: wake the workers soon."""
        with self._changed:
            if self._closed:
                return
            self._due.add(channel)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tidings-waker", daemon=True)
                self._thread.start()
            self._changed.notify()

    def close(self) -> None:
        """Send what is asked for, then stop."""
        with self._changed:
            self._closed = True
            self._changed.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due and not self._closed:
                    self._changed.wait()
                channels, self._due = sorted(self._due), set()
                closing = self._closed
            if channels:
                self._send(channels)
            if closing:
                if self._conn is not None:
                    self._conn.close()
                return

    def _send(self, channels: list[str]) -> None:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(
                    self._url,
                    autocommit=True,
                    **({} if self._prepare else {"prepare_threshold": None}),
                )
            fetch_all(self._conn, "wake_workers", {"channels": channels})
        except psycopg.Error as exc:
            log.debug("wake-up not sent (workers find the intents by their timed scan): %s", exc)
            if self._conn is not None:
                self._conn.close()
            self._conn = None


def listen(conn: psycopg.Connection[Any]) -> None:
    """Have `conn` (autocommit, a worker's own) receive the wake-ups."""
    conn.execute(q("listen_for_due_work"))
