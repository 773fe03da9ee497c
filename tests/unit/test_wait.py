"""Waiting for the database at start-up: the schedule and the loop, no real time."""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tidings.store.migrate import MigrationError
from tidings.store.wait import (
    Backoff,
    DatabaseUnavailable,
    WaitInterrupted,
    describe_dsn,
    wait_for_database,
)

DSN = "postgresql://tidings:sup3r-secret@db.internal:6543/notify"


class FakeTime:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        return False


def failing(times: int, result: str = "migrated") -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def action() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise psycopg.OperationalError(
                'connection to server at "db.internal", port 6543 failed: Connection refused'
            )
        return result

    return calls, action


def test_the_schedule_doubles_up_to_the_cap() -> None:
    b = Backoff(initial=0.5, factor=2.0, cap=10.0, jitter=0.5)
    assert [b.delay(n, 0.0) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 10, 10, 10]


def test_jitter_takes_off_at_most_its_share() -> None:
    b = Backoff(initial=0.5, factor=2.0, cap=10.0, jitter=0.5)
    assert b.delay(3, 0.5) == pytest.approx(1.5)
    for n in range(1, 40):
        full = b.delay(n, 0.0)
        assert full / 2 < b.delay(n, 0.999999) <= full <= 10.0


def test_the_schedule_stays_bounded_after_many_attempts() -> None:
    assert Backoff(cap=10.0).delay(10_000, 0.0) == 10.0
    with pytest.raises(ValueError):
        Backoff().delay(0, 0.0)


def test_retries_with_the_schedule_until_the_database_answers() -> None:
    t = FakeTime()
    calls, action = failing(4)
    got = wait_for_database(
        action,
        dsn=DSN,
        clock=t.clock,
        sleep=t.sleep,
        draw=lambda: 0.0,
    )
    assert got == "migrated"
    assert len(calls) == 5
    assert t.sleeps == [0.5, 1.0, 2.0, 4.0]


def test_no_limit_means_retrying_for_as_long_as_it_takes() -> None:
    t = FakeTime()
    calls, action = failing(500)
    wait_for_database(action, dsn=DSN, clock=t.clock, sleep=t.sleep, draw=lambda: 0.0)
    assert len(calls) == 501
    assert max(t.sleeps) == 10.0  # the cap: back within 10 s of the database


def test_gives_up_at_the_limit_with_one_last_try_there() -> None:
    t = FakeTime()
    calls, action = failing(10**6)
    with pytest.raises(DatabaseUnavailable, match=r"within 5s \(5 attempts\)") as raised:
        wait_for_database(
            action,
            dsn=DSN,
            max_wait=5.0,
            clock=t.clock,
            sleep=t.sleep,
            draw=lambda: 0.0,
        )
    # 0.5 + 1 + 2, then the 4 s pause is cut short so the last try is at 5 s.
    assert t.sleeps == [0.5, 1.0, 2.0, 1.5]
    assert len(calls) == 5
    assert t.now - 100.0 == pytest.approx(5.0)
    message = str(raised.value)
    assert "db.internal" in message and "Connection refused" in message
    assert "sup3r-secret" not in message


def test_a_zero_limit_tries_once() -> None:
    t = FakeTime()
    calls, action = failing(1)
    with pytest.raises(DatabaseUnavailable):
        wait_for_database(action, dsn=DSN, max_wait=0, clock=t.clock, sleep=t.sleep)
    assert len(calls) == 1 and t.sleeps == []


@pytest.mark.parametrize(
    "error",
    [MigrationError("migration 3 changed after it was applied"), psycopg.ProgrammingError("x")],
)
def test_errors_that_waiting_cannot_fix_pass_straight_through(error: Exception) -> None:
    t = FakeTime()

    def action() -> None:
        raise error

    with pytest.raises(type(error)):
        wait_for_database(action, dsn=DSN, clock=t.clock, sleep=t.sleep)
    assert t.sleeps == []


def test_a_stop_while_waiting_interrupts() -> None:
    t = FakeTime()
    calls, action = failing(10**6)
    with pytest.raises(WaitInterrupted):
        wait_for_database(action, dsn=DSN, clock=t.clock, sleep=lambda s: True)
    assert len(calls) == 1


def test_logs_say_where_and_why_but_never_the_password(caplog: pytest.LogCaptureFixture) -> None:
    t = FakeTime()

    def action() -> None:
        # As if a server echoed connection parameters back.
        if len(t.sleeps) < 2:
            raise psycopg.OperationalError("FATAL: no pg_hba.conf entry (password sup3r-secret)")

    with caplog.at_level(logging.INFO, logger="tidings.store.wait"):
        wait_for_database(action, dsn=DSN, clock=t.clock, sleep=t.sleep, draw=lambda: 0.0)
    text = caplog.text
    assert "sup3r-secret" not in text
    assert text.count("database unavailable; retrying") == 2
    assert "database available" in text
    assert "host=db.internal" in text and "port=6543" in text and "pg_hba.conf" in text


def test_describe_dsn_keeps_only_what_locates_the_database() -> None:
    shown = conninfo_to_dict(describe_dsn(DSN))
    assert shown == {"user": "tidings", "host": "db.internal", "port": "6543", "dbname": "notify"}
    keyword = "host=/tmp/pg dbname=t password=hunter2 sslkey=/k"
    assert conninfo_to_dict(describe_dsn(keyword)) == {"host": "/tmp/pg", "dbname": "t"}
    assert describe_dsn("postgresql://a:b@[::1") == "<unparseable DSN>"
