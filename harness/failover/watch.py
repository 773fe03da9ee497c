"""What a failover run reads besides the rows: whether the processes said
they were waiting for a primary, and how long tidings took to resume.

The API serves `tidings_database_waiting_for_primary` (1 while its pool
finds no writable primary); sampled twice a second, the run sees it raised
during each failover and cleared after. A scrape also reads the ledger,
every finished intent for its histograms: once scrapes take longer (the
soak's hundreds of thousands of intents), the watch waits four times as
long as the last one took, so that it never takes more than a fifth of a
core from what it watches, and gives a slow scrape time to answer rather
than asking again while the server still reads. Resuming is read from the rows:
the first claim and the first create on the new primary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from harness.reliability.processes import call

GAUGE = "tidings_database_waiting_for_primary"
EVERY_S = 0.5
# A scrape's time to the pause before the next one.
PAUSE_PER_SCRAPE = 4.0
SCRAPE_TIMEOUT_S = 30.0


class WaitingWatch:
    def __init__(self, metrics_url: str) -> None:
        self.metrics_url = metrics_url
        self.samples = 0
        self.seen = 0  # samples that said 1
        self.unreadable = 0
        self.last_scrape_s = 0.0

    def read(self) -> float | None:
        started = time.monotonic()
        answer = call("GET", self.metrics_url, timeout=SCRAPE_TIMEOUT_S)
        self.last_scrape_s = time.monotonic() - started
        if answer is None or answer.status_code != 200:
            return None
        for family in text_string_to_metric_families(answer.text):
            if family.name == GAUGE:
                return sum(sample.value for sample in family.samples)
        return None

    def sample(self) -> None:
        value = self.read()
        self.samples += 1
        if value is None:
            self.unreadable += 1
        elif value > 0:
            self.seen += 1

    def summary(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "seen": self.seen,
            "unreadable": self.unreadable,
            "at_end": self.read(),
        }


@contextmanager
def watching(metrics_url: str) -> Iterator[WaitingWatch]:
    watch = WaitingWatch(metrics_url)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(max(EVERY_S, PAUSE_PER_SCRAPE * watch.last_scrape_s)):
            watch.sample()

    thread = threading.Thread(target=loop, name="waiting-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        stop.set()
        thread.join(5)


FIRST_AFTER = """
SELECT
  (SELECT min(at) FROM transitions WHERE event = 'claim' AND at >= %(writable)s) AS claim,
  (SELECT min(created_at) FROM intents WHERE created_at >= %(writable)s) AS created,
  (SELECT max(at) FROM transitions WHERE event = 'claim' AND at < %(at)s) AS claim_before
"""


def resumed(db_url: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event with how tidings took it, read from the rows (every
    process stamps them with this host's clock): from the fault until the
    first claim (`claims_resumed_s`) and the first create
    (`creates_resumed_s`) on the new primary, and `claim_gap_s`, the pause
    between the last claim before the fault and that first claim. None:
    none came."""
    out = []
    with psycopg.connect(db_url) as conn:
        for event in events:
            at = datetime.fromtimestamp(event["at"], UTC)
            writable = at + timedelta(seconds=event["new_primary_s"])
            row = conn.execute(FIRST_AFTER, {"at": at, "writable": writable}).fetchone()
            claim, created, before = row or (None, None, None)
            out.append(
                {
                    **event,
                    "claims_resumed_s": _seconds(at, claim),
                    "creates_resumed_s": _seconds(at, created),
                    "claim_gap_s": _seconds(before, claim),
                }
            )
    return out


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else round((end - start).total_seconds(), 2)
