"""Scenario 1: end-to-end dispatch through the in-process simulator.

N due intents (seeded once through `notify`, cloned per repetition) are
claimed, checked against policy, charged to the allowance, rendered and
sent to a zero-latency simulator by 1, 2 and 4 worker processes, each
running `Worker.run` with its default configuration. Throughput is
intents that reached `accepted` (or later) per second, from the moment all
workers were ready until N were done or the time cap passed.

With 2 workers, each repetition also replays dispatch's own statements
with no engine logic on a twin database (bench/same_sql_replay.py): the
same-SQL limit `sql.dispatch`, captured once per run from a real worker
(bench/same_sql_dispatch.py).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.procs import WorkerGroup, WorkerSpec
from bench.progress import states, wait_dispatched
from bench.same_sql_dispatch import Trace, capture_dispatch, summary
from bench.same_sql_replay import dispatch_limit
from bench.seed import seeded_template

TITLE = "1. Dispatch, in-process simulator"
WORKER_COUNTS = (1, 2, 4)
SAME_SQL_WORKERS = 2  # the count the same-SQL limit is measured beside
COMPARE = ("procrastinate.worker", "bare.claim_1", "bare.claim_100")


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("dispatch", TITLE)
    template = seeded_template(ctx, ctx.config.intents)
    # Once per run, before any repetition; a changed statement sequence
    # raises here and fails the scenario, as a changed notify fails creation.
    trace = capture_dispatch(ctx, template)
    result.notes.append(f"sql.dispatch: {summary(trace)}")
    for count in WORKER_COUNTS:
        compare: tuple[str, ...] = COMPARE
        if count == SAME_SQL_WORKERS:
            run_once = partial(_with_same_sql, ctx, template, trace, result)
            compare = ("sql.dispatch", *COMPARE)
        else:
            run_once = partial(once, ctx, template, count, result)
        values = repeat(ctx.config.repetitions, run_once)
        if "same_sql" in values:
            result.measures.append(
                Measure("sql.dispatch", "dispatch's own SQL, replayed with no engine logic "
                        f"({SAME_SQL_WORKERS} processes)", "intents/s", values["same_sql"])
            )  # fmt: skip
        label = f"dispatch, {count} worker process" + ("es" if count > 1 else "")
        result.measures.append(
            Measure(f"dispatch.w{count}", label, "intents/s", values["rate"], compare)
        )
    return result


def _with_same_sql(
    ctx: Context, template: str, trace: Trace, result: ScenarioResult
) -> dict[str, float]:
    """The workers, then their statements alone, on twin databases in one repetition."""
    rates = once(ctx, template, SAME_SQL_WORKERS, result)
    rates["same_sql"] = dispatch_limit(ctx, template, trace)
    return rates


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
