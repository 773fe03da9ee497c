"""Send windows, poll schedule and backoff: examples and properties."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.schedules import (
    PollSchedule,
    RetryConfig,
    SendWindow,
    backoff_delay,
    is_open,
    next_check_at,
    next_window_start,
    nominal_interval,
    nominal_offset,
    retry_delay,
    seconds_until,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
HONOLULU = ZoneInfo("Pacific/Honolulu")
DAY = SendWindow(time(8), time(21))
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def poll_schedule_times(
    schedule: PollSchedule, accepted_at: datetime, rng: random.Random
) -> list[datetime]:
    """Every check of one send, by asking for the next until there is none."""
    times: list[datetime] = []
    while (at := next_check_at(schedule, accepted_at, len(times), rng)) is not None:
        times.append(at)
    return times


schedules = st.builds(
    PollSchedule,
    first_check_after_seconds=st.floats(1, 600),
    factor=st.floats(1, 4),
    max_interval_seconds=st.floats(600, 7200),
    jitter=st.floats(0, 1),
    max_checks=st.integers(1, 40),
    give_up_after_seconds=st.floats(1, 7 * 86400),
)
retries = st.builds(
    RetryConfig,
    base_seconds=st.floats(0.1, 10),
    max_seconds=st.floats(10, 3600),
    jitter=st.floats(0, 1),
)
instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
)


def test_window_is_half_open() -> None:
    assert is_open(DAY, BERLIN, datetime(2026, 6, 1, 8, 0, tzinfo=BERLIN))
    assert not is_open(DAY, BERLIN, datetime(2026, 6, 1, 21, 0, tzinfo=BERLIN))


def test_overnight_window() -> None:
    night = SendWindow(time(22), time(6))
    assert is_open(night, BERLIN, datetime(2026, 6, 1, 23, 0, tzinfo=BERLIN))
    assert is_open(night, BERLIN, datetime(2026, 6, 1, 5, 59, tzinfo=BERLIN))
    assert not is_open(night, BERLIN, datetime(2026, 6, 1, 12, 0, tzinfo=BERLIN))


def test_empty_window_is_rejected() -> None:
    with pytest.raises(ValueError, match="differ"):
        SendWindow(time(8), time(8))


def test_next_start_after_evening_is_next_morning() -> None:
    now = datetime(2026, 6, 1, 22, 30, tzinfo=BERLIN)
    assert next_window_start(DAY, (BERLIN,), now) == datetime(2026, 6, 2, 8, 0, tzinfo=BERLIN)


def test_next_start_early_morning_is_same_day() -> None:
    now = datetime(2026, 6, 1, 3, 0, tzinfo=BERLIN)
    assert next_window_start(DAY, (BERLIN,), now) == datetime(2026, 6, 1, 8, 0, tzinfo=BERLIN)


def test_next_start_across_spring_forward() -> None:
    # Europe springs forward on 29 March 2026: 08:00 that day is 06:00 UTC.
    now = datetime(2026, 3, 28, 22, 0, tzinfo=UTC)
    assert next_window_start(DAY, (BERLIN,), now) == datetime(2026, 3, 29, 6, 0, tzinfo=UTC)


def test_next_start_across_fall_back() -> None:
    # New York falls back on 1 November 2026: 08:00 EST is 13:00 UTC.
    now = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
    assert next_window_start(DAY, (NEW_YORK,), now) == datetime(2026, 11, 1, 13, 0, tzinfo=UTC)


def test_window_start_inside_a_dst_gap_lands_after_the_gap() -> None:
    early = SendWindow(time(2, 30), time(5))
    now = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # 01:30 CET
    opens = next_window_start(early, (BERLIN,), now)
    assert opens is not None and opens.astimezone(BERLIN).time() == time(3, 30)


def test_several_zones_wait_for_the_last_to_open() -> None:
    now = datetime(2026, 6, 1, 11, 0, tzinfo=UTC)  # 07:00 New York, 01:00 Honolulu
    opens = next_window_start(DAY, (NEW_YORK, HONOLULU), now)
    assert opens == datetime(2026, 6, 1, 8, 0, tzinfo=HONOLULU)


def test_zones_with_no_common_window_give_none() -> None:
    short = SendWindow(time(9), time(10))
    assert next_window_start(short, (BERLIN, HONOLULU), T0) is None


@given(instants, st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]))
def test_next_start_is_open_after_now_and_the_first_such(now: datetime, name: str) -> None:
    zone = ZoneInfo(name)
    opens = next_window_start(DAY, (zone,), now)
    assert opens is not None and opens > now
    assert is_open(DAY, zone, opens)
    assert not is_open(DAY, zone, opens - timedelta(minutes=1)) or opens - now <= timedelta(
        minutes=1
    )


# --- poll schedule -----------------------------------------------------------

POLL = PollSchedule(30, 2, 3600, 0.2, 12, 172800)


def test_nominal_intervals_grow_then_cap() -> None:
    assert [nominal_interval(POLL, i) for i in range(8)] == [
        30,
        60,
        120,
        240,
        480,
        960,
        1920,
        3600,
    ]


def test_without_jitter_the_schedule_is_the_nominal_one() -> None:
    exact = PollSchedule(10, 2, 1000, 0, 5, 10_000)
    offsets = [(t - T0).total_seconds() for t in poll_schedule_times(exact, T0, random.Random(1))]
    assert offsets == [10, 30, 70, 150, 310]


def test_last_check_is_pulled_in_to_give_up() -> None:
    short = PollSchedule(10, 2, 1000, 0, 50, 100)
    times = poll_schedule_times(short, T0, random.Random(1))
    assert times[-1] == T0 + timedelta(seconds=100)
    assert len(times) == 4  # 10, 30, 70, then 150 pulled in to 100


def test_next_check_after_max_checks_is_none() -> None:
    assert next_check_at(POLL, T0, POLL.max_checks, random.Random(1)) is None


def test_invalid_schedule_is_rejected() -> None:
    with pytest.raises(ValueError, match="factor"):
        PollSchedule(30, 0.5, 3600, 0.2, 12, 172800)


def test_rounding_never_repeats_a_check_time() -> None:
    # Found by Hypothesis: a give-up a hair after the first check used to
    # round to the same microsecond and schedule that check twice.
    schedule = PollSchedule(1, 1, 600, 0, 2, 1.0000000000000002)
    assert poll_schedule_times(schedule, T0, random.Random(0)) == [T0 + timedelta(seconds=1)]


@given(schedules, st.integers(0, 2**32))
def test_poll_times_strictly_increase_within_bounds(schedule: PollSchedule, seed: int) -> None:
    times = poll_schedule_times(schedule, T0, random.Random(seed))
    assert 1 <= len(times) <= schedule.max_checks
    assert all(a < b for a, b in itertools.pairwise(times))
    assert times[0] > T0
    assert times[-1] <= T0 + timedelta(seconds=schedule.give_up_after_seconds)


@given(schedules, st.integers(0, 2**32))
def test_jitter_only_pulls_a_check_in_within_its_nominal_slot(
    schedule: PollSchedule, seed: int
) -> None:
    # What holds with jitter: nominal intervals never decrease, and check k
    # lands in (T[k-1], T[k]] where T are the nominal times; each jittered
    # interval is at least (1 - jitter) of its nominal one.
    nominal = [nominal_interval(schedule, i) for i in range(schedule.max_checks)]
    assert all(a <= b for a, b in itertools.pairwise(nominal))
    for k, at in enumerate(poll_schedule_times(schedule, T0, random.Random(seed))):
        slot_start = T0 + timedelta(seconds=nominal_offset(schedule, k))
        assert slot_start < at <= T0 + timedelta(seconds=nominal_offset(schedule, k + 1))


# --- backoff -----------------------------------------------------------------

RETRY = RetryConfig(2, 300, 0)


def test_backoff_doubles_then_caps() -> None:
    rng = random.Random(1)
    assert [backoff_delay(RETRY, n, rng, None) for n in range(1, 10)] == [
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
        300,
    ]


def test_backoff_without_time_left_is_none() -> None:
    assert backoff_delay(RETRY, 5, random.Random(1), 10) is None
    assert backoff_delay(RETRY, 1, random.Random(1), 0) is None


def test_retry_after_is_honoured_exactly_and_not_capped() -> None:
    assert retry_delay(900, RETRY, 1, random.Random(1), None) == 900
    assert retry_delay(30, RETRY, 1, random.Random(1), 3600) == 30
    assert retry_delay(30, RETRY, 1, random.Random(1), 20) is None


def test_retry_without_retry_after_backs_off() -> None:
    assert retry_delay(None, RETRY, 3, random.Random(1), None) == 8


@given(retries, st.integers(1, 200), st.floats(-10, 10_000), st.integers(0, 2**32))
def test_backoff_never_exceeds_remaining_validity(
    retry: RetryConfig, attempt: int, remaining: float, seed: int
) -> None:
    delay = backoff_delay(retry, attempt, random.Random(seed), remaining)
    assert delay is None or 0 <= delay < remaining
    assert delay is None or delay <= retry.max_seconds


@given(retries, st.integers(1, 50), st.integers(0, 2**32))
def test_backoff_stays_within_its_jitter_band(retry: RetryConfig, attempt: int, seed: int) -> None:
    delay = backoff_delay(retry, attempt, random.Random(seed), None)
    ceiling = min(retry.base_seconds * 2 ** (attempt - 1), retry.max_seconds)
    assert delay is not None
    assert ceiling * (1 - retry.jitter) - 1e-9 <= delay <= ceiling


def test_seconds_until_rounds_up() -> None:
    assert seconds_until(T0 + timedelta(seconds=1.2), T0) == 2
    assert seconds_until(T0 - timedelta(seconds=5), T0) == 0
