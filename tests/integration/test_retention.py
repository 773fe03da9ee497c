from __future__ import annotations

import psycopg

from tidings import ManualClock, Tidings
from tidings.dispatch.retention import purge

from .dispatch_helpers import offer, publish_offer_template, simulator, worker
from .test_jobs import reset_job


def rows(db_url: str, table: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def test_purge_removes_recipient_evidence_and_keeps_job_facts(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    job = reset_job(tidings, 3)
    tidings.prepare_jobs()
    w = worker(tidings, simulator(clock))
    w.minters["password_reset"] = lambda intent: {"reset_link": "https://x.example/r?t=abc"}
    live = offer(tidings, 1)
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    assert purge(tidings.db, clock.now())["intents"] == 0
    clock.advance(days=181)  # past the default policy's attempt evidence (180 days)
    w.sweep_once()
    removed = purge(tidings.db, clock.now())
    assert removed["intents"] == 4
    assert rows(db_url, "intents") == rows(db_url, "attempts") == rows(db_url, "transitions") == 0
    assert rows(db_url, "observations") == 0
    status = tidings.job(job["id"])
    assert status["id"] == job["id"]
    with psycopg.connect(db_url) as conn:
        final = conn.execute("SELECT final_counts FROM jobs").fetchone()
    assert final is not None and final[0] == {"delivered": 3}
    clock.advance(days=400)
    removed = purge(tidings.db, clock.now())
    assert removed["job_recipients"] == 3
    assert rows(db_url, "destinations") == 0
    assert rows(db_url, "jobs") == 1
    del live
