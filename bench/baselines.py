"""Baselines measured in the same run, on the same server, for the ratios.

- procrastinate's own worker on no-op jobs, and its own enqueue (one job
  per transaction, and `batch_defer`): a general PostgreSQL queue in Python.
- procrastinate doing the work of scenario 2 (render, POST to the 20 ms
  simulator, record the answer; bench/procrastinate_http.py).
- A bare `SKIP LOCKED` loop: claim in one transaction, complete in the
  next, 1 row or 100 rows at a time. The ceiling for any queue on this
  server: no payload, no policy, no provider.
- pgbench, one client doing single-row UPDATEs: what one connection can
  commit per second here, the ceiling for one-per-transaction creation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import psycopg

from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat

TITLE = "Baselines"
PROCRASTINATE_BATCH = 1000
BARE_ROWS = 200_000
PGBENCH_SCRIPT = (
    "\\set aid random(1, 100000 * :scale)\n"
    "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n"
)


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("baselines", TITLE)
    seconds = baseline_seconds(ctx)
    for part in (_procrastinate, _procrastinate_http, _bare, _pgbench):
        try:
            part(ctx, result, seconds)
        except Exception as exc:  # one missing baseline must not lose the others
            result.notes.append(f"{part.__name__.strip('_')}: failed: {exc!r}")
    return result


def baseline_seconds(ctx: Context) -> float:
    return max(3.0, ctx.config.seconds / 3)


# --- procrastinate -----------------------------------------------------------


def _procrastinate(ctx: Context, result: ScenarioResult, seconds: float) -> None:
    try:
        import procrastinate
    except ImportError:
        result.notes.append("procrastinate: skipped: not installed (pip install procrastinate)")
        return
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    values = repeat(
        ctx.config.repetitions,
        lambda: _procrastinate_once(ctx, seconds),
    )
    version = procrastinate.__version__
    result.measures += [
        Measure(
            "procrastinate.enqueue_one",
            "procrastinate enqueue, 1 job/tx",
            "jobs/s",
            values["enqueue_one"],
        ),
        Measure(
            "procrastinate.enqueue_batch",
            f"procrastinate enqueue, batch_defer of {PROCRASTINATE_BATCH}",
            "jobs/s",
            values["enqueue_batch"],
        ),
        Measure(
            "procrastinate.worker",
            "procrastinate worker, no-op jobs (1 process, defaults)",
            "jobs/s",
            values["worker"],
        ),
    ]
    result.extra["procrastinate_version"] = version


def _procrastinate_once(ctx: Context, seconds: float) -> dict[str, float]:
    name, dsn = ctx.server.fresh("procrastinate", template="template1")
    try:
        return asyncio.run(_procrastinate_async(dsn, seconds))
    finally:
        ctx.server.drop(name)


def _procrastinate_http(ctx: Context, result: ScenarioResult, seconds: float) -> None:
    # Scenario 2's time cap, not the baselines' shorter one: its figure is
    # divided into scenario 2's.
    try:
        import procrastinate  # noqa: F401
    except ImportError:
        result.notes.append("procrastinate HTTP peer: skipped: procrastinate not installed")
        return
    from bench.procrastinate_http import measure

    measure(ctx, result)


async def _procrastinate_async(dsn: str, seconds: float) -> dict[str, float]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        one = await _timed_count(seconds, 20_000, lambda: noop.defer_async())
        batch = await _timed_count(
            seconds,
            200_000,
            lambda: noop.batch_defer_async(*([{}] * PROCRASTINATE_BATCH)),
            step=PROCRASTINATE_BATCH,
        )
        started = time.perf_counter()
        # wait=False: the worker returns once the queue is empty; the cap
        # bounds it when the queue is deeper than the time allows.
        worker = app.run_worker_async(wait=False, install_signal_handlers=False)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(worker, timeout=seconds)
        elapsed = time.perf_counter() - started
    done = _count(dsn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")
    return {"enqueue_one": one, "enqueue_batch": batch, "worker": done / elapsed}


async def _timed_count(
    seconds: float, cap: int, call: Callable[[], Awaitable[object]], step: int = 1
) -> float:
    started, done = time.perf_counter(), 0
    while done < cap and time.perf_counter() - started < seconds:
        await call()
        done += step
    return done / (time.perf_counter() - started)


def _count(dsn: str, query: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0


# --- the bare SKIP LOCKED loop ------------------------------------------------

BARE_SCHEMA = """
CREATE TABLE bare_jobs (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'todo',
    payload jsonb NOT NULL DEFAULT '{}',
    locked_by text,
    done_at timestamptz
);
CREATE INDEX bare_jobs_todo ON bare_jobs (id) WHERE status = 'todo';
"""
BARE_CLAIM = """
UPDATE bare_jobs SET status = 'running', locked_by = 'bench'
WHERE id IN (SELECT id FROM bare_jobs WHERE status = 'todo'
             ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
RETURNING id
"""
BARE_COMPLETE = "UPDATE bare_jobs SET status = 'done', done_at = now() WHERE id = ANY(%s)"


def _bare(ctx: Context, result: ScenarioResult, seconds: float) -> None:
    for batch in (1, 100):
        values = repeat(ctx.config.repetitions, partial(_bare_once, ctx, batch, seconds))
        label = f"bare SKIP LOCKED claim+complete, {batch} row{'s' if batch > 1 else ''}/tx"
        result.measures.append(Measure(f"bare.claim_{batch}", label, "rows/s", values["rate"]))


def _bare_once(ctx: Context, batch: int, seconds: float) -> dict[str, float]:
    name, dsn = ctx.server.fresh("bare", template="template1")
    try:
        with psycopg.connect(dsn) as conn:
            conn.execute(BARE_SCHEMA)
            conn.execute(
                "INSERT INTO bare_jobs (payload) SELECT '{}' FROM generate_series(1, %s)",
                (BARE_ROWS,),
            )
            conn.commit()
            conn.execute("ANALYZE bare_jobs")  # so the claim uses the partial index
            return {"rate": _bare_loop(conn, batch, seconds)}
    finally:
        ctx.server.drop(name)


def _bare_loop(conn: psycopg.Connection[tuple[int]], batch: int, seconds: float) -> float:
    started, done = time.perf_counter(), 0
    while done < BARE_ROWS and time.perf_counter() - started < seconds:
        ids = [row[0] for row in conn.execute(BARE_CLAIM, (batch,)).fetchall()]
        conn.commit()
        conn.execute(BARE_COMPLETE, (ids,))
        conn.commit()
        done += len(ids)
    return done / (time.perf_counter() - started)


# --- pgbench ------------------------------------------------------------------


def _pgbench(ctx: Context, result: ScenarioResult, seconds: float) -> None:
    binary = _pgbench_binary(ctx)
    if binary is None:
        result.notes.append("pgbench: skipped: no pgbench in the server's bin dir or on PATH")
        return
    name, _ = ctx.server.fresh("pgbench", template="template1")
    env = {**os.environ, **ctx.server.libpq_env(name)}
    try:
        subprocess.run([binary, "-i", "-q", "-s", "1"], env=env, check=True, capture_output=True)
        with tempfile.TemporaryDirectory() as folder:
            script = Path(folder, "update.sql")
            script.write_text(PGBENCH_SCRIPT)
            values = repeat(
                ctx.config.repetitions, lambda: {"tps": _pgbench_once(binary, env, script, seconds)}
            )
    finally:
        ctx.server.drop(name)
    result.measures.append(
        Measure("pgbench.update_1", "pgbench single-row UPDATE, 1 client", "tx/s", values["tps"])
    )
    result.extra["pgbench"] = binary


def _pgbench_binary(ctx: Context) -> str | None:
    folder = ctx.server.bin_dir()
    if folder and (folder / "pgbench").exists():
        return str(folder / "pgbench")  # same version as the server
    return shutil.which("pgbench")


def _pgbench_once(binary: str, env: dict[str, str], script: Path, seconds: float) -> float:
    command = [binary, "-n", "-c", "1", "-j", "1", "-T", str(round(seconds)), "-f", str(script)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    found = re.search(r"tps = ([0-9.]+)", out)
    if not found:
        raise RuntimeError(f"no tps in pgbench output: {out[-200:]}")
    return float(found.group(1))
