"""Worker processes racing over one 10,000-intent job: each attempt is sent
once, whatever the number of workers."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from harness.processes import ledger, simulator, start_worker, wait_until

from tests.e2e.test_workers import SENT, engine, states
from tidings import Tidings


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


def _racing_workers(names: str | None) -> list[int]:
    """How many workers race: two and eight, unless `TIDINGS_RACING_WORKERS`
    names some (CI runs one a day, in turn: .ci/run)."""
    if not names:
        return [2, 8]
    try:
        counts = [int(n) for n in names.split(",") if n.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 2:
        raise pytest.UsageError(f"TIDINGS_RACING_WORKERS: worker counts of 2 or more: {names!r}")
    return counts


@pytest.mark.parametrize("workers", _racing_workers(os.environ.get("TIDINGS_RACING_WORKERS")))
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
        except AssertionError as exc:  # say where they stopped
            raise AssertionError(f"{exc}: {states(db_url)}") from None
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
