"""The one range every moment a tenant supplies must fall in.

PostgreSQL stores `timestamptz` from 4713 BC to 294276 AD; Python's
`datetime` holds years 1 to 9999. A time the database accepts but Python
cannot read (`9999-12-31T23:59:59-23:59` is year 10000 in UTC) once
stopped every tenant's sends: the shared claim query could not decode the
row and retried the same batch forever. So every tenant-supplied time
(expiry, not-before, consent evidence, a job's deadline) is checked against
this range before it is stored, and the database holds the same bounds as
CHECK constraints (migration 0013) for any path that skips the check.

The bounds are deliberately far inside both ranges: no notification is
scheduled before the epoch or a thousand years ahead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tidings.domain.errors import DateOutOfRange, InvalidInput

# From EARLIEST (inclusive) to LATEST (exclusive). The SQL constraints in
# migrations/0013_bounded_dates.sql and schema.sql spell the same two
# literals (a test compares them).
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def within_bounds(value: datetime) -> bool:
    """Whether an aware time lies in [EARLIEST, LATEST).

    Comparing aware datetimes never converts them, so a value whose UTC
    form is outside Python's range (year 0 or 10000) compares without
    overflowing.
    """
    return EARLIEST <= value < LATEST


def check_moment(field: str, value: object) -> datetime:
    """The time itself, if it is aware and within bounds; else InvalidInput."""
    if not isinstance(value, datetime):
        raise InvalidInput(field, "must be a time")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, "must be a time with a UTC offset")
    if not within_bounds(value):
        raise DateOutOfRange(field, bounds_text())
    return value


def optional_moment(field: str, value: object) -> datetime | None:
    return None if value is None else check_moment(field, value)


def bounds_text() -> str:
    return (
        f"must lie between {EARLIEST.date().isoformat()} and "
        f"{LATEST.date().isoformat()} UTC (exclusive)"
    )
