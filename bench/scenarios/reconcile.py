"""Scenario 5: reconciliation, from webhooks and from status lookups.

M intents are dispatched once through an in-process simulator that plans
receipts; the database is kept as a template and the signed receipts as
requests. Each repetition clones it and then:

- applies the receipts as the webhook route does (`verify_webhook`, then
  `apply_observation` in one transaction per request): observations/s;
- makes every attempt's status check due and runs the reconciler
  (`Worker.reconcile_once`, leased in batches of 100) against the same
  simulator: lookups/s, and lookups per attempt until settled.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.seed import engine, notify_many, published_template
from tidings.dispatch.observe import apply_observation
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.providers.messages import WebhookRequest
from tidings.providers.simulator import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

TITLE = "5. Reconciliation"
CHECK_BATCH = 100
# Never contacted: in-process receipts are handed out by `due_webhooks()`,
# but the simulator plans receipts only when a webhook URL is configured.
UNUSED_WEBHOOK = "http://127.0.0.1:9/unused"


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("reconcile", TITLE)
    count = 10_000 if ctx.config.full else 2_000
    template, adapter, requests = _dispatched(ctx, count)
    values = repeat(ctx.config.repetitions, lambda: _once(ctx, template, adapter, requests))
    result.measures += [
        Measure("reconcile.webhooks", "webhook observations applied", "obs/s",
                values["webhooks"], ("bare.claim_1",)),
        Measure("reconcile.lookups", "status lookups (due checks)", "lookups/s",
                values["lookups"], ("bare.claim_1",)),
        Measure("reconcile.checks_per_attempt", "lookups per attempt until delivered",
                "lookups", values["per_attempt"]),
    ]  # fmt: skip
    result.notes.append(
        f"{count:,} attempts, {len(requests):,} signed receipts (sent + delivered each)"
    )
    return result


def _dispatched(
    ctx: Context, count: int
) -> tuple[str, InProcessSimulatorAdapter, list[WebhookRequest]]:
    name = "bench_reconcile"
    dsn = ctx.server.create(name, published_template(ctx))
    core = SimulatorCore()
    core.configure({"webhook_url": UNUSED_WEBHOOK})
    signed_at = time.time()
    # A frozen clock: receipts signed now still verify in a later repetition.
    adapter = InProcessSimulatorAdapter(core, clock=lambda: signed_at)
    with engine(dsn, 4) as t:
        notify_many(t, "reconcile", count)
        worker = Worker(t.runtime, {"sms": adapter}, config=WorkerConfig(batch_size=100))
        while worker.dispatch_once("sms"):
            pass
    core.advance(60.0)  # every receipt due, every message final
    ctx.templates[name] = dsn
    return name, adapter, adapter.due_webhooks()


def _once(
    ctx: Context, template: str, adapter: InProcessSimulatorAdapter, requests: list[Any]
) -> dict[str, float]:
    return {
        "webhooks": _webhooks(ctx, template, adapter, requests),
        **_lookups(ctx, template, adapter),
    }


def _webhooks(
    ctx: Context, template: str, adapter: InProcessSimulatorAdapter, requests: list[Any]
) -> float:
    name, dsn = ctx.server.fresh("webhooks", template)
    try:
        with engine(dsn, 2) as t:
            started, applied = time.perf_counter(), 0
            for request in requests:
                if time.perf_counter() - started >= ctx.config.seconds:
                    break
                observations = adapter.verify_webhook(request)
                with t.db.transaction() as conn:
                    for obs in observations:
                        apply_observation(conn, obs, "webhook", t.clock.now())
                applied += len(observations)
            return applied / (time.perf_counter() - started)
    finally:
        ctx.server.drop(name)


def _lookups(ctx: Context, template: str, adapter: InProcessSimulatorAdapter) -> dict[str, float]:
    name, dsn = ctx.server.fresh("lookups", template)
    try:
        with psycopg.connect(dsn) as conn:
            conn.execute(
                "UPDATE attempts SET next_check_at = now() - interval '1 second'"
                " WHERE next_check_at IS NOT NULL"
            )
        with engine(dsn, 2) as t:
            worker = Worker(t.runtime, {"sms": adapter})
            started, looked = time.perf_counter(), 0
            while time.perf_counter() - started < ctx.config.seconds:
                done = worker.reconcile_once(CHECK_BATCH)
                if not done:
                    break
                looked += done
            rate = looked / (time.perf_counter() - started)
        return {"lookups": rate, "per_attempt": _checks_per_attempt(dsn)}
    finally:
        ctx.server.drop(name)


def _checks_per_attempt(dsn: str) -> float:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT avg(check_count) FROM attempts WHERE state = 'delivered'"
        ).fetchone()
    return float(row[0]) if row and row[0] is not None else float("nan")
