"""Scrapes that pile up share one read of the ledger.

Found by the hour's soak (issue #43): a sampler of the API's metrics that
gave up after 2 s and asked again every half second left several reads of
every finished intent running at once on the server (the histograms read
them all), and the big job's dispatch fell to four intents a second.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from prometheus_client import generate_latest

from tidings import Tidings
from tidings.observability import shared_read
from tidings.observability.metrics import ledger_registry
from tidings.store import metrics_reads

SCRAPES = 4


def test_scrapes_that_arrive_during_a_read_get_its_answer(
    tidings: Tidings, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = 0
    waiting = threading.Semaphore(0)
    first_read = metrics_reads.intents_by_state

    class Counted(Future[Any]):
        def result(self, timeout: float | None = None) -> Any:
            waiting.release()  # a scrape is about to wait on the read in progress
            return super().result(timeout)

    def held_read(conn: Any) -> Any:
        nonlocal reads
        reads += 1
        # The read is held until every other scrape waits on it, as on a slow read.
        for _ in range(SCRAPES - 1):
            assert waiting.acquire(timeout=30), "the other scrapes did not all wait"
        return first_read(conn)

    monkeypatch.setattr(shared_read, "Future", Counted)
    monkeypatch.setattr(metrics_reads, "intents_by_state", held_read)
    registry = ledger_registry(tidings.runtime)

    def scrape() -> bytes:
        return generate_latest(registry)

    with ThreadPoolExecutor(SCRAPES) as pool:
        bodies = list(pool.map(lambda _: scrape(), range(SCRAPES)))

    assert reads == 1
    assert all(b"tidings_ledger_up 1.0" in body for body in bodies)
    ledger = [
        b"\n".join(line for line in body.splitlines() if b"tidings_" in line) for body in bodies
    ]
    assert len(set(ledger)) == 1  # the same read's series, served to each


def test_a_scrape_after_a_read_ended_reads_again(
    tidings: Tidings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sharing is only with a read in progress: nothing is served stale."""
    reads = 0
    first_read = metrics_reads.intents_by_state

    def counted(conn: Any) -> Any:
        nonlocal reads
        reads += 1
        return first_read(conn)

    monkeypatch.setattr(metrics_reads, "intents_by_state", counted)
    registry = ledger_registry(tidings.runtime)
    generate_latest(registry)
    generate_latest(registry)
    assert reads == 2


def test_a_read_that_failed_fails_every_scrape_that_shared_it_and_not_the_next(
    tidings: Tidings, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_read = metrics_reads.intents_by_state
    broken = True

    def failing(conn: Any) -> Any:
        if broken:
            raise RuntimeError("not a database error: it must reach the scrape")
        return first_read(conn)

    monkeypatch.setattr(metrics_reads, "intents_by_state", failing)
    registry = ledger_registry(tidings.runtime)
    with pytest.raises(RuntimeError):
        generate_latest(registry)
    broken = False
    assert b"tidings_ledger_up 1.0" in generate_latest(registry)
