"""The database clock: the server's time, carried forward by the monotonic clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tidings.store.database import Database
from tidings.store.database_clock import DatabaseClock


class Monotonic:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def server_now(db_url: str) -> datetime:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0].astimezone(UTC)


def test_the_time_is_the_servers_moved_on_by_the_monotonic_clock(db_url: str) -> None:
    db = Database(db_url, max_size=1)
    mono = Monotonic()
    clock = DatabaseClock(db, resync_seconds=30, monotonic=mono)
    try:
        before = server_now(db_url)
        first = clock.now()
        after = server_now(db_url)
        assert before <= first <= after
        # Between anchors only the monotonic clock counts: 29 s of it are
        # 29 s of database time, whatever the server's clock did meanwhile.
        mono.t += 29
        assert clock.now() - first == timedelta(seconds=29)
        mono.t += 1  # the anchor is due again: read from the server
        renewed = clock.now()
        assert before <= renewed <= server_now(db_url)
        offset = clock.offset_seconds()
        assert offset is not None and abs(offset) < 60  # this host's clock is the server's
    finally:
        db.close()


def test_without_a_database_it_tells_the_hosts_time_and_tries_again(db_url: str) -> None:
    dead = Database("postgresql://postgres@127.0.0.1:1/none", min_size=0, max_size=1)
    mono = Monotonic()
    clock = DatabaseClock(dead, monotonic=mono)
    try:
        host = datetime.now(UTC)
        assert host <= clock.now() <= datetime.now(UTC)
        assert clock.offset_seconds() is None
    finally:
        dead.close()


class Steps:
    """A monotonic clock that moves on by the next step at each reading, so a
    test sets how long each anchoring round trip took."""

    def __init__(self, *steps: float) -> None:
        self.t = 1000.0
        self.steps = list(steps)

    def __call__(self) -> float:
        if self.steps:
            self.t += self.steps.pop(0)
        return self.t


def test_the_clock_is_never_ahead_of_the_servers_however_slow_the_anchoring_read(
    db_url: str,
) -> None:
    # The anchoring reads took 3 s, 3 s and 2 s on this host's clock: the
    # server read its clock somewhere within the last, so the most this
    # clock may say at its end is what the server said (a midpoint would put
    # it a second ahead, and a claim it stamps after the send it precedes).
    db = Database(db_url, max_size=1)
    clock = DatabaseClock(db, monotonic=Steps(0, 0, 3, 0, 3, 0, 2))
    try:
        stamped = clock.now()
        assert stamped <= server_now(db_url)
        assert clock.error_seconds() == 2
    finally:
        db.close()


def test_the_anchor_is_the_fastest_of_its_round_trips(db_url: str) -> None:
    # Round trips of 0.5 s, 1 ms and 0.3 s: the 1 ms one anchors, and its
    # round trip is the error the clock reports.
    db = Database(db_url, max_size=1)
    mono = Steps(0, 0, 0.5, 0, 0.001, 0, 0.3, 0)
    clock = DatabaseClock(db, monotonic=mono)
    try:
        before = server_now(db_url)
        stamped = clock.now()
        # Anchored at the end of the second read; the third read's 0.3 s
        # since then count as elapsed.
        assert clock.error_seconds() == pytest.approx(0.001)
        assert (
            before + timedelta(seconds=0.3)
            <= stamped
            <= server_now(db_url) + timedelta(seconds=0.3)
        )
    finally:
        db.close()
