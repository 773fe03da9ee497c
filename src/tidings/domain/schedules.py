"""Pure time math: local send windows, the status-poll schedule and backoff.

Nothing here reads a clock: every function takes `now` (or the acceptance
time) and, where jitter applies, a `random.Random` the caller seeds, so a
schedule is reproducible in tests and replays.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tidings.domain import policy_bounds as bounds
from tidings.domain.policy_bounds import within

# How far ahead we look for a moment that is inside the window in every
# candidate zone; a week covers any daily window plus DST shifts.
WINDOW_SEARCH_DAYS = 8
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class SendWindow:
    """Allowed local hours, [start, end). start > end spans midnight."""

    start: time
    end: time

    def __post_init__(self) -> None:
        if self.start == self.end:
            raise ValueError("start and end must differ (an empty or 24h window is ambiguous)")


@dataclass(frozen=True)
class PollSchedule:
    first_check_after_seconds: float
    factor: float
    max_interval_seconds: float
    jitter: float
    max_checks: int
    give_up_after_seconds: float

    def __post_init__(self) -> None:
        _require(self.first_check_after_seconds > 0, "first_check_after_seconds must be > 0")
        _require(self.factor >= 1, "factor must be >= 1 (intervals never shrink)")
        _require(
            self.max_interval_seconds >= self.first_check_after_seconds,
            "max_interval_seconds must be >= first_check_after_seconds",
        )
        _require(0 <= self.jitter <= 1, "jitter must be within 0..1")
        _require(self.max_checks >= 1, "max_checks must be >= 1")
        _require(self.give_up_after_seconds > 0, "give_up_after_seconds must be > 0")
        # The parser names the field; this keeps a schedule built any other
        # way inside what the arithmetic can hold (domain/policy_bounds.py).
        _require(
            within(self.factor, 1, bounds.MAX_POLL_FACTOR)
            and within(self.max_checks, 1, bounds.MAX_CHECKS)
            and all(
                within(s, 0, bounds.MAX_SECONDS)
                for s in (self.max_interval_seconds, self.give_up_after_seconds)
            ),
            "a number is past its limit (docs/security.md)",
        )


# Retryable provider failures (429, 5xx before processing, a misconfigured
# adapter, a report file that cannot be loaded) one intent may have before it
# ends `failed`: without a cap, an intent without a deadline retried forever.
DEFAULT_MAX_FAILURES = 10
# How long an intent may wait unsent (from creation, or from `not_before`)
# before the `pending_too_long` alert fires for it: long enough for a large
# job paced by its rate limits, short enough to notice one stuck for good.
DEFAULT_MAX_PENDING_SECONDS = 21600.0


@dataclass(frozen=True)
class RetryConfig:
    base_seconds: float
    max_seconds: float
    jitter: float
    max_failures: int = DEFAULT_MAX_FAILURES
    max_pending_seconds: float = DEFAULT_MAX_PENDING_SECONDS

    def __post_init__(self) -> None:
        _require(self.base_seconds > 0, "base_seconds must be > 0")
        _require(self.max_seconds >= self.base_seconds, "max_seconds must be >= base_seconds")
        _require(0 <= self.jitter <= 1, "jitter must be within 0..1")
        _require(self.max_failures >= 1, "max_failures must be >= 1")
        _require(self.max_pending_seconds > 0, "max_pending_seconds must be > 0")
        _require(
            within(self.max_failures, 1, bounds.MAX_FAILURES)
            and all(
                within(s, 0, bounds.MAX_SECONDS)
                for s in (self.max_seconds, self.max_pending_seconds)
            ),
            "a number is past its limit (docs/security.md)",
        )

    def exhausted(self, failures: int) -> bool:
        """True when `failures` retryable failures are all this intent may have."""
        return failures >= self.max_failures


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("datetimes must be timezone-aware")
    return moment


# --- send windows -----------------------------------------------------------


def zone_or_none(name: str | None) -> ZoneInfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def is_open(window: SendWindow, zone: ZoneInfo, at: datetime) -> bool:
    local = _aware(at).astimezone(zone).time()
    if window.start < window.end:
        return window.start <= local < window.end
    return local >= window.start or local < window.end


def open_everywhere(window: SendWindow, zones: tuple[ZoneInfo, ...], at: datetime) -> bool:
    return all(is_open(window, zone, at) for zone in zones)


def _openings(window: SendWindow, zone: ZoneInfo, now: datetime) -> list[datetime]:
    # Building from the local date and round-tripping through UTC is what
    # makes this DST-correct: a start inside a spring-forward gap lands just
    # after the gap; an ambiguous one takes its first occurrence (fold=0).
    today = now.astimezone(zone).date()
    days = (today + timedelta(days=n) for n in range(-1, WINDOW_SEARCH_DAYS))
    starts = (datetime.combine(day, window.start, tzinfo=zone).astimezone(UTC) for day in days)
    return [s for s in starts if s > now]


def next_window_start(
    window: SendWindow, zones: tuple[ZoneInfo, ...], now: datetime
) -> datetime | None:
    """Earliest instant after `now` when the window is open in every zone.

    The intersection of daily windows opens when its last zone opens, so
    the answer is one of the zones' opening instants. None: the zones share
    no open moment within the search horizon.
    """
    candidates = sorted({c for zone in zones for c in _openings(window, zone, _aware(now))})
    return next((c for c in candidates if open_everywhere(window, zones, c)), None)


# --- status polling ---------------------------------------------------------


def nominal_interval(schedule: PollSchedule, check_index: int) -> float:
    """Interval before check `check_index` (0-based), before jitter."""
    first, ceiling = schedule.first_check_after_seconds, schedule.max_interval_seconds
    if schedule.factor > 1 and check_index * math.log(schedule.factor) >= math.log(ceiling / first):
        # At the ceiling already: `factor ** index` could overflow a float
        # long before the largest check count a policy may ask for.
        return ceiling
    return min(first * schedule.factor**check_index, ceiling)


def nominal_offset(schedule: PollSchedule, checks: int) -> float:
    """Seconds from acceptance to the nominal time of check number `checks`."""
    return sum(nominal_interval(schedule, i) for i in range(checks))


def next_check_at(
    schedule: PollSchedule, accepted_at: datetime, checks_done: int, rng: random.Random
) -> datetime | None:
    """When to run check number `checks_done` (0-based); None: stop polling.

    Jitter only shortens an interval, measured from the previous *nominal*
    time, so check k lands in (T[k-1], T[k]] with T the nominal times: the
    times strictly increase and never pass their nominal time. The last
    check is pulled in to the give-up instant rather than skipped.
    """
    if checks_done >= schedule.max_checks:
        return None
    previous = nominal_offset(schedule, checks_done)
    start = _aware(accepted_at) + timedelta(seconds=previous)
    deadline = accepted_at + timedelta(seconds=schedule.give_up_after_seconds)
    if start >= deadline:
        return None
    interval = nominal_interval(schedule, checks_done) * (1 - schedule.jitter * rng.random())
    # Compared as datetimes (microseconds) so rounding can neither repeat a
    # check time nor step past the deadline.
    at = max(accepted_at + timedelta(seconds=previous + interval), start + _TICK)
    return min(at, deadline)


# --- retry after a transient provider failure -------------------------------


def backoff_delay(
    retry: RetryConfig,
    attempt_number: int,
    rng: random.Random,
    remaining_validity_seconds: float | None,
) -> float | None:
    """Exponential backoff with downward jitter; None: no time left, expire.

    attempt_number is 1 for the first retry. A delay that would land at or
    after the intent's expiry is useless (the send would be refused), so
    the caller expires the intent instead of scheduling it.
    """
    exponent = max(attempt_number - 1, 0)
    ceiling = min(retry.base_seconds * 2.0 ** min(exponent, 64), retry.max_seconds)
    delay = ceiling * (1 - retry.jitter * rng.random())
    return _within(delay, remaining_validity_seconds)


def retry_delay(
    retry_after_seconds: float | None,
    retry: RetryConfig,
    attempt_number: int,
    rng: random.Random,
    remaining_validity_seconds: float | None,
) -> float | None:
    """Honour a provider's Retry-After exactly; otherwise back off."""
    if retry_after_seconds is None:
        return backoff_delay(retry, attempt_number, rng, remaining_validity_seconds)
    return _within(max(float(retry_after_seconds), 0.0), remaining_validity_seconds)


def _within(delay: float, remaining: float | None) -> float | None:
    if remaining is None:
        return delay
    return delay if delay < remaining else None


def seconds_until(later: datetime, now: datetime) -> int:
    """Whole seconds to wait, rounded up so a retry never fires early."""
    return max(math.ceil((_aware(later) - _aware(now)).total_seconds()), 0)
