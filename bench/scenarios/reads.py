"""Scenario 9: an operator's reads of a 100,000-recipient job on tables
never analyzed (issue 38).

A database holds one job of 100,000 recipients, each with its intent (70%
delivered with an attempt, the rest pending), written with autovacuum off
on every table, so the planner sees what it sees right after a large job
was prepared. Timed through the code the API serves them with
(`tidings.jobs.status`), on one connection:

- **recipients page**: `job_recipients(..., limit=1000)` at ten cursors
  spread over the job (GET /v1/jobs/{id}/recipients?limit=1000);
- **job status**: `job_status` ten times (GET /v1/jobs/{id}).

Each figure is the median of its ten reads, per repetition.
tests/integration/test_plan_guard.py holds every read query to its page;
this shows what the two an operator polls cost in milliseconds.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from tidings.jobs.status import job_recipients, job_status

TITLE = "9. Reads of a 100k job on tables never analyzed"
RECIPIENTS = 100_000
PAGE = 1000
READS = 10
JOB = UUID("01900000-0000-7000-8000-0000000be9c1")
LOAD = Path(__file__).with_name("reads.sql")


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("reads", TITLE)
    name, dsn = ctx.server.fresh("reads")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            _load(conn)
            values = repeat(ctx.config.repetitions, lambda: _once(conn))
            analyzed = _analyzed(conn)
    finally:
        ctx.server.drop(name)
    result.measures += [
        Measure("reads.recipients_page_ms", f"a page of {PAGE:,} recipients", "ms",
                values["page_ms"]),
        Measure("reads.job_status_ms", "the job's status", "ms", values["status_ms"]),
    ]  # fmt: skip
    result.notes.append(
        f"one job of {RECIPIENTS:,} recipients; tables analyzed during the run: {analyzed}"
    )
    return result


def _load(conn: psycopg.Connection[Any]) -> None:
    tables = conn.execute(
        "SELECT oid::regclass::text FROM pg_class WHERE relkind = 'r'"
        " AND relnamespace = 'public'::regnamespace"
    ).fetchall()
    for (table,) in tables:
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    text = "\n".join(line for line in LOAD.read_text().splitlines() if not line.startswith("--"))
    with conn.transaction():
        for statement in filter(str.strip, text.split(";\n")):
            conn.execute(statement, {"job_id": JOB, "n": RECIPIENTS})  # type: ignore[arg-type]


def _once(conn: psycopg.Connection[Any]) -> dict[str, float]:
    cursors = range(0, RECIPIENTS, RECIPIENTS // READS)
    pages = [_ms(partial(job_recipients, conn, "reads", JOB, after, PAGE)) for after in cursors]
    now = datetime.now(UTC)
    status = [_ms(partial(job_status, conn, "reads", JOB, now)) for _ in range(READS)]
    return {"page_ms": statistics.median(pages), "status_ms": statistics.median(status)}


def _ms(read: Any) -> float:
    started = time.perf_counter()
    read()
    return (time.perf_counter() - started) * 1000


def _analyzed(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_user_tables"
        " WHERE last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL"
    ).fetchone()
    return int(row[0]) if row else 0
