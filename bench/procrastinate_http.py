"""Baseline: procrastinate doing the work of tidings' HTTP dispatch (scenario 2).

The peer of `http.c64` does what a user of a general PostgreSQL queue would
write to send the same messages through the same provider:

- one job per message, deferred before the clock starts (as scenario 2's
  intents are created before it), carrying what a send needs: the
  destination, the template's variables, the key the provider deduplicates
  on, and the metadata tidings sends;
- the task renders the bench template's body with Jinja2 (a sandboxed
  environment with StrictUndefined, compiled once per process, as tidings
  compiles a revision once), POSTs the body `SimulatorAdapter` sends to
  `/sms/send` of the simulator process answering after 20 ms (the one
  scenario 2 uses), and records the provider's id on its message row (an
  UPDATE by primary key of a table of its own, in the same database,
  through the app's own pool);
- 2 worker processes (spawned), each `run_worker_async(concurrency=8)`
  with procrastinate's other defaults, LISTEN/NOTIFY on; a pool of
  concurrency + 4 connections, as scenario 2's workers get;
- pinned as scenario 2 is: the simulator on one core, the workers on the
  other (bench/pinning.py).

It does none of tidings' guarantees (policy, rate allowance, audit trail,
lease, call-started mark, reconciliation, encrypted destinations): the
ratio is what they cost, or save, against the plain way. Jobs per second
whose answer was recorded, from the go until all were or the cap passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from functools import cache
from typing import Any

import httpx
import psycopg

from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.pinning import CLIENT, SERVER, pinned
from bench.procs import simulator
from bench.progress import TENANT
from bench.seed import BODY, intent_body
from bench.spawned import Link, Spawned

WORKERS = 2
CONCURRENCY = 8
POOL_SIZE = CONCURRENCY + 4
LATENCY_MS = 20.0  # scenario 2's provider
TASK = "send_sms"
DEFER_BATCH = 1000
POLL_S = 0.25
SCHEMA = """
CREATE TABLE peer_messages (
    id bigint PRIMARY KEY,
    provider_message_id text,
    accepted_at timestamptz
)"""
RECORD = """
UPDATE peer_messages SET provider_message_id = %(provider_id)s, accepted_at = now()
WHERE id = %(id)s"""
DONE = "SELECT count(*) FROM peer_messages WHERE provider_message_id IS NOT NULL"


def measure(ctx: Context, result: ScenarioResult) -> None:
    """Add `procrastinate.http_worker` to the baselines."""
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    # Pinned as scenario 2: the simulator on one core, the workers on the other.
    with simulator(LATENCY_MS, pin=SERVER) as (base_url, _), pinned(CLIENT):
        values = repeat(ctx.config.repetitions, lambda: _once(ctx, base_url))
    label = (
        f"procrastinate HTTP peer: render, POST to the {LATENCY_MS:.0f} ms simulator, record "
        f"({WORKERS} processes x concurrency {CONCURRENCY})"
    )
    result.measures.append(Measure("procrastinate.http_worker", label, "jobs/s", values["rate"]))
    if sum(values["failed"]):
        result.notes.append(f"procrastinate HTTP peer: {sum(values['failed']):.0f} jobs failed")


def _once(ctx: Context, base_url: str) -> dict[str, float]:
    seconds = ctx.config.seconds
    # More than the peer can send in the cap (16 in flight at 20 ms: 800/s),
    # so the queue never runs dry, and no more: deferring costs time too.
    ceiling = WORKERS * CONCURRENCY * 1000 / LATENCY_MS
    jobs = min(ctx.config.intents, int(ceiling * seconds * 1.5))
    name, dsn = ctx.server.fresh("procrastinate_http", template="template1")
    try:
        asyncio.run(_prepare(dsn, jobs))
        with Spawned(_worker, [(dsn, base_url)] * WORKERS) as group:
            started = group.go()
            done, elapsed = _wait(dsn, jobs, started, seconds)
        return {"rate": done / elapsed, "failed": _failed(dsn)}
    finally:
        ctx.server.drop(name)


def _app(dsn: str, client: httpx.AsyncClient | None, pool_size: int) -> Any:
    import procrastinate

    connector = procrastinate.PsycopgConnector(conninfo=dsn, min_size=pool_size, max_size=pool_size)
    app = procrastinate.App(connector=connector)
    template = _template()

    @app.task(name=TASK)
    async def send_sms(
        message_id: int,
        to: str,
        variables: dict[str, Any],
        idempotency_key: str,
        metadata: dict[str, str],
    ) -> None:
        assert client is not None, "only the workers' app sends"
        payload = _payload(template, to, variables, idempotency_key, metadata)
        reply = await client.post("/sms/send", json=payload)
        reply.raise_for_status()
        provider_id = str(reply.json()["message_id"])
        await app.connector.execute_query_async(RECORD, id=message_id, provider_id=provider_id)

    return app


@cache
def _template() -> Any:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(undefined=StrictUndefined).from_string(BODY)


def _payload(
    template: Any, to: str, variables: dict[str, Any], key: str, metadata: dict[str, str]
) -> dict[str, Any]:
    """The body SimulatorAdapter.build_request sends for an SMS."""
    return {
        "to": to,
        "body": template.render(**variables),
        "subject": None,
        "sender": None,
        "idempotency_key": key,
        "metadata": metadata,
        "template_id": None,
        "validity_seconds": None,
        "attachments": [],
    }


def _job(i: int) -> dict[str, Any]:
    """What a send needs, as the job's arguments: the seed's i-th intent."""
    intent = intent_body("peer", i)
    intent_id = uuid.uuid4()
    key = f"tdg:{intent_id}:1"  # tidings' attempt key: the provider's dedupe key
    return {
        "message_id": i + 1,
        "to": intent["recipient"]["phone"],
        "variables": intent["variables"],
        "idempotency_key": key,
        "metadata": {
            "tenant_id": TENANT,
            "intent_id": str(intent_id),
            "attempt_key": key,
            "correlation_id": "",
        },
    }


async def _prepare(dsn: str, jobs: int) -> None:
    app = _app(dsn, None, pool_size=2)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        await app.connector.execute_query_async(SCHEMA)
        await app.connector.execute_query_async(
            "INSERT INTO peer_messages (id) SELECT generate_series(1, %(n)s)", n=jobs
        )
        task = app.tasks[TASK]
        for first in range(0, jobs, DEFER_BATCH):
            await task.batch_defer_async(*map(_job, range(first, min(jobs, first + DEFER_BATCH))))
        # The plans of a running system (autovacuum analyzes within a minute).
        await app.connector.execute_query_async("ANALYZE")


def _worker(dsn: str, base_url: str, link: Link) -> None:
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_work(dsn, base_url, link))


async def _work(dsn: str, base_url: str, link: Link) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=10.0) as client:
        app = _app(dsn, client, POOL_SIZE)
        async with app.open_async():
            await asyncio.to_thread(link.wait_go)
            worker = asyncio.create_task(
                app.run_worker_async(concurrency=CONCURRENCY, install_signal_handlers=False)
            )
            await asyncio.to_thread(link.stopping)
            worker.cancel()  # procrastinate then stops gracefully
            with contextlib.suppress(asyncio.CancelledError):
                await worker


def _wait(dsn: str, jobs: int, started: float, cap_s: float) -> tuple[int, float]:
    """Poll until every job's answer is recorded or the cap passed: (done, seconds)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(DONE).fetchone()
            done, elapsed = (int(row[0]) if row else 0), time.monotonic() - started
            if done >= jobs or elapsed >= cap_s:
                return done, elapsed
            time.sleep(POLL_S)


def _failed(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'failed'")
        found = row.fetchone()
    return int(found[0]) if found else 0
