"""Scenario 1: end-to-end dispatch through the in-process simulator.

N due intents (seeded once through `notify`, cloned per repetition) are
claimed, checked against policy, charged to the allowance, rendered and
sent to a zero-latency simulator by 1, 2 and 4 worker processes, each
running `Worker.run` with its default configuration. Throughput is
intents that reached `accepted` (or later) per second, from the moment all
workers were ready until N were done or the time cap passed.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.procs import WorkerGroup, WorkerSpec
from bench.progress import states, wait_dispatched
from bench.seed import seeded_template

TITLE = "1. Dispatch, in-process simulator"
WORKER_COUNTS = (1, 2, 4)
COMPARE = ("procrastinate.worker", "bare.claim_1", "bare.claim_100")


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("dispatch", TITLE)
    template = seeded_template(ctx, ctx.config.intents)
    for count in WORKER_COUNTS:
        values = repeat(ctx.config.repetitions, partial(once, ctx, template, count, result))
        result.measures.append(
            Measure(
                f"dispatch.w{count}",
                f"dispatch, {count} worker process" + ("es" if count > 1 else ""),
                "intents/s",
                values["rate"],
                COMPARE,
            )
        )
    return result


def once(
    ctx: Context,
    template: str,
    workers: int,
    result: ScenarioResult,
    spec: WorkerSpec | None = None,
    count: int | None = None,
) -> dict[str, float]:
    """One repetition on a fresh clone of `template` (holding `count` intents,
    by default the run's N): {"rate": intents/s}."""
    name, dsn = ctx.server.fresh("dispatch", template)
    count = count or ctx.config.intents
    try:
        spec = replace(spec, dsn=dsn) if spec else WorkerSpec(dsn)
        with WorkerGroup(spec, workers) as group:
            started = group.go()
            done, elapsed = wait_dispatched(dsn, count, started, ctx.config.seconds)
        _check_outcomes(dsn, result)
        return {"rate": done / elapsed}
    finally:
        ctx.server.drop(name)


def _check_outcomes(dsn: str, result: ScenarioResult) -> None:
    # A benchmark that silently failed its sends would look fast: say so.
    odd = {s: n for s, n in states(dsn).items() if s not in ("accepted", "delivered", "pending")}
    if odd:
        note = f"unexpected outcomes: {odd}"
        if note not in result.notes:
            result.notes.append(note)
