"""Watching a run from outside: how many intents have left the dispatch
queue, and whether a job is prepared.

Counted from the audit, not from `intents`: a count over `intents` is a
sequential scan, and at a million intents one took 0.6 s, so a poll every
0.25 s kept a PostgreSQL backend busy for the whole measurement and took a
core from the workers it was timing. The transitions written since a mark
are read by primary key, at a cost that depends on the progress made, not
on the size of the table. A job's status is read from its row for the same
reason: the job view (`GET /v1/jobs/{id}`) counts the job's intents and
attempts, and polled every 0.2 s through a 1M job's preparation it kept
two backends busy (a parallel scan) through the whole measurement.
"""

from __future__ import annotations

import time

import psycopg

from tidings.platform.settings import Settings

# An intent has left the queue when it moves from a claimable or in-flight
# state to any other: accepted, or suppressed or failed without a send. A
# claim (pending -> sending) or a hand-back (sending -> pending) stays in it.
IN_QUEUE = ["pending", "sending", "resend_due"]
POLL_S = 0.25
JOB_POLL_S = 0.05  # a primary-key read: polled often, so a 10k job is timed closely
TENANT = Settings().tenant  # the bench's engines act for the default tenant


def mark(conn: psycopg.Connection[tuple[int]]) -> int:
    """The audit's position now: count what is dispatched after it."""
    row = conn.execute(
        "SELECT coalesce(max(id), 0) FROM transitions WHERE tenant_id = %s", (TENANT,)
    ).fetchone()
    return int(row[0]) if row else 0


def dispatched(
    conn: psycopg.Connection[tuple[int]], since: int = 0, until: int | None = None
) -> int:
    """Intents that left the queue after the mark `since` (up to `until`)."""
    row = conn.execute(
        "SELECT count(*) FROM transitions WHERE tenant_id = %s AND id > %s"
        " AND (%s::bigint IS NULL OR id <= %s)"
        " AND from_state = ANY(%s) AND NOT to_state = ANY(%s)",
        (TENANT, since, until, until, IN_QUEUE, IN_QUEUE),
    )
    found = row.fetchone()
    return int(found[0]) if found else 0


def still_queued(dsn: str, total: int) -> tuple[int, int]:
    """(a mark, how many of `total` intents had not left the queue at it).

    Counting everything before a mark is slow on a big table, so it runs to
    a first mark and only the short stretch after it is counted to the
    second: the clock can start at once after this returns.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        first = mark(conn)
        before = dispatched(conn, 0, first)
        since = mark(conn)
        return since, total - before - dispatched(conn, first, since)


def wait_dispatched(
    dsn: str, target: int, started: float, cap_s: float, since: int = 0
) -> tuple[int, float]:
    """Poll until `target` intents are dispatched after the mark `since`, or
    `cap_s` passed since `started`: (count, seconds)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            done = dispatched(conn, since)
            elapsed = time.perf_counter() - started
            if done >= target or elapsed >= cap_s:
                return done, elapsed
            time.sleep(POLL_S)


def wait_job(dsn: str, job_id: str, until: set[str], cap_s: float) -> str:
    """Poll the job's row until its status is in `until` or `cap_s` passed: the last status."""
    deadline = time.monotonic() + cap_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT status FROM jobs WHERE tenant_id = %s AND id = %s", (TENANT, job_id)
            ).fetchone()
            status = str(row[0]) if row else "missing"
            if status in until or time.monotonic() >= deadline:
                return status
            time.sleep(JOB_POLL_S)


def states(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT state, count(*) FROM intents GROUP BY state").fetchall()
    return {str(state): int(count) for state, count in rows}
