"""The console's jobs page shows the status the API derives, not the
stored one (issue 38: it said `dispatching` for jobs the API reported
`complete`)."""

from __future__ import annotations

from tidings import ManualClock, Tidings
from tidings.console import data

from .dispatch_helpers import simulator, worker
from .test_jobs import reset_job


def test_the_jobs_page_and_the_api_agree(tidings: Tidings, clock: ManualClock) -> None:
    job = reset_job(tidings, 2)
    tidings.prepare_jobs()
    w = worker(tidings, simulator(clock))
    w.minters["password_reset"] = lambda intent: {"reset_link": "https://x.example/r?t=abc"}
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    api = tidings.job(job["id"])
    with tidings.db.transaction() as conn:
        [row] = data.jobs(conn, tidings.tenant).jobs
        stored = conn.execute("SELECT status FROM jobs").fetchone()
    assert api["status"] == "complete" and stored is not None
    assert "dispatching" in str(stored)  # what the console showed before
    assert row.status == api["status"]
    assert row.counts == api["counts"]
