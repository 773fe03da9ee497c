"""Whether this process is waiting for a writable primary.

A database that fails over (docs/scaling.md, "A database that fails over")
is away for seconds: the primary's connections break, and new ones find no
member that takes writes until a standby is promoted. The pool meets that
as errors, which would otherwise read as many unrelated failures. The
first one is noted once (`waiting for a primary`), and so is the first
transaction that commits again (`primary reached`, with the seconds
waited); `tidings_database_waiting_for_primary` says the same to
Prometheus (observability/process_metrics.py).

A connection to a standby (the DSN lacks `target_session_attrs`, or a
proxy sent it to the wrong member) fails every write with SQLSTATE 25006:
that error becomes `PrimaryUnavailable`, an `OperationalError` like a lost
connection, so every caller already treats it as the database being away
(the API answers 503, the worker's loops wait and try again).

A connection whose answers fall out of step with its requests (psycopg's
own `InternalError`, with no SQLSTATE: "received 2 results from command
'BEGIN'", seen through PgBouncer right after a server was killed) cannot be
trusted with another statement either: it is closed and becomes
`ConnectionOutOfStep`, read as a lost connection. Whether its last command
took effect is unknown, as for any connection lost mid-command.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from tidings.platform.logging import get_logger
from tidings.store.wait import describe_dsn

log = get_logger("tidings.store.primary")

# Class 08: the connection is gone or could not be made; the server shutting
# down, crashed or still starting (57P01-57P03); a read-only server (25006).
NO_PRIMARY_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25006"})
READ_ONLY = "25006"


class PrimaryUnavailable(psycopg.OperationalError):
    """The connection reached a member that does not take writes."""


class ConnectionOutOfStep(psycopg.OperationalError):
    """The server's answers did not match the commands sent on the connection."""


def without_primary(error: BaseException, conn: psycopg.Connection[Any] | None) -> bool:
    """Whether `error` says no writable primary answered, rather than
    anything about the statement (a timeout, a constraint, a bad value)."""
    if isinstance(error, PoolTimeout | PrimaryUnavailable | ConnectionOutOfStep):
        return True
    if conn is not None and conn.broken:
        return True
    sqlstate = getattr(error, "sqlstate", None) or ""
    return sqlstate.startswith("08") or sqlstate in NO_PRIMARY_SQLSTATES


def read_only(error: BaseException) -> bool:
    return getattr(error, "sqlstate", None) == READ_ONLY


def out_of_step(error: BaseException) -> bool:
    """Raised by psycopg itself about the protocol, not by the server: every
    server error carries a SQLSTATE."""
    return isinstance(error, psycopg.InternalError) and error.sqlstate is None


class PrimaryWatch:
    """Since when this process has found no primary; how many waits ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.since: float | None = None
        self.waits = 0
        self.waited_s = 0.0

    @property
    def waiting(self) -> bool:
        return self.since is not None

    def lost(self, error: BaseException, dsn: str) -> None:
        with self._lock:
            if self.since is not None:
                return
            self.since = time.monotonic()
        log.warning(
            "waiting for a primary",
            database=describe_dsn(dsn),
            error=type(error).__name__,
            sqlstate=getattr(error, "sqlstate", None),
        )

    def reached(self, dsn: str) -> None:
        if self.since is None:  # the common case: no lock, no clock
            return
        with self._lock:
            if self.since is None:
                return
            waited = time.monotonic() - self.since
            self.since = None
            self.waits += 1
            self.waited_s += waited
        log.info("primary reached", database=describe_dsn(dsn), waited_s=round(waited, 2))


# One per process, as the metrics it feeds are.
WATCH = PrimaryWatch()
