"""Worker processes racing, and killed at each step of the send path."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import TEST_SECRET
from tidings import Tidings

from .processes import ledger, simulator, start_worker, wait_until

SENT = {"accepted", "timeout_after_accept"}


def engine(db_url: str) -> Tidings:
    return Tidings(db_url, secret_key=TEST_SECRET)


def states(db_url: str) -> Counter[str]:
    with psycopg.connect(db_url) as conn:
        return Counter(
            {r[0]: r[1] for r in conn.execute("SELECT state, count(*) FROM intents GROUP BY state")}
        )


def bulk(t: Tidings, n: int) -> None:
    t.publish_template("notice", channel="sms", body="Notice {{ n }}", required_variables=["n"])
    t.create_job(
        idempotency_key=f"race-{n}",
        event_class="notice",
        purpose="transactional",
        template="notice",
        channels=["sms"],
        variables={"n": "1"},
        audience=[{"ref": f"r{i}", "phone": "+14155550123"} for i in range(n)],
    )
    t.prepare_jobs()


@pytest.mark.parametrize("workers", [2, 4, 8])
def test_workers_racing_send_each_attempt_once(db_url: str, tmp_path: Path, workers: int) -> None:
    total = 10_000
    with engine(db_url) as t:
        bulk(t, total)
    with simulator(seed=3) as sim:
        procs = [
            start_worker(db_url, tmp_path, sim, "--batch-size", "100", "--sms-concurrency", "16")
            for _ in range(workers)
        ]
        try:
            wait_until(
                # A call that timed out under this load is reconciled by a
                # lookup a few seconds later: wait for that too.
                lambda: not set(states(db_url)) - {"accepted", "delivered"},
                timeout=240,
                what="every intent claimed, recorded and reconciled",
            )
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                assert p.wait(timeout=60) == 0
        entries = ledger(sim)
    per_key = Counter(e["idempotency_key"] for e in entries if e["outcome"] in SENT)
    assert len(per_key) == total
    assert set(per_key.values()) == {1}
    final = states(db_url)
    assert set(final) <= {"accepted", "delivered"}, final
    assert sum(final.values()) == total


def one_offer(t: Tidings) -> Any:
    t.publish_template("offer", channel="sms", body="A spot opened.")
    return t.notify(
        idempotency_key="offer:kill",
        channel="sms",
        recipient={"ref": "m1", "phone": "+14155550123"},
        template="offer",
        purpose="transactional",
        event_class="waitlist_offer",
    )


@pytest.mark.parametrize(
    "point", ["after_claim", "before_send", "after_send_before_record", "after_record"]
)
def test_a_worker_killed_at_each_step_sends_no_second_message(
    db_url: str, tmp_path: Path, point: str
) -> None:
    with engine(db_url) as t:
        intent = one_offer(t)
        with simulator(seed=1, receipt_delay_ms=100) as sim:
            doomed = start_worker(
                db_url, tmp_path, sim, "--lease-seconds", "2", faults=f"{point}:kill"
            )
            assert doomed.wait(timeout=60) == -signal.SIGKILL
            rescuer = start_worker(db_url, tmp_path, sim, "--lease-seconds", "2")
            try:
                wait_until(
                    lambda: t.get(intent.id).state.value in ("accepted", "delivered"),
                    timeout=90,
                    what=f"recovery after a kill {point}",
                )
            finally:
                rescuer.send_signal(signal.SIGTERM)
                # When the doomed worker had already finished the job, the
                # rescuer may still be importing: Python's default SIGTERM
                # then ends it, harmlessly, before it could claim anything.
                assert rescuer.wait(timeout=60) in (0, -signal.SIGTERM)
            entries = ledger(sim)
        got = t.get(intent.id)
    accepted = [e for e in entries if e["outcome"] in SENT]
    assert len(accepted) == 1, entries
    assert [a.state for a in got.attempts][-1] in ("accepted", "delivered")
    if point in ("after_claim", "before_send"):
        # never sent: the lookup proved it, and a new attempt key went out
        assert accepted[0]["idempotency_key"].endswith(":attempt:2")
    else:
        assert accepted[0]["idempotency_key"].endswith(":attempt:1")
