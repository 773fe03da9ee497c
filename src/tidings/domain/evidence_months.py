"""Months of evidence: how an intent's id places its evidence in a partition.

The evidence tables (attempts, transitions, events, observations) are
partitioned by the intent's id. Intent ids are UUID version 7, whose first
48 bits are the creation time in milliseconds, so a range of ids is a range
of creation times: one partition per calendar month (UTC) holds everything
about the intents created in it, and each table's keys, which all include
the intent's id, stay enforceable on the partitioned table. A month is
dropped whole once every intent in it is past its retention clock
(docs/retention.md).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

# The tables partitioned by month. The first three share the attempt clock
# and go together; observations have a clock of their own.
ATTEMPT_EVIDENCE = ("attempts", "transitions", "events")
OBSERVATIONS = ("observations",)
TABLES = ATTEMPT_EVIDENCE + OBSERVATIONS


@dataclass(frozen=True, order=True)
class Month:
    year: int
    month: int

    @classmethod
    def of(cls, moment: datetime | date) -> Month:
        if isinstance(moment, datetime):
            moment = moment.astimezone(UTC)
        return cls(moment.year, moment.month)

    @classmethod
    def of_intent(cls, intent_id: uuid.UUID) -> Month:
        return cls.of(created_at(intent_id))

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def first_day(self) -> date:
        return date(self.year, self.month, 1)

    @property
    def starts_at(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def ends_at(self) -> datetime:
        return self.next().starts_at

    def next(self) -> Month:
        return Month(self.year + self.month // 12, self.month % 12 + 1)

    def plus(self, months: int) -> Month:
        index = self.year * 12 + self.month - 1 + months
        return Month(index // 12, index % 12 + 1)

    @property
    def lower_id(self) -> uuid.UUID:
        return id_floor(self.starts_at)

    @property
    def upper_id(self) -> uuid.UUID:
        return id_floor(self.ends_at)

    def partition(self, table: str) -> str:
        if table not in TABLES:
            raise ValueError(f"{table} is not a partitioned evidence table")
        return f"{table}_{self.year:04d}_{self.month:02d}"


def id_floor(moment: datetime) -> uuid.UUID:
    """The smallest id of an intent created at `moment` or later: every
    UUIDv7 made at or after it sorts at or above this one, every one made
    before it below (PostgreSQL compares uuids byte by byte)."""
    millis = int(moment.timestamp() * 1000)
    if not 0 <= millis < 1 << 48:
        raise ValueError("a UUIDv7 carries a time between 1970 and 10889")
    return uuid.UUID(int=millis << 80)


def created_at(intent_id: uuid.UUID) -> datetime:
    """When a UUIDv7 was made, to the millisecond."""
    return datetime.fromtimestamp((intent_id.int >> 80) / 1000, tz=UTC)


def months(first: Month, last: Month) -> list[Month]:
    """Every month from `first` to `last`, both included."""
    found = []
    month = first
    while month <= last:
        found.append(month)
        month = month.next()
    return found


def overdue(month: Month, clock_days: int, now: datetime) -> bool:
    """Whether every intent created in `month` and ended in it is past a
    clock of `clock_days`: the month's evidence may go as a whole."""
    return month.ends_at + timedelta(days=clock_days) <= now


@dataclass(frozen=True)
class IdRange:
    """Intent ids in [lower, upper)."""

    lower: uuid.UUID
    upper: uuid.UUID

    def as_params(self) -> dict[str, uuid.UUID]:
        return {"low": self.lower, "high": self.upper}
