"""Watching a job run end to end from outside, as an operator would.

Threads beside the run: a poller that reads the job's status
(`GET /v1/jobs/{id}`) every second, one that walks its recipients
(`GET /v1/jobs/{id}/recipients?limit=1000`, the cursor wrapped at the end)
every two seconds, each recording its latencies; and a sampler of the
resident set (VmRSS) of the API and worker processes every five seconds.
Completion is read from the job's kept numbers (`job_counts`, a few rows
whatever the audience), not from the API, so the clock stops within a
quarter second of the last intent leaving the queue.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.model import percentile
from bench.progress import IN_QUEUE, TENANT

DONE_POLL_S = 0.25
STATUS_EVERY_S = 1.0
PAGE_EVERY_S = 2.0
PAGE = 1000
RSS_EVERY_S = 5.0


class Ticker(threading.Thread):
    """Call `read` every `every` seconds until stopped; its latencies in ms."""

    def __init__(self, every: float, read: Callable[[], bool]) -> None:
        super().__init__(daemon=True)
        self.every, self.read = every, read
        self.latencies: list[float] = []
        self.errors = 0
        self.halt = threading.Event()

    def run(self) -> None:
        due = time.monotonic()
        while not self.halt.is_set():
            started = time.perf_counter()
            try:
                ok = self.read()
            except httpx.HTTPError:
                ok = False
            if ok:
                self.latencies.append((time.perf_counter() - started) * 1000)
            else:
                self.errors += 1
            due = max(due + self.every, time.monotonic())
            self.halt.wait(due - time.monotonic())

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


class StatusPoller(Ticker):
    def __init__(self, http: httpx.Client, job: str) -> None:
        super().__init__(STATUS_EVERY_S, self._read)
        self.http, self.job = http, job
        self.last: dict[str, Any] = {}

    def _read(self) -> bool:
        reply = self.http.get(f"/v1/jobs/{self.job}")
        if reply.status_code != 200:
            return False
        self.last = reply.json()
        return True


class PageWalker(Ticker):
    """A page of recipients every two seconds, from the first to the last and again."""

    def __init__(self, http: httpx.Client, job: str) -> None:
        super().__init__(PAGE_EVERY_S, self._read)
        self.http, self.job = http, job
        self.cursor: str | None = None
        self.pages = self.wraps = 0
        self.intent_id: str | None = None  # one intent of the job, for its console page

    def _read(self) -> bool:
        params: dict[str, Any] = {"limit": PAGE}
        if self.cursor:
            params["after"] = self.cursor
        reply = self.http.get(f"/v1/jobs/{self.job}/recipients", params=params)
        if reply.status_code != 200:
            return False
        body = reply.json()
        self.pages += 1
        items = body["items"]
        found = [i["intent_id"] for i in items if i.get("intent_id")]
        if found:
            self.intent_id = found[len(found) // 2]
        self.cursor = body["next"]
        if self.cursor is None:
            self.wraps += 1
        return True


def vm_rss_mb(pid: int) -> float:
    """The process's resident set now (VmRSS), or 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class RssSampler(threading.Thread):
    """VmRSS of named processes every five seconds: [(seconds, {name: MB})]."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.halt = threading.Event()
        self.started = time.perf_counter()

    def run(self) -> None:
        while True:
            self.sample()
            if self.halt.wait(RSS_EVERY_S):
                return

    def sample(self) -> None:
        now = time.perf_counter() - self.started
        self.samples.append((now, {n: vm_rss_mb(p) for n, p in self.pids.items()}))

    def stop(self) -> None:
        self.halt.set()
        self.join(30)
        self.sample()  # the end of the run, whatever the phase of the period

    def peak(self, names: list[str]) -> float:
        return max((s[n] for _, s in self.samples for n in names), default=0.0)

    def growth(self, names: list[str]) -> float:
        """The largest growth of one process from 10% of the run to its end (MB)."""
        if not self.samples:
            return 0.0
        end = self.samples[-1][0]
        early = next(s for t, s in self.samples if t >= 0.1 * end)
        last = self.samples[-1][1]
        return max(last[n] - early[n] for n in names)


def job_progress(conn: psycopg.Connection[Any], job: str) -> tuple[str, int, int]:
    """(stored status, intents still in the queue, intents) from the kept numbers."""
    row = conn.execute(
        "SELECT j.status,"
        " coalesce(sum(c.intents) FILTER (WHERE c.state = ANY(%s)), 0),"
        " coalesce(sum(c.intents) FILTER (WHERE c.state IS NOT NULL), 0)"
        " FROM jobs j LEFT JOIN job_counts c ON c.tenant_id = j.tenant_id AND c.job_id = j.id"
        " WHERE j.tenant_id = %s AND j.id = %s GROUP BY j.status",
        (IN_QUEUE, TENANT, job),
    ).fetchone()
    if row is None:
        return "missing", 0, 0
    return str(row[0]), int(row[1]), int(row[2])


def wait_done(
    dsn: str, job: str, size: int, deadline: float, on_frozen: Callable[[int], None]
) -> tuple[bool, int]:
    """Until every intent of the job has left the queue (accepted by the
    provider or final) or `deadline` (perf_counter) passed: (done, queued).
    `on_frozen` is told, once the job is prepared, how many of its intents
    have left the queue already (dispatch starts during the preparation)."""
    frozen = False
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            status, queued, intents = job_progress(conn, job)
            if status != "preparing" and not frozen:
                frozen = True
                on_frozen(intents - queued)
            if frozen and intents >= size and queued == 0:
                return True, 0
            if time.perf_counter() >= deadline:
                return False, queued + max(0, size - intents)
            time.sleep(DONE_POLL_S)


def spread(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50": percentile(ordered, 50),
        "p99": percentile(ordered, 99),
        "max": ordered[-1] if ordered else float("nan"),
    }


def evidence_rows(dsn: str) -> dict[str, int]:
    """Rows of evidence the run left (transitions, attempts, observations,
    events), and the deadlocks PostgreSQL counted in the database."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        counts = {}
        for table in ("transitions", "attempts", "observations", "events"):
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            counts[table] = int(row[0]) if row else 0
        row = conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        counts["deadlocks"] = int(row[0]) if row else 0
    return counts
