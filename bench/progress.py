"""Watching a run from outside: how many intents have left the dispatch queue."""

from __future__ import annotations

import time

import psycopg

# An intent counts as dispatched once it is past the claimable and in-flight
# states: accepted, or anything after (delivered once a status check ran).
IN_QUEUE = ["pending", "sending", "resend_due"]
POLL_S = 0.25


def dispatched(conn: psycopg.Connection[tuple[int]]) -> int:
    row = conn.execute("SELECT count(*) FROM intents WHERE state <> ALL(%s)", (IN_QUEUE,))
    found = row.fetchone()
    return int(found[0]) if found else 0


def dispatched_count(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return dispatched(conn)


def wait_dispatched(dsn: str, target: int, started: float, cap_s: float) -> tuple[int, float]:
    """Poll until `target` intents are dispatched or `cap_s` passed: (count, seconds)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            done = dispatched(conn)
            elapsed = time.perf_counter() - started
            if done >= target or elapsed >= cap_s:
                return done, elapsed
            time.sleep(POLL_S)


def states(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT state, count(*) FROM intents GROUP BY state").fetchall()
    return {str(state): int(count) for state, count in rows}
