"""The database's clock, for hosts whose own clock may be wrong.

Leases, deadlines, quiet windows and retry times are compared across
processes: a lease one worker writes is judged expired by another, a
deadline the API stored is checked by a worker. If each used its own wall
clock, a host minutes ahead would take over leases that are still held, and
one minutes behind would send after a deadline. So every process reads the
time of the one thing they all share, the database server.

One round trip per call would cost a claim as much again, so the clock is
anchored: `clock_timestamp()` is read a few times in a row, each with this
host's monotonic clock on both sides of the round trip, and the fastest
round trip is kept (as NTP keeps its fastest sample: a slow one is slow
because it queued somewhere, and says least about when the server read
its clock). Later readings are the anchor plus the monotonic time elapsed
since the *end* of that round trip, so the clock is never ahead of the
server's: the server read its clock at some instant within the round trip,
at the latest at its end. Being behind by up to one round trip (well under
a millisecond on a LAN) rather than either side by half of one keeps every
stamp causal: a claim this clock stamps precedes, on the server's time,
whatever the worker does after it (the provider's receipt of the send,
judged by the reliability run's invariant 2); a deadline is judged at most
that round trip late, far less than the send's own call takes to arrive.
`error_seconds` tells that round trip. The monotonic clock drifts parts per
million; the anchor is renewed every `resync_seconds`. A step of the host's wall clock (NTP, an
operator, libfaketime) changes nothing: the monotonic clock does not step.

When the database cannot be reached to anchor, the host's wall clock is
used until it can be, with the next try after a second: nothing is decided
without the database anyway, and a caller never waits on the clock for
more than a short connection timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg

from tidings.store.database import Database, fetch_one

log = logging.getLogger(__name__)

RESYNC_SECONDS = 30.0
ANCHOR_TIMEOUT_SECONDS = 2.0
ANCHOR_SAMPLES = 3
RETRY_AFTER_FAILURE_SECONDS = 1.0


class DatabaseClock:
    """`Clock` whose time is the database server's."""

    def __init__(
        self,
        db: Database,
        *,
        resync_seconds: float = RESYNC_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._resync = resync_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._anchor: tuple[datetime, float] | None = None  # (database time, monotonic)
        self._error: float | None = None
        self._next_try = 0.0

    def now(self) -> datetime:
        mono = self._monotonic()
        anchor = self._anchor
        if anchor is None or mono - anchor[1] >= self._resync:
            anchor = self._renew(mono)
            mono = self._monotonic()  # the anchoring took time of its own
        if anchor is None:
            return datetime.now(UTC)
        return anchor[0] + timedelta(seconds=mono - anchor[1])

    def offset_seconds(self) -> float | None:
        """The database's time minus this host's wall clock, as last anchored."""
        anchor = self._anchor
        if anchor is None:
            return None
        local = datetime.now(UTC) - timedelta(seconds=self._monotonic() - anchor[1])
        return (anchor[0] - local).total_seconds()

    def error_seconds(self) -> float | None:
        """How far behind the server's time this clock may be: the round
        trip of the anchoring read (never ahead of it)."""
        return self._error

    def _renew(self, mono: float) -> tuple[datetime, float] | None:
        with self._lock:
            anchor = self._anchor
            if anchor is not None and mono - anchor[1] < self._resync:
                return anchor  # another thread renewed it meanwhile
            if mono < self._next_try:
                return anchor
            try:
                self._anchor, self._error = self._read()
            except (psycopg.Error, OSError, TimeoutError) as exc:
                self._next_try = mono + RETRY_AFTER_FAILURE_SECONDS
                log.warning("database clock not anchored: %s", type(exc).__name__)
            return self._anchor

    def _read(self) -> tuple[tuple[datetime, float], float]:
        samples = []
        with self._db.pool.connection(timeout=ANCHOR_TIMEOUT_SECONDS) as conn:
            for _ in range(ANCHOR_SAMPLES):
                before = self._monotonic()
                row = fetch_one(conn, "database_time", {})
                after = self._monotonic()
                assert row is not None
                samples.append((after - before, row["now"], after))
            conn.rollback()
        round_trip, server, after = min(samples, key=lambda sample: sample[0])
        return (server.astimezone(UTC), after), round_trip
