"""The harness's own retries. Its pool meets the same dead connections as
everyone after a restart or a failover, and the API may be away under a
fault; what it writes is idempotent by key, so it simply tries again, a
bounded number of times."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import psycopg

T = TypeVar("T")
RETRIES = 8


def retrying(action: Callable[[], T]) -> T:
    for attempt in range(RETRIES):
        try:
            return action()
        except psycopg.OperationalError:
            if attempt == RETRIES - 1:
                raise
            time.sleep(0.5 * (attempt + 1))  # the server is coming back; bounded
    raise AssertionError("unreachable")
