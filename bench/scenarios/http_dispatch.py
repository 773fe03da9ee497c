"""Scenario 2: dispatch over HTTP to the simulator process, 20 ms per send.

The same seeded intents as scenario 1, sent by 2 worker processes through
`SimulatorAdapter` to `python -m tidings.providers.simulator` answering
after 20 ms. With a provider that slow, throughput is bounded by how many
sends are in flight: the sweep over the per-channel send concurrency shows
what keeps it up. The claim batch grows with the concurrency (a claim never
takes more than the budget), and the pool with it, so neither caps the sweep.
The simulator runs on one core and the workers on the other
(bench/pinning.py), as procrastinate's peer does.
"""

from __future__ import annotations

from functools import partial

from bench import pinning
from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.pinning import CLIENT, SERVER, pinned
from bench.procs import WorkerSpec, simulator
from bench.scenarios.dispatch import COMPARE, once
from bench.seed import seeded_template

TITLE = "2. Dispatch over HTTP, 20 ms provider"
LATENCY_MS = 20.0
WORKERS = 2
CONCURRENCY = (4, 16, 64)
# Connections are held only around each transaction, never across the send,
# so a pool much smaller than the concurrency suffices; capped so that two
# workers stay within PostgreSQL's default 100 connections.
MAX_POOL = 40
# procrastinate doing the same work (bench/procrastinate_http.py), first.
HTTP_COMPARE = ("procrastinate.http_worker", *COMPARE)


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("http", TITLE)
    template = seeded_template(ctx, ctx.config.intents)
    # The HTTP server (the simulator) on one core, its load (the workers,
    # spawned from this thread) on the other, as for procrastinate's peer.
    with simulator(LATENCY_MS, pin=SERVER) as (base_url, _), pinned(CLIENT):
        for concurrency in CONCURRENCY:
            spec = WorkerSpec(
                dsn="",
                simulator_url=base_url,
                concurrency=concurrency,
                batch_size=max(100, concurrency),
                pool_size=min(MAX_POOL, concurrency + 4),
            )
            values = repeat(
                ctx.config.repetitions,
                partial(once, ctx, template, WORKERS, result, spec),
            )
            label = f"HTTP dispatch, {WORKERS} workers, send concurrency {concurrency}"
            result.measures.append(
                Measure(f"http.c{concurrency}", label, "intents/s", values["rate"], HTTP_COMPARE)
            )
    result.notes.append(pinning.note())
    result.notes.append(
        f"ceiling per worker = concurrency / {LATENCY_MS:.0f} ms, "
        f"e.g. {1000 / LATENCY_MS * CONCURRENCY[0]:.0f}/s at {CONCURRENCY[0]}"
    )
    return result
