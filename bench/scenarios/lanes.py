"""Scenario 9: urgent beside bulk (issue #36, docs/concepts/lanes.md).

A 100,000-recipient job dispatches through two worker processes to a
simulator process that answers in 20 ms, on the same channel as the
urgent intents. First the job alone for a phase; then, for a phase of the
same length, single intents arrive through `POST /v1/intents` at 20 a
second. Reported: each single's create-to-call time (`intents.created_at`
to its attempt's `call_started_at`, p50 and p99) and the job's calls per
second beside them against the same job alone, measured in the same run.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from functools import partial

import psycopg

from bench import api_client
from bench.context import Context
from bench.model import Measure, ScenarioResult, percentile, repeat
from bench.procs import WorkerGroup, WorkerSpec, api, simulator
from bench.progress import wait_job
from bench.scenarios.creation import FROZEN
from bench.seed import intent_body, published_template

TITLE = "9. Lanes: urgent intents beside a bulk job"
WORKERS = 2
JOB = 100_000
PROVIDER_MS = 20.0
URGENT_PER_SECOND = 20
PHASE_S = 10.0
FREEZE_CAP_S = 900.0
CALLED_CAP_S = 30.0

JOB_CALLS = """
SELECT count(*) FROM attempts a
JOIN intents i ON i.tenant_id = a.tenant_id AND i.id = a.intent_id
WHERE i.job_id = %s AND a.call_started_at >= %s AND a.call_started_at < %s"""
WAITS = """
SELECT extract(epoch FROM a.call_started_at - i.created_at) * 1000
FROM intents i JOIN attempts a ON a.tenant_id = i.tenant_id AND a.intent_id = i.id
WHERE i.id = ANY(%s::uuid[]) AND a.n = 1 AND a.call_started_at IS NOT NULL"""


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("lanes", TITLE)
    reason = api_client.unavailable("uploads")
    if reason:
        result.skipped = reason
        return result
    template = published_template(ctx)
    values = repeat(ctx.config.repetitions, partial(_once, ctx, template))
    result.measures += [
        Measure("lanes.urgent_p50_ms", "urgent create-to-call p50, beside the job", "ms",
                values["p50"]),
        Measure("lanes.urgent_p99_ms", "urgent create-to-call p99, beside the job", "ms",
                values["p99"]),
        Measure("lanes.job_alone", "the job's calls alone", "/s", values["alone"]),
        Measure("lanes.job_beside", "the job's calls beside 20 urgent/s", "/s", values["beside"]),
        Measure("lanes.job_ratio", "the job's calls beside urgent / alone", "x", values["ratio"]),
    ]  # fmt: skip
    result.notes.append(
        f"{JOB:,} recipients, {WORKERS} workers, a {PROVIDER_MS:.0f} ms provider, "
        f"{URGENT_PER_SECOND} urgent intents/s over HTTP, phases of {PHASE_S:.0f} s"
    )
    return result


def _once(ctx: Context, template: str) -> dict[str, float]:
    name, dsn = ctx.server.fresh("lanes", template)
    key = api_client.create_key(dsn)
    try:
        with (
            simulator(PROVIDER_MS) as (provider_url, _),
            api(dsn) as (base_url, _),
            api_client.client(base_url, key) as http,
            WorkerGroup(WorkerSpec(dsn, simulator_url=provider_url), WORKERS) as group,
        ):
            group.go()
            job = api_client.submit_uploaded_job(http, "lanes", JOB)
            if wait_job(dsn, job, FROZEN, FREEZE_CAP_S) not in FROZEN:
                raise RuntimeError(f"{JOB:,} recipients not prepared in {FREEZE_CAP_S:.0f} s")
            alone = _job_rate(dsn, job, lambda: time.sleep(PHASE_S))
            sent: list[str] = []
            beside = _job_rate(dsn, job, lambda: sent.extend(_urgent(http, PHASE_S)))
            waits = _waits(dsn, sent)
        if len(waits) < len(sent):
            raise RuntimeError(f"{len(sent) - len(waits)} urgent intents never called")
        return {
            "p50": percentile(waits, 50),
            "p99": percentile(waits, 99),
            "alone": alone,
            "beside": beside,
            "ratio": beside / alone if alone else float("nan"),
        }
    finally:
        ctx.server.drop(name)


def _job_rate(dsn: str, job: str, phase: object) -> float:
    started = datetime.now(UTC)
    phase()  # type: ignore[operator]
    ended = datetime.now(UTC)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(JOB_CALLS, (job, started, ended)).fetchone()
    calls = int(row[0]) if row else 0
    return calls / (ended - started).total_seconds()


def _urgent(http: object, seconds: float) -> list[str]:
    """Single intents at URGENT_PER_SECOND for `seconds`, paced from one
    thread per request so a slow answer never delays the next; their ids."""
    ids: list[str] = []
    lock = threading.Lock()

    def post(i: int) -> None:
        answer = http.post("/v1/intents", json=intent_body("urgent", i))  # type: ignore[attr-defined]
        answer.raise_for_status()
        with lock:
            ids.append(str(answer.json()["id"]))

    threads = []
    start = time.perf_counter()
    for i in range(int(seconds * URGENT_PER_SECOND)):
        time.sleep(max(0.0, start + i / URGENT_PER_SECOND - time.perf_counter()))
        thread = threading.Thread(target=post, args=(i,))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    return ids


def _waits(dsn: str, ids: list[str]) -> list[float]:
    deadline = time.monotonic() + CALLED_CAP_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            waits = sorted(float(r[0]) for r in conn.execute(WAITS, (ids,)).fetchall())
            if len(waits) >= len(ids) or time.monotonic() >= deadline:
                return waits
            time.sleep(0.2)
