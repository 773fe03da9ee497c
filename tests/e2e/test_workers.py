"""Worker processes racing, and killed at each step of the send path."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg
from harness.processes import (
    STACKS,
    await_exit,
    ledger,
    offers,
    simulator,
    start_worker,
    wait_until,
)

from tests.conftest import TEST_SECRET, with_example_policy
from tidings import Tidings
from tidings.domain.keys import attempt_key

SENT = {"accepted", "timeout_after_accept"}


def engine(db_url: str) -> Tidings:
    return with_example_policy(Tidings(db_url, secret_key=TEST_SECRET))


def states(db_url: str) -> Counter[str]:
    with psycopg.connect(db_url) as conn:
        return Counter(
            {r[0]: r[1] for r in conn.execute("SELECT state, count(*) FROM intents GROUP BY state")}
        )


def test_a_worker_stopped_during_a_provider_stall_hands_back_and_exits_within_its_lease(
    db_url: str, tmp_path: Path
) -> None:
    """Every call hangs (accepted, then no answer): a SIGTERM must not wait
    for each queued send to time out in turn. The calls not yet started are
    handed back unsent; the hanging ones are left to lease recovery."""
    lease = 3.0
    log = tmp_path / "worker.log"
    with engine(db_url) as t:
        ids = offers(t, "stall", 8)
        with simulator(seed=2, rate_timeout=1.0, timeout_stall_ms=60_000) as sim:
            with log.open("wb") as out:
                worker = start_worker(
                    db_url, tmp_path, sim, "--lease-seconds", str(lease),
                    "--sms-concurrency", "1", output=out,
                )  # fmt: skip
                wait_until(lambda: ledger(sim), what="a call under way")
                worker.send_signal(signal.SIGTERM)
                started = time.monotonic()
                code = worker.wait(timeout=60)
                took = time.monotonic() - started
            text = log.read_text(errors="replace")
            assert code == 0, text
            # Within the lease, not one 10 s client timeout per queued send.
            assert took < lease + 4, f"stopped in {took:.1f} s:\n{text}"
            called = {e["idempotency_key"] for e in ledger(sim)}
            handed_back = [i for i in ids if t.get(i).state.value == "pending"]
            assert handed_back, "no unstarted send was handed back"
            assert len(handed_back) + len(called) <= len(ids)
            httpx.put(f"{sim}/_config", json={"rate_timeout": 0.0}, timeout=5).raise_for_status()
            rescuer = start_worker(db_url, tmp_path, sim, "--lease-seconds", str(lease))
            try:
                wait_until(
                    lambda: all(t.get(i).state.value in ("accepted", "delivered") for i in ids),
                    timeout=120,
                    what="the handed-back and the hanging sends settled",
                )
            finally:
                rescuer.send_signal(signal.SIGTERM)
                assert rescuer.wait(timeout=60) == 0
            entries = ledger(sim)
    per_key = Counter(e["idempotency_key"] for e in entries if e["outcome"] in SENT)
    assert len(per_key) == len(ids)
    assert set(per_key.values()) == {1}, per_key


def test_sigusr1_prints_where_each_thread_waits_and_the_worker_carries_on(
    db_url: str, tmp_path: Path
) -> None:
    """An operator's look inside a live worker whose provider hangs: every
    thread's stack, the one in the provider call among them, and no stop."""
    log = tmp_path / "worker.log"
    with engine(db_url) as t:
        offers(t, "look", 2)
        with simulator(seed=3, rate_timeout=1.0, timeout_stall_ms=60_000) as sim:
            with log.open("wb") as out:
                worker = start_worker(db_url, tmp_path, sim, "--lease-seconds", "5", output=out)
                try:
                    wait_until(lambda: ledger(sim), what="a call under way")
                    worker.send_signal(signal.SIGUSR1)
                    stacks = wait_until(
                        lambda: (
                            STACKS in log.read_text(errors="replace")
                            and log.read_text(errors="replace")
                        ),
                        what="the stacks",
                    )
                    assert worker.poll() is None, stacks
                    assert "httpx" in stacks or "httpcore" in stacks, stacks  # the hanging call
                    assert "stop overran" not in stacks
                finally:
                    worker.send_signal(signal.SIGTERM)
                    code = await_exit(worker, log)
            assert code == 0, log.read_text(errors="replace")


def test_a_cancel_while_the_claim_waits_for_its_call_stops_the_call(
    db_url: str, tmp_path: Path
) -> None:
    """Invariant 5 through the real processes: a worker with one send thread
    claims four offers from a provider that answers after a second; the
    member cancels the last one while it waits its turn. It is never sent."""
    with engine(db_url) as t:
        ids = offers(t, "wait", 4)
        last = ids[-1]
        with simulator(seed=4, latency_ms=1000) as sim:
            worker = start_worker(db_url, tmp_path, sim, "--sms-concurrency", "1")
            try:
                wait_until(lambda: t.get(last).state.value == "sending", what="the claim")
                # Three one-second calls go first: seconds of margin.
                assert t.cancel(last, reason="member_left").state.value == "canceled"
                called_before = {e["idempotency_key"] for e in ledger(sim)}
                wait_until(
                    lambda: all(t.get(i).state.value in ("accepted", "delivered") for i in ids[:3]),
                    what="the three others sent",
                )
                # Its call never started: the attempt closes as withheld.
                wait_until(lambda: t.get(last).attempts[-1].state == "failed", what="withheld")
            finally:
                worker.send_signal(signal.SIGTERM)
                assert worker.wait(timeout=60) == 0
            entries = ledger(sim)
        got = t.get(last)
    assert attempt_key(last, 1) not in called_before
    sent = Counter(e["idempotency_key"] for e in entries if e["outcome"] in SENT)
    assert sorted(sent) == sorted(attempt_key(i, 1) for i in ids[:3])
    assert got.state.value == "canceled"
    assert [(a.state, a.code) for a in got.attempts] == [("failed", "WITHDRAWN")]
