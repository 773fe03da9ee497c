"""The job_counts stripes (migrations/0045_job_counts_cheaper.sql): each
transaction writing a job's counts holds a stripe no other running
transaction writes (counts_stripe, 0043), so writers never wait on each other's count rows, in
whatever order their statements touch them (a deadlock was seen with
stripes picked by pg_backend_pid() % 32); and the kept numbers still equal
a recount.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tidings import ManualClock

from .conftest_helpers import make_tidings

WRITERS = 32  # as many as the old stripes: two of them shared one, whatever the pids
CODES = ("stripe-a", "stripe-b")


def _job_intents(db_url: str, n: int) -> tuple[Any, list[Any]]:
    t = make_tidings(db_url, ManualClock())
    try:
        t.publish_template("stripes", channel="email", subject="Hi", body="Hi")
        job_id = t.create_job(
            idempotency_key="stripes",
            event_class="stripes",
            purpose="transactional",
            template="stripes",
            channels=["email"],
            audience=[{"ref": f"r{i}", "email": f"r{i}@example.com"} for i in range(n)],
        )["id"]
        t.prepare_jobs()
        tenant = t.tenant
    finally:
        t.close()
    with psycopg.connect(db_url) as conn:
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM intents WHERE tenant_id = %s AND job_id = %s ORDER BY id",
            (tenant, job_id)).fetchall()]  # fmt: skip
    assert len(ids) == n
    return job_id, ids


def _kept_by_code(conn: psycopg.Connection[Any], job_id: Any) -> dict[str, int]:
    rows = conn.execute(
        "SELECT code, sum(intents)::int FROM job_counts WHERE job_id = %s AND state <> ''"
        " GROUP BY code HAVING sum(intents) <> 0",
        (job_id,),
    ).fetchall()
    return dict(rows)


def _recounted_by_code(conn: psycopg.Connection[Any], job_id: Any) -> dict[str, int]:
    rows = conn.execute(
        "SELECT coalesce(decision_code, ''), count(*)::int FROM intents WHERE job_id = %s"
        " GROUP BY 1",
        (job_id,),
    ).fetchall()
    return dict(rows)


def test_concurrent_writers_of_one_job_never_wait_on_its_count_rows(db_url: str) -> None:
    job_id, ids = _job_intents(db_url, 2 * WRITERS)
    conns = [psycopg.connect(db_url) for _ in range(WRITERS)]
    try:
        # Each writer moves two of the job's intents, one statement each, the
        # even writers A then B and the odd ones B then A: the count rows
        # (job, channel, state, code) are touched in opposite orders. On a
        # shared stripe the second writer would wait (and a pair, deadlock);
        # lock_timeout turns any wait into a failure.
        for k, conn in enumerate(conns):
            conn.execute("SET lock_timeout = '3s'")
            first, second = CODES if k % 2 == 0 else CODES[::-1]
            conn.execute("UPDATE intents SET decision_code = %s WHERE id = %s", (first, ids[2 * k]))
        for k, conn in enumerate(conns):
            first, second = CODES if k % 2 == 0 else CODES[::-1]
            conn.execute(
                "UPDATE intents SET decision_code = %s WHERE id = %s", (second, ids[2 * k + 1])
            )
        stripes = {
            conn.execute("SELECT current_setting('tidings.counts_stripe')").fetchone()[0]  # type: ignore[index]
            for conn in conns
        }
        assert len(stripes) == WRITERS
        for conn in conns:
            conn.commit()
    finally:
        for conn in conns:
            conn.close()
    with psycopg.connect(db_url) as conn:
        assert _kept_by_code(conn, job_id) == _recounted_by_code(conn, job_id)
        assert _kept_by_code(conn, job_id)["stripe-a"] == WRITERS
        used = conn.execute(
            "SELECT count(DISTINCT stripe) FROM job_counts WHERE job_id = %s AND code = %s",
            (job_id, "stripe-a"),
        ).fetchone()
        assert used is not None and used[0] == WRITERS


def test_rows_of_no_job_write_no_counts(db_url: str) -> None:
    t = make_tidings(db_url, ManualClock())
    try:
        t.publish_template("single", channel="email", subject="Hi", body="Hi")
        t.notify(
            idempotency_key="single-1",
            channel="email",
            recipient={"ref": "r1", "email": "r1@example.com"},
            template="single",
            purpose="transactional",
            event_class="single",
        )
    finally:
        t.close()
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE intents SET decision_code = 'x'")
        assert conn.execute("SELECT count(*) FROM job_counts").fetchone() == (0,)
