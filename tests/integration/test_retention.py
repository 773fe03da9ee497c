"""Retention as promised (#23 item 8, seed 003): four clocks, each from the
policy version the evidence was decided under, each honoured on its own.
The example policy's are distinct: receipts 90 days, attempt evidence 180,
recipient decisions 365 (a job's `evidence_expires_at`), job facts 400.
Each test walks the injected clock to just before and just after each
boundary."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tidings import ManualClock, NotFound, Tidings
from tidings.dispatch.retention import purge
from tidings.policies import builtin_document

from .api_support import auth, client, new_key
from .dispatch_helpers import offer, publish_offer_template, simulator, worker
from .test_jobs import reset_job

HOUR = timedelta(hours=1)


def rows(db_url: str, table: str, where: str = "TRUE", *args: Any) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", args).fetchone()
        assert row is not None
        return int(row[0])


def at(clock: ManualClock, moment: datetime) -> None:
    clock.set(moment)


def delivered_offer(tidings: Tidings, clock: ManualClock) -> Any:
    publish_offer_template(tidings)
    w = worker(tidings, simulator(clock))
    intent = offer(tidings, 1)
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    done = tidings.get(intent.id)
    assert done.state.value == "delivered" and done.terminal_at is not None
    return done


def test_a_single_intents_evidence_goes_clock_by_clock(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    intent = delivered_offer(tidings, clock)
    ended: datetime = intent.terminal_at
    mine = "intent_id = %s"
    assert rows(db_url, "observations", mine, intent.id) > 0

    at(clock, ended + timedelta(days=90) - HOUR)
    purge(tidings.db, clock.now())
    assert rows(db_url, "observations", mine, intent.id) > 0
    at(clock, ended + timedelta(days=90) + HOUR)
    assert purge(tidings.db, clock.now())["observations"] > 0
    assert rows(db_url, "observations", mine, intent.id) == 0
    assert rows(db_url, "attempts", mine, intent.id) == 1  # its own clock

    at(clock, ended + timedelta(days=180) - HOUR)
    purge(tidings.db, clock.now())
    assert rows(db_url, "attempts", mine, intent.id) == 1
    at(clock, ended + timedelta(days=180) + HOUR)
    assert purge(tidings.db, clock.now())["attempts"] == 1
    assert rows(db_url, "attempts", mine, intent.id) == 0
    assert rows(db_url, "transitions", mine, intent.id) == 0
    kept = tidings.get(intent.id)  # the recipient decision outlives its attempts
    assert (kept.state.value, kept.decision_code) == ("delivered", intent.decision_code)
    [note] = [e for e in tidings.timeline(intent.id) if e.kind == "retention"]
    assert note.event == "attempt_evidence_purged" and note.at == clock.now()

    at(clock, ended + timedelta(days=365) - HOUR)
    purge(tidings.db, clock.now())
    assert tidings.get(intent.id).id == intent.id
    at(clock, ended + timedelta(days=365) + HOUR)
    assert purge(tidings.db, clock.now())["intents"] == 1
    with pytest.raises(NotFound):
        tidings.get(intent.id)
    assert rows(db_url, "destinations") == 0


def test_a_jobs_final_counts_are_served_after_its_intents_go(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    job = reset_job(tidings, 3)
    tidings.prepare_jobs()
    w = worker(tidings, simulator(clock))
    w.minters["password_reset"] = lambda intent: {"reset_link": "https://x.example/r?t=abc"}
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    http: TestClient = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant)))
    live = http.get(f"/v1/jobs/{job['id']}").json()
    assert live["counts"] == {"delivered": 3} and live["cost"]["attempts"] == 3
    expires = datetime.fromisoformat(live["evidence_expires_at"])
    created: datetime = tidings.job(job["id"])["created_at"]
    assert expires == created + timedelta(days=365)

    def served() -> dict[str, Any]:
        answer = http.get(f"/v1/jobs/{job['id']}")
        assert answer.status_code == 200, answer.text
        view: dict[str, Any] = answer.json()
        return {k: view[k] for k in ("status", "counts", "counts_by_channel", "cost")}

    before = served()
    at(clock, created + timedelta(days=181))  # attempt evidence gone, intents kept
    purge(tidings.db, clock.now())
    assert rows(db_url, "attempts") == 0 and rows(db_url, "intents") == 3
    assert served() == before

    at(clock, expires - HOUR)
    purge(tidings.db, clock.now())
    assert rows(db_url, "intents") == 3 and rows(db_url, "job_recipients") == 3
    at(clock, expires + HOUR)
    removed = purge(tidings.db, clock.now())
    assert removed["intents"] == 3 and removed["job_recipients"] == 3
    assert served() == before  # the final counts, kept on the job
    assert before["counts"] == {"delivered": 3}

    at(clock, created + timedelta(days=400) - HOUR)
    purge(tidings.db, clock.now())
    assert http.get(f"/v1/jobs/{job['id']}").status_code == 200
    at(clock, created + timedelta(days=400) + HOUR)
    assert purge(tidings.db, clock.now())["jobs"] == 1
    assert http.get(f"/v1/jobs/{job['id']}").status_code == 404
    assert rows(db_url, "jobs") == 0


def test_each_intent_keeps_the_clocks_of_its_own_policy_version(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    old = delivered_offer(tidings, clock)
    doc = copy.deepcopy(builtin_document("default"))
    doc["version"] = "short-evidence"
    doc["retention"] = {**doc["retention"], "attempt_evidence_days": 7}
    tidings.publish_policy(doc)
    w = worker(tidings, simulator(clock))
    new = offer(tidings, 2)
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()
    assert tidings.get(new.id).policy_version == "short-evidence"
    at(clock, clock.now() + timedelta(days=8))
    purge(tidings.db, clock.now())
    assert rows(db_url, "attempts", "intent_id = %s", new.id) == 0
    assert tidings.get(new.id).state.value == "delivered"  # the decision is kept
    assert rows(db_url, "attempts", "intent_id = %s", old.id) == 1
