"""Waiting for PostgreSQL at start-up, so no process needs a manual restart.

A worker or API process started while its database is down (a host reboot
brings the application up before PostgreSQL, a failover is in progress, the
server is still replaying WAL) keeps trying with bounded exponential backoff
and jitter instead of exiting. Once running, the processes already ride out
outages on their own (the pool checks connections on checkout, the worker's
loops retry); this covers the one step where a failure would be fatal.

The schedule is pure (`Backoff.delay`) and the loop takes its clock, sleep
and random draws as arguments, so both are tested without waiting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tidings.platform.logging import get_logger

T = TypeVar("T")

log = get_logger("tidings.store.wait")

# Errors that mean "not reachable yet": refused or reset connections, a server
# starting up or shutting down (57P0x), too many clients, a pool timeout.
# Anything else (a changed migration, a permission error) will not get better
# by waiting and is raised at once.
RETRYABLE: tuple[type[BaseException], ...] = (psycopg.OperationalError,)


class DatabaseUnavailable(Exception):
    """The database did not answer within the configured maximum wait."""


class WaitInterrupted(Exception):
    """Asked to stop (SIGTERM) while waiting for the database."""


@dataclass(frozen=True)
class Backoff:
    """Pauses between attempts: `initial * factor**(n-1)`, capped, minus jitter.

    The cap bounds how long a process may stay idle after the database is
    back; the jitter spreads out the reconnects of many processes that all
    lost the same server at the same moment.
    """

    initial: float = 0.5
    factor: float = 2.0
    cap: float = 10.0
    jitter: float = 0.5  # up to this share of each pause is taken off at random

    def delay(self, attempt: int, draw: float) -> float:
        """The pause after failed attempt `attempt` (1-based); `draw` is in [0, 1)."""
        if attempt < 1:
            raise ValueError("attempts count from 1")
        # Clamp the exponent: past the cap it no longer matters, and a float
        # power of a large attempt count would overflow.
        base = min(self.cap, self.initial * self.factor ** min(attempt - 1, 64))
        return base * (1.0 - self.jitter * draw)


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def wait_for_database(
    action: Callable[[], T],
    *,
    dsn: str,
    max_wait: float | None = None,
    backoff: Backoff | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], bool] = _sleep,
    draw: Callable[[], float] = random.random,
) -> T:
    """Run `action` (connect, migrate) until it stops failing for want of a database.

    `max_wait` bounds the seconds spent retrying (None: no bound; 0: one try).
    `sleep` returns True when the process was asked to stop meanwhile, as
    `threading.Event.wait` does. Raises `DatabaseUnavailable` once `max_wait`
    is spent and `WaitInterrupted` on a stop; other errors pass through.
    """
    schedule = backoff or Backoff()
    where = describe_dsn(dsn)
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            result = action()
        except RETRYABLE as exc:
            waited = clock() - started
            reason = _reason(exc, dsn)
            pause = schedule.delay(attempt, draw())
            if max_wait is not None:
                left = max_wait - waited
                if left <= 0:
                    log.error(
                        "database unavailable; giving up",
                        database=where,
                        attempts=attempt,
                        waited_s=round(waited, 1),
                        error=reason,
                    )
                    raise DatabaseUnavailable(
                        f"the database at {where} did not answer within {max_wait:g}s"
                        f" ({attempt} attempts); last error: {reason}"
                    ) from None
                pause = min(pause, left)  # one last try right at the limit
            log.warning(
                "database unavailable; retrying",
                database=where,
                attempt=attempt,
                retry_in_s=round(pause, 2),
                waited_s=round(waited, 1),
                error=reason,
            )
            if sleep(pause):
                raise WaitInterrupted("stopped while waiting for the database") from None
            continue
        if attempt > 1:
            log.info(
                "database available",
                database=where,
                attempts=attempt,
                waited_s=round(clock() - started, 1),
            )
        return result


def describe_dsn(dsn: str) -> str:
    """The DSN without its password (or anything else secret), for logs."""
    try:
        params: dict[str, Any] = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparseable DSN>"
    shown = {k: v for k, v in params.items() if k in ("host", "hostaddr", "port", "dbname", "user")}
    return make_conninfo("", **shown)


def _reason(exc: BaseException, dsn: str) -> str:
    # libpq messages name host and port, not the password; scrub it anyway
    # in case some server or driver echoes connection parameters back.
    text = " ".join(str(exc).split()) or type(exc).__name__
    try:
        password = conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        password = None
    if password:
        text = text.replace(str(password), "***")
    return f"{type(exc).__name__}: {text}"
