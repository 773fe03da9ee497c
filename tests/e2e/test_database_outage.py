"""Processes started while PostgreSQL is down wait for it, then just work.

"Processes recover by themselves: reconnect with backoff, resume leases,
and report health; no manual step after a database restart." Each test
owns a PostgreSQL on a loopback port and starts it only after the process
is already up and retrying.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness.postgres import LocalPostgres
from harness.processes import ledger, offers, simulator, start_api, start_worker, wait_until

from tests.conftest import TEST_SECRET, with_example_policy
from tidings import Tidings
from tidings.cli.devstack import free_port

PASSWORD = "pw-must-not-leak-7f3a"
RETRYING = "database unavailable; retrying"
SENT = {"accepted", "timeout_after_accept"}


@pytest.fixture
def postgres(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalPostgres]:
    # The default (wait as long as it takes) is what is under test.
    monkeypatch.delenv("TIDINGS_DATABASE_WAIT_SECONDS", raising=False)
    pg = LocalPostgres(tmp_path / "pg", free_port()).init()
    try:
        yield pg
    finally:
        if pg.running():
            pg.stop()


def output(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def retried(proc: subprocess.Popen[bytes], log: Path, times: int) -> bool:
    assert proc.poll() is None, f"exited with {proc.returncode} instead of waiting:\n{output(log)}"
    return output(log).count(RETRYING) >= times


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60)


def test_a_worker_started_before_its_database_migrates_and_sends_once_it_is_up(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    url = postgres.url(PASSWORD)
    with simulator(seed=5) as sim, log.open("wb") as out:
        worker = start_worker(url, tmp_path, sim, output=out)
        try:
            wait_until(lambda: retried(worker, log, 2), what="the worker retrying")
            postgres.start()
            wait_until(lambda: "running; channels" in output(log), what="the worker running")
            with with_example_policy(Tidings(url, secret_key=TEST_SECRET)) as t:
                t.publish_template("offer", channel="sms", body="A spot opened.")
                intent = t.notify(
                    idempotency_key="offer:outage",
                    channel="sms",
                    recipient={"ref": "m1", "phone": "+14155550123"},
                    template="offer",
                    purpose="transactional",
                    event_class="waitlist_offer",
                )
                wait_until(
                    lambda: t.get(intent.id).state.value in ("accepted", "delivered"),
                    what="the intent sent by the same worker process",
                )
        finally:
            assert stop(worker) == 0, output(log)
        entries = ledger(sim)
    assert [e["outcome"] for e in entries if e["outcome"] in SENT] == ["accepted"]
    assert PASSWORD not in output(log)


def test_the_api_waits_for_its_database_then_reports_its_outages(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    log = tmp_path / "api.log"
    port = free_port()
    health = f"http://127.0.0.1:{port}/healthz"

    def status() -> int | None:
        try:
            return httpx.get(health, timeout=10).status_code
        except httpx.HTTPError:
            return None

    with log.open("wb") as out:
        api = start_api(postgres.url(PASSWORD), tmp_path, port, output=out)
        try:
            wait_until(lambda: retried(api, log, 2), what="the API retrying")
            postgres.start()
            wait_until(lambda: status() == 200, what="the API serving once the database is up")
            postgres.stop()
            wait_until(lambda: status() == 503, what="/healthz reporting the database down")
            down = httpx.get(health, timeout=10).json()
            assert down["code"] == "UNAVAILABLE"
            postgres.start()
            wait_until(lambda: status() == 200, what="/healthz once the database is back")
            assert api.poll() is None
        finally:
            stop(api)
    assert PASSWORD not in output(log)


def test_a_bounded_wait_ends_with_a_clear_error(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/postgres"
    with log.open("wb") as out:
        worker = start_worker(
            url, tmp_path, "http://127.0.0.1:9", "--database-wait-seconds", "1", output=out
        )
        assert worker.wait(timeout=60) == 1
    text = output(log)
    assert "did not answer within 1s" in text, text
    assert "Connection refused" in text
    assert PASSWORD not in text


def test_a_worker_stopped_while_its_database_is_down_exits_within_its_lease(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    """SIGTERM with sends in flight and no database to record them in: the
    worker gives them its lease, then exits; the next worker's lease
    recovery settles them, and nothing is sent twice."""
    lease = 4.0
    log = tmp_path / "worker.log"
    url = postgres.url(PASSWORD)
    postgres.start()
    with simulator(seed=5, latency_ms=1500) as sim, log.open("wb") as out:
        worker = start_worker(url, tmp_path, sim, "--lease-seconds", str(lease), output=out)
        wait_until(lambda: "running; channels" in output(log), what="the worker running")
        with with_example_policy(Tidings(url, secret_key=TEST_SECRET)) as t:
            ids = offers(t, "stop", 12)
            wait_until(
                lambda: any(t.get(i).state.value == "sending" for i in ids),
                what="sends in flight",
            )
        postgres.stop()
        worker.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = worker.wait(timeout=60)
        took = time.monotonic() - started
        assert code == 0, output(log)
        # The lease, then closing the pool; far from the minutes a wait on
        # each unreachable connection would add up to.
        assert took < lease + 10, f"stopped in {took:.1f} s:\n{output(log)}"
        postgres.start()
        second = start_worker(url, tmp_path, sim, "--lease-seconds", str(lease), output=out)
        try:
            with with_example_policy(Tidings(url, secret_key=TEST_SECRET)) as t:
                wait_until(
                    lambda: all(t.get(i).state.value in ("accepted", "delivered") for i in ids),
                    timeout=120,
                    what="every intent settled by the next worker",
                )
        finally:
            assert stop(second) == 0, output(log)
        entries = ledger(sim)
    keys = [e["idempotency_key"] for e in entries if e["outcome"] in SENT]
    assert len(keys) == len(set(keys)) == len(ids)
