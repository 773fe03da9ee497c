"""Scenario 3: how fast intents are created.

- Library: `Tidings.notify`, one intent per transaction, one thread.
- HTTP: `POST /v1/intents` to `tidings serve` (loopback), from 1 and from 8
  client threads, each with its own keep-alive connection, and from 8 to
  `tidings serve --workers 2`.
- The create's own SQL: the statements one `notify` issues, replayed with
  fresh keys and no engine logic (bench/same_sql.py), the limit `notify`
  is measured against.
- Bulk: `POST /v1/jobs` freezing an audience with COPY (the request's own
  time), and freeze plus preparation (channels resolved, intents created).

`notify` and `POST /v1/intents` start from a database with statistics
(`seed.settled`), as a system is a minute after its first intents.
"""

from __future__ import annotations

import threading
import time
from functools import partial

from bench import api_client
from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.procs import api, serve_command
from bench.same_sql import capture_create, create_limit
from bench.seed import engine, intent_body, published_template, request, settled

TITLE = "3. Creation"
# (clients, API processes): `tidings serve` as users run it, 1 and 2 processes.
HTTP_CASES = ((1, 1), (8, 1), (8, 2))
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
    for part, label in ((_http, "HTTP POST /v1/intents"), (_jobs, "bulk job freeze")):
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


def _notify_loop(ctx: Context, dsn: str) -> float:
    with engine(dsn, 2) as t:
        started, done = time.perf_counter(), 0
        while done < ctx.config.intents and time.perf_counter() - started < ctx.config.seconds:
            t.notify(**request(t, "notify", done))
            done += 1
        return done / (time.perf_counter() - started)


def _http(ctx: Context, template: str, result: ScenarioResult) -> None:
    reason = api_client.unavailable()
    if reason:
        result.notes.append(f"HTTP POST /v1/intents: {reason}")
        return
    for clients, processes in HTTP_CASES:
        values = repeat(
            ctx.config.repetitions, partial(_http_once, ctx, template, clients, processes)
        )
        key = f"create.http_c{clients}" + (f"_p{processes}" if processes > 1 else "")
        label = f"POST /v1/intents, {clients} client(s), tidings serve --workers {processes}"
        result.measures.append(Measure(key, label, "intents/s", values["rate"], ("create.notify",)))
        if sum(values["errors"]):
            result.notes.append(f"{clients} client(s): {sum(values['errors']):.0f} non-201 answers")


def _http_once(ctx: Context, template: str, clients: int, processes: int) -> dict[str, float]:
    name, dsn = ctx.server.fresh("http", template)
    key = api_client.create_key(dsn)
    counts = {"done": 0, "errors": 0}
    lock = threading.Lock()
    try:
        with engine(dsn, 2) as t:
            settled(t, dsn)
        with serve_command(dsn, processes, pool_size=clients + 4) as base_url:
            started = time.perf_counter()
            deadline = started + ctx.config.seconds

            def post(worker: int) -> None:
                with api_client.client(base_url, key) as http:
                    for i in range(worker, ctx.config.intents, clients):
                        if time.perf_counter() >= deadline:
                            return
                        reply = http.post("/v1/intents", json=intent_body("http", i))
                        with lock:
                            counts["done" if reply.status_code == 201 else "errors"] += 1

            threads = [threading.Thread(target=post, args=(w,)) for w in range(clients)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
        return {"rate": counts["done"] / elapsed, "errors": counts["errors"]}
    finally:
        ctx.server.drop(name)


def _jobs(ctx: Context, template: str, result: ScenarioResult) -> None:
    reason = api_client.unavailable("jobs")
    if reason:
        result.notes.append(f"bulk job freeze: {reason}")
        return
    size = 100_000 if ctx.config.full else 10_000
    values = repeat(ctx.config.repetitions, lambda: _freeze_once(ctx, template, size))
    result.measures += [
        Measure("create.job_freeze", f"bulk job freeze (POST /v1/jobs, COPY), {size:,}",
                "recipients/s", values["freeze"], ("procrastinate.enqueue_batch",)),
        Measure("create.job_prepared", f"bulk job freeze + prepare to intents, {size:,}",
                "recipients/s", values["prepared"], ("procrastinate.enqueue_batch",)),
    ]  # fmt: skip


def _freeze_once(ctx: Context, template: str, size: int) -> dict[str, float]:
    """The POST freezes the audience; preparation (channel resolution and
    intents) is a worker's job, run here in process with `prepare_jobs`."""
    name, dsn = ctx.server.fresh("freeze", template)
    key = api_client.create_key(dsn)
    try:
        with api(dsn) as (base_url, _), api_client.client(base_url, key) as http:
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
