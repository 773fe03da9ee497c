"""The one door to the evidence tables' monthly partitions (migration 0026).

Months are made ahead of time, a few at once, so an insert always finds its
month's partition; a month is dropped whole, table by table, once retention
says nothing in it must stay (dispatch/retention_months.py). Both are DDL
that waits for the statements running on the parent table and holds up
those that come after it: each waits at most `LOCK_TIMEOUT_MS`, then gives
up until the next turn, and only one process does either at a time.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg

from tidings.domain.evidence_months import Month, id_floor, months
from tidings.store.database import execute, fetch_all, fetch_one

Conn = psycopg.Connection[Any]
log = logging.getLogger("tidings.partitions")

# Months made ahead of the current one. One is enough for the hourly purge
# to stay ahead, and every partition kept costs each query that cannot
# prune (a lock, an index probe): none are made far ahead.
AHEAD = 1
MOST_AT_ONCE = 24  # months made in one turn: a clock far ahead waits in the default partition
LOCK_TIMEOUT_MS = 500  # below deadlock_timeout (1 s): a wait ends as a timeout, never a deadlock
LOCK_KEY = 0x74646E_70617274  # "tdn" "part"
# Evidence older than this is not from UUIDv7 ids this engine made: it stays in
# the default partition (and goes row by row) rather than open decades of months.
EARLIEST = datetime(2020, 1, 1, tzinfo=UTC)


class Transactions(Protocol):
    """Where transactions come from: the pool (`Database`), or the one
    connection migrations run on (`OneConnection`)."""

    def transaction(self) -> AbstractContextManager[Conn]: ...


class OneConnection:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        with self.conn.transaction():
            yield self.conn


@dataclass(frozen=True)
class EvidenceMonth:
    month: Month
    attempts_dropped_at: datetime | None
    observations_dropped_at: datetime | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> EvidenceMonth:
        return cls(
            Month.of(row["month"]), row["attempts_dropped_at"], row["observations_dropped_at"]
        )


def registered(conn: Conn) -> list[EvidenceMonth]:
    return [EvidenceMonth.from_row(r) for r in fetch_all(conn, "evidence_months", {})]


def ensure(db: Transactions, now: datetime) -> list[Month]:
    """Make the months from the last one made through `AHEAD` past `now`'s;
    returns those made. Months are only ever added after the last one, so
    the months always form one unbroken range of ids."""
    with db.transaction() as conn:
        known = registered(conn)
        first = known[-1].month.next() if known else _first_month(conn, now)
    wanted = months(first, Month.of(now).plus(AHEAD))[:MOST_AT_ONCE]
    made = []
    for month in wanted:
        if not _create(db, month, now):
            break  # busy: the next turn goes on from here
        made.append(month)
    return made


def _first_month(conn: Conn, now: datetime) -> Month:
    """The current month, or the oldest month of evidence written before the
    tables were partitioned (so it moves out of the default partition)."""
    current = Month.of(now)
    low, high = id_floor(EARLIEST), current.lower_id
    row = fetch_one(conn, "evidence_default_oldest", {"low": low, "high": high})
    oldest: uuid.UUID | None = row["oldest"] if row else None
    return Month.of_intent(oldest) if oldest else current


def _create(db: Transactions, month: Month, now: datetime) -> bool:
    params = {"month": month.first_day, "lower": month.lower_id, "upper": month.upper_id}
    try:
        with db.transaction() as conn:
            if not _locked(conn):
                return False
            fetch_one(conn, "evidence_month_create", {**params, "now": now})
    except psycopg.errors.LockNotAvailable:
        log.info("evidence month %s: the tables were busy; trying again later", month)
        return False
    return True


def drop(
    db: Transactions,
    month: Month,
    tables: tuple[str, ...],
    now: datetime,
    keep: list[uuid.UUID] | None = None,
) -> bool:
    """Drop `month`'s partition of each of `tables`, the rows of the intents
    in `keep` moved to the default partition first, then mark it dropped;
    False when a table stayed busy (what was dropped stays dropped: a
    partition already gone is skipped next time)."""
    params = {"month": month.first_day, "keep": keep or []}
    for table in tables:
        try:
            with db.transaction() as conn:
                if not _locked(conn):
                    return False
                execute(conn, "evidence_month_drop", {**params, "parent": table})
        except psycopg.errors.LockNotAvailable:
            log.info("evidence month %s: %s was busy; trying again later", month, table)
            return False
    mark = (
        "evidence_month_observations_dropped"
        if tables == ("observations",)
        else ("evidence_month_attempts_dropped")
    )
    with db.transaction() as conn:
        execute(conn, mark, {"month": month.first_day, "now": now})
    log.info("evidence month %s dropped: %s", month, ", ".join(tables))
    return True


def _locked(conn: Conn) -> bool:
    row = fetch_one(conn, "evidence_months_lock", {"key": LOCK_KEY})
    if not row or not row["locked"]:
        return False
    fetch_one(conn, "evidence_months_lock_timeout", {"ms": str(LOCK_TIMEOUT_MS)})
    return True
