"""Scenario 4 at a fixed 150 intents/s, with receipts (issue 42's targets).

As at half load (latency.py), two worker processes idle on LISTEN/NOTIFY
while producer processes create intents with `notify`, open loop, here at
a fixed 150/s whatever the machine. The provider is the simulator process
(zero latency), reached over loopback HTTP by `SimulatorAdapter`, which
posts a signed receipt for every message (sent, then delivered, after its
default receipt delay) to `tidings serve`'s `/v1/webhooks/simulator`: the
receipts' verification and application compete with creation and dispatch
for the database and the cores, as they do in production. `tidings serve`
runs with `TIDINGS_SIMULATOR_URL` set, as a user runs it beside the
simulator. The latency of an intent is the simulator ledger's
`received_at` (read from `GET /_ledger`) minus its `created_at`.
"""

from __future__ import annotations

import time
from datetime import datetime

import httpx
import psycopg

from bench.context import Context
from bench.latency_samples import latencies, mark_windows, shortfall
from bench.model import Measure, ScenarioResult, percentile, repeat
from bench.procs import WorkerGroup, WorkerSpec, serve_command, simulator
from bench.producers import produce, producers_for
from bench.progress import wait_dispatched

RATE = 150.0
WORKERS = 2
DRAIN_S = 5.0
RECEIPTS_S = 3.0  # after the last send: the receipts still on their way


def measure(ctx: Context, template: str, result: ScenarioResult) -> None:
    with simulator(0.0) as (provider_url, _):
        values = repeat(ctx.config.repetitions, lambda: _once(ctx, template, provider_url))
    key = f"{RATE:.0f}"
    result.measures += [
        Measure(f"latency.p50_{key}", f"create→provider call p50 at {key}/s, receipts posted",
                "ms", values["p50"]),
        Measure(f"latency.p99_{key}", f"create→provider call p99 at {key}/s, receipts posted",
                "ms", values["p99"]),
        Measure(f"latency.mark_p99_{key}", f"call-started mark→provider call p99 at {key}/s",
                "ms", values["mark_p99"]),
        Measure(f"latency.offered_{key}", f"creation rate achieved ({key}/s asked, "
                f"{producers_for(RATE)} producer processes)", "intents/s", values["offered"]),
    ]  # fmt: skip
    receipts = ", ".join(f"{x:.0f}" for x in values["delivered"])
    result.notes.append(
        f"at {key}/s: attempts delivered by the simulator's receipts, by repetition: {receipts}"
    )
    shortfall(result, RATE, values["offered"], f"{key}/s")


def _once(ctx: Context, template: str, provider_url: str) -> dict[str, float]:
    name, dsn = ctx.server.fresh("latency_receipts", template)
    count = int(RATE * ctx.config.seconds)
    env = {"TIDINGS_SIMULATOR_URL": provider_url}
    try:
        with serve_command(dsn, env=env) as api_url, httpx.Client(base_url=provider_url) as sim:
            sim.post("/_reset").raise_for_status()  # the ledger of this repetition alone
            hook = {"webhook_url": f"{api_url}/v1/webhooks/simulator"}
            sim.put("/_config", json=hook).raise_for_status()
            with WorkerGroup(WorkerSpec(dsn, simulator_url=provider_url), WORKERS) as group:
                group.go()
                time.sleep(0.5)  # let the workers reach their first idle LISTEN wait
                offered = produce(dsn, RATE, count)
                wait_dispatched(dsn, count, time.perf_counter(), DRAIN_S)
                time.sleep(RECEIPTS_S)
            ledger = sim.get("/_ledger", timeout=60.0).json()
        received: dict[str, datetime] = {}
        for entry in ledger:  # the first call of a key, as latency.py reads its ledgers
            at = datetime.fromisoformat(entry["received_at"])
            received.setdefault(entry["idempotency_key"], at)
        samples = latencies(dsn, received)
        windows = mark_windows(dsn, received)
        delivered = _delivered(dsn)
    finally:
        ctx.server.drop(name)
    return {"p50": percentile(samples, 50), "p99": percentile(samples, 99), "offered": offered,
            "delivered": delivered, "mark_p99": percentile(windows, 99)}  # fmt: skip


def _delivered(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM attempts WHERE state = 'delivered'").fetchone()
    return int(row[0]) if row else 0
