"""Scenario 3: how fast intents are created.

- Library: `Tidings.notify`, one intent per transaction, one thread.
- HTTP: `POST /v1/intents` to `tidings serve` and to the thinnest app doing
  the create's SQL, client and server pinned apart (creation_http.py).
- The create's own SQL: the statements one `notify` issues, replayed with
  fresh keys and no engine logic (bench/same_sql.py), the limit `notify`
  is measured against.
- Bulk: `POST /v1/jobs` freezing an audience with COPY (the request's own
  time), and freeze plus preparation (channels resolved, intents created);
  beside it, the same job's own SQL replayed with no engine logic
  (bench/same_sql_job.py), the limit freeze plus preparation is measured
  against.

`notify` and `POST /v1/intents` start from a database with statistics
(`seed.settled`), as a system is a minute after its first intents.
"""

from __future__ import annotations

import time

from bench import api_client
from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.pinning import CLIENT, SERVER, pinned
from bench.procs import api
from bench.same_sql import capture_create, create_limit
from bench.same_sql_job import JobTrace, capture_job, job_limit
from bench.scenarios import creation_http
from bench.seed import engine, published_template, request, settled

TITLE = "3. Creation"
FROZEN = {"dispatching", "complete", "complete_with_failures"}


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("creation", TITLE)
    template = published_template(ctx)
    values = repeat(ctx.config.repetitions, lambda: _notify_once(ctx, template))
    result.measures += [
        Measure("sql.create", "the create's own SQL, replayed with no engine logic", "intents/s",
                values["same_sql"]),
        Measure("create.notify", "library notify, 1 intent/tx", "intents/s", values["rate"],
                ("sql.create", "procrastinate.enqueue_one")),
    ]  # fmt: skip
    parts = ((creation_http.measure, "HTTP POST /v1/intents"), (_jobs, "bulk job freeze"))
    for part, label in parts:
        try:
            part(ctx, template, result)
        except Exception as exc:  # keep the other figures of this scenario
            result.notes.append(f"{label}: failed: {exc!r}")
    return result


def _notify_once(ctx: Context, template: str) -> dict[str, float]:
    """notify, then its own SQL alone, on twin databases in the same repetition."""
    rates: dict[str, float] = {}
    for part in ("rate", "same_sql"):
        name, dsn = ctx.server.fresh(f"notify_{part}", template)
        try:
            with engine(dsn, 2) as t:
                settled(t, dsn)
            if part == "same_sql":
                statements = capture_create(dsn)
                rates[part] = create_limit(dsn, statements, ctx.config.intents, ctx.config.seconds)
                continue
            with engine(dsn, 2) as t:
                started, done = time.perf_counter(), 0
                while (
                    done < ctx.config.intents and time.perf_counter() - started < ctx.config.seconds
                ):
                    t.notify(**request(t, "notify", done))
                    done += 1
                rates[part] = done / (time.perf_counter() - started)
        finally:
            ctx.server.drop(name)
    return rates


def _jobs(ctx: Context, template: str, result: ScenarioResult) -> None:
    reason = api_client.unavailable("jobs")
    if reason:
        result.notes.append(f"bulk job freeze: {reason}")
        return
    size = 100_000 if ctx.config.full else 10_000
    # Once per run, as dispatch's trace: a changed statement sequence shows
    # up as a replay that leaves other counts, and fails the bulk part.
    trace = capture_job(ctx, template, size)
    result.notes.append(f"sql.job_prepared: {trace.summary()}")
    values = repeat(ctx.config.repetitions, lambda: _job_once(ctx, template, size, trace))
    result.measures += [
        Measure("create.job_freeze", f"bulk job freeze (POST /v1/jobs, COPY), {size:,}",
                "recipients/s", values["freeze"], ("procrastinate.enqueue_batch",)),
        Measure("sql.job_prepared", f"the job's freeze and prepare SQL, replayed with no "
                f"engine logic, {size:,}", "recipients/s", values["same_sql"]),
        Measure("create.job_prepared", f"bulk job freeze + prepare to intents, {size:,}",
                "recipients/s", values["prepared"],
                ("sql.job_prepared", "procrastinate.enqueue_batch")),
    ]  # fmt: skip


def _job_once(ctx: Context, template: str, size: int, trace: JobTrace) -> dict[str, float]:
    """The job through the API, then its own SQL alone, on twin databases in one repetition."""
    rates = _freeze_once(ctx, template, size)
    rates["same_sql"] = job_limit(ctx, template, trace, size)
    return rates


def _freeze_once(ctx: Context, template: str, size: int) -> dict[str, float]:
    """The POST freezes the audience; preparation (channel resolution and
    intents) is a worker's job, run here in process with `prepare_jobs`."""
    name, dsn = ctx.server.fresh("freeze", template)
    key = api_client.create_key(dsn)
    try:
        # An HTTP measure: the API on the server's core, the POST on the
        # client's; the preparation after it runs unpinned, as its replay.
        with (
            api(dsn, pin=SERVER) as (base_url, _),
            api_client.client(base_url, key) as http,
            pinned(CLIENT),
        ):
            started = time.perf_counter()
            job = api_client.submit_job(http, "freeze", size)
            posted = time.perf_counter()
        with engine(dsn, 2) as t:
            t.prepare_jobs()
            prepared = time.perf_counter()
            status = t.job(job)["status"]
        if status not in FROZEN:
            raise RuntimeError(f"job still {status} after prepare_jobs")
        return {"freeze": size / (posted - started), "prepared": size / (prepared - started)}
    finally:
        ctx.server.drop(name)
