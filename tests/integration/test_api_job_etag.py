"""GET /v1/jobs/{id}: an ETag, 304 when nothing moved, and when to poll."""

from __future__ import annotations

from typing import Any

from tidings import ManualClock, Tidings

from .api_support import auth, client, new_key
from .dispatch_helpers import simulator, worker
from .test_jobs import reset_job


def test_etag_answers_304_until_the_job_moves(tidings: Tidings, clock: ManualClock) -> None:
    job = reset_job(tidings, 3)
    tidings.prepare_jobs()
    http: Any = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant)))
    first = http.get(f"/v1/jobs/{job['id']}")
    assert first.status_code == 200
    tag = first.headers["ETag"]
    body = first.json()
    assert body["status"] == "dispatching" and body["counts"] == {"pending": 3}
    assert first.headers["Retry-After"] == str(body["poll_after_seconds"])
    assert 1 <= body["poll_after_seconds"] <= 30
    clock.advance(5)  # time alone moves nothing
    again = http.get(f"/v1/jobs/{job['id']}", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.headers["ETag"] == tag and not again.content
    w = worker(tidings, simulator(clock))
    w.minters["password_reset"] = lambda intent: {"reset_link": "https://x.example/r?t=abc"}
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    moved = http.get(f"/v1/jobs/{job['id']}", headers={"If-None-Match": tag})
    assert moved.status_code == 200 and moved.headers["ETag"] != tag
    done = moved.json()
    assert done["status"] == "complete" and done["counts"] == {"delivered": 3}
    assert done["poll_after_seconds"] == 300 and done["cost"]["attempts"] == 3
    assert done["cost"]["by_channel"]["email"]["attempts"] == 3
    assert done["cost"]["retained_bytes"] > 0
