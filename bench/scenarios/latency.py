"""Scenario 4: create-to-provider-call latency, at two loads.

At a fixed 150/s with a simulator process that posts receipts
(latency_receipts.py: `latency.p50_150`, `latency.p99_150`, the targets),
and, reported as information, at half the maximum throughput, here:

Two worker processes idle on LISTEN/NOTIFY while producer processes
(bench/producers.py) create intents with `notify` at half the rate scenario
1 measured for two workers (open loop: each creation has its planned moment,
so a slow dispatch cannot slow the load down). The latency of one intent is
the simulator ledger's `received_at` (the provider call) minus the intent's
`created_at`, both from this machine's clock. The first second is warm-up
(template cache, prepared statements) and is left out. The rate achieved
is reported beside the rate asked, and a repetition whose producers fell
more than 5% short of it is named in a note: its latencies are those of a
lighter load.
"""

from __future__ import annotations

import json
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench.context import Context
from bench.latency_samples import latencies, shortfall
from bench.model import Measure, ScenarioResult, percentile, repeat
from bench.procs import WorkerGroup, WorkerSpec
from bench.producers import produce, producers_for
from bench.progress import wait_dispatched
from bench.scenarios import dispatch, latency_receipts
from bench.seed import published_template, seeded_template

TITLE = "4. Latency"
WORKERS = 2
DRAIN_S = 5.0
CALIBRATION_INTENTS = 3000


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("latency", TITLE)
    rate = _half_load(ctx, result)
    template = published_template(ctx)
    values = repeat(ctx.config.repetitions, lambda: _once(ctx, template, rate))
    offered = values["offered"]
    result.measures += [
        Measure("latency.p50", f"create→provider call p50 at {rate:.0f}/s asked", "ms",
                values["p50"]),
        Measure("latency.p99", f"create→provider call p99 at {rate:.0f}/s asked", "ms",
                values["p99"]),
        Measure("latency.offered", f"creation rate achieved ({rate:.0f}/s asked, "
                f"{producers_for(rate)} producer processes)", "intents/s", offered),
    ]  # fmt: skip
    result.extra["asked"] = rate
    shortfall(result, rate, offered, "half the 2-worker rate")
    try:
        latency_receipts.measure(ctx, template, result)
    except Exception as exc:  # keep the half-load figures
        result.notes.append(f"latency at {latency_receipts.RATE:.0f}/s: failed: {exc!r}")
    return result


def _half_load(ctx: Context, result: ScenarioResult) -> float:
    measured = ctx.median("dispatch", f"dispatch.w{WORKERS}")
    if measured is None:
        # Run alone (--only latency): a short calibration instead.
        template = seeded_template(ctx, CALIBRATION_INTENTS)
        measured = dispatch.once(ctx, template, WORKERS, result, count=CALIBRATION_INTENTS)["rate"]
        result.notes.append(f"maximum from a one-off calibration: {measured:.0f}/s")
    return measured / 2


def _once(ctx: Context, template: str, rate: float) -> dict[str, float]:
    name, dsn = ctx.server.fresh("latency", template)
    count = int(rate * ctx.config.seconds)
    try:
        with tempfile.TemporaryDirectory() as ledgers:
            spec = WorkerSpec(dsn, ledger_dir=ledgers)
            with WorkerGroup(spec, WORKERS) as group:
                group.go()
                time.sleep(0.5)  # let the workers reach their first idle LISTEN wait
                offered = produce(dsn, rate, count)
                wait_dispatched(dsn, count, time.perf_counter(), DRAIN_S)
            received = _ledger(Path(ledgers))
        samples = latencies(dsn, received)
    finally:
        ctx.server.drop(name)
    return {"p50": percentile(samples, 50), "p99": percentile(samples, 99), "offered": offered}


def _ledger(folder: Path) -> dict[str, datetime]:
    received: dict[str, datetime] = {}
    for file in folder.glob("*.json"):
        for key, at in json.loads(file.read_text()):
            received.setdefault(key, datetime.fromisoformat(at))
    return received
