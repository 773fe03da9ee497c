"""What a failover run reads besides the rows: whether the processes said
they were waiting for a primary, and how long tidings took to resume.

The API serves `tidings_database_waiting_for_primary` (1 while its pool
finds no writable primary); sampled twice a second, the run sees it raised
during each failover and cleared after. Resuming is read from the rows:
the first claim and the first intent committed after the fault.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from harness.reliability.processes import call

GAUGE = "tidings_database_waiting_for_primary"
EVERY_S = 0.5


class WaitingWatch:
    def __init__(self, metrics_url: str) -> None:
        self.metrics_url = metrics_url
        self.samples = 0
        self.seen = 0  # samples that said 1
        self.unreadable = 0

    def read(self) -> float | None:
        answer = call("GET", self.metrics_url, timeout=2.0)
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
        while not stop.wait(EVERY_S):
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
  (SELECT min(created_at) FROM intents WHERE created_at >= %(writable)s) AS created
"""
CLAIMS_AROUND = """
SELECT at FROM transitions
 WHERE event = 'claim' AND at BETWEEN %(at)s - interval '5 seconds' AND %(until)s ORDER BY at
"""
# How far past the new primary the longest pause in claims is looked for.
AROUND_S = 20.0


def resumed(db_url: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event with how tidings took it, read from the rows:
    `resumed_s`, from the fault until both a claim and a create had
    committed on the new primary (None: not both came), and `stall_s`, the
    longest pause between two claims around the fault (the old primary may
    take work until it steps down)."""
    out = []
    with psycopg.connect(db_url) as conn:
        for event in events:
            at = datetime.fromtimestamp(event["at"], UTC)
            writable = at + timedelta(seconds=event["new_primary_s"])
            row = conn.execute(FIRST_AFTER, {"writable": writable}).fetchone()
            firsts = [t for t in (row or ()) if t is not None]
            done = max(firsts) if len(firsts) == 2 else None
            until = writable + timedelta(seconds=AROUND_S)
            claims = [r[0] for r in conn.execute(CLAIMS_AROUND, {"at": at, "until": until})]
            gaps = [(b - a).total_seconds() for a, b in pairwise(claims)]
            out.append(
                {
                    **event,
                    "resumed_s": None if done is None else round((done - at).total_seconds(), 2),
                    "stall_s": round(max(gaps, default=0.0), 2),
                }
            )
    return out
