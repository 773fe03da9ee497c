"""Scenario 10: the 1,000,000-recipient job end to end (issue 38, items 4 and 5).

Run by `--full` or `--only scale_run`; the size is `BENCH_SCALE_RUN_SIZE`
(1,000,000 unless set: 20000 tries it in a minute). As scenario 6 (the API
process, two worker processes sending to the simulator process), but the
job is dispatched to the end: upload, freeze, prepare and dispatch until
every intent has left the queue (accepted by the provider, or final), or
the time cap `BENCH_SCALE_RUN_CAP_S` (3 h) passed, which is reported.
During the run (bench/run_watch.py) the job's status is read every second
and a page of 1,000 of its recipients every two seconds (the cursor walked
to the end and wrapped), each latency recorded; the resident set (VmRSS)
of the API and of each worker is sampled every 5 s. After it, the console
is signed in to as a browser does (csrf cookie and form token) and its
overview, jobs and one intent's page are each read five times; the rows of
evidence the job left are counted.

The time per recipient is the whole run (upload to the last intent out of
the queue) over the audience; a 10,000-recipient job run the same way,
`--repetitions` times with the same readers, is its reference
(`scale.ratio_1m`, target at most 1.2). The large job runs once: at 1M,
about half an hour on a quiet machine.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import httpx

from bench import api_client
from bench.context import Context
from bench.db import Server
from bench.model import Measure, ScenarioResult
from bench.procs import WorkerGroup, WorkerSpec, api, peak_rss_mb, simulator
from bench.run_watch import (
    PageWalker,
    RssSampler,
    StatusPoller,
    evidence_rows,
    spread,
    wait_done,
)
from bench.seed import published_template

TITLE = "10. Scale: a job end to end"
WORKERS = 2
REFERENCE = 10_000
SIZE = int(os.environ.get("BENCH_SCALE_RUN_SIZE", "1000000"))
CAP_S = float(os.environ.get("BENCH_SCALE_RUN_CAP_S", str(3 * 3600)))
REFERENCE_CAP_S = 600.0
# The job and its 10k reference run on a server of their own, configured as
# a deployment expecting million-recipient jobs configures it (PostgreSQL's
# "Resource Consumption" and "WAL Configuration" chapters). pgserver's
# defaults (128 MB of shared buffers, 1 GB of WAL between checkpoints) made
# the 1M job checkpoint every 15 to 80 s: half its WAL was full-page images
# and backends wrote 1.95 million pages themselves, costs a 10k job never
# meets (docs/benchmarks.md, "The 1M run and the server's size").
LARGE_JOB_SETTINGS = {
    "shared_buffers": "4GB",
    "max_wal_size": "16GB",
    "checkpoint_timeout": "15min",
}
CONSOLE_READS = 5
CONSOLE_PAGES = {"overview": "/console/", "jobs": "/console/jobs"}


def label(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("scale_run", TITLE)
    if not ctx.config.full and "scale_run" not in ctx.config.only:
        result.skipped = "skipped: with --full or --only scale_run"
        return result
    reason = api_client.unavailable("uploads")
    if reason:
        result.skipped = reason
        return result
    server = Server(LARGE_JOB_SETTINGS)
    try:
        _run(Context(ctx.config, server), result)
    finally:
        server.close()
    settings = ", ".join(f"{k}={v}" for k, v in LARGE_JOB_SETTINGS.items())
    result.notes.append(f"on a PostgreSQL of its own, sized for the job: {settings}")
    return result


def _run(ctx: Context, result: ScenarioResult) -> None:
    template = published_template(ctx)
    big = _once(ctx, template, SIZE, CAP_S, watch=True)
    name = label(SIZE)
    references = (
        [big]
        if SIZE == REFERENCE
        else [
            _once(ctx, template, REFERENCE, REFERENCE_CAP_S) for _ in range(ctx.config.repetitions)
        ]
    )
    result.measures += _measures(big, name, references)
    result.extra = {k: big[k] for k in ("rss_samples", "evidence", "polls")}
    result.notes.append(
        f"one job of {SIZE:,} recipients, {WORKERS} workers; "
        + (f"finished in {big['seconds']:.0f} s" if big["done"] else
           f"CAPPED at {CAP_S:.0f} s with {big['queued']:,} intents still queued")
    )  # fmt: skip


def _measures(big: dict[str, Any], name: str, references: list[dict[str, Any]]) -> list[Measure]:
    reference = [r["per_recipient_ms"] for r in references]
    found = [
        Measure(f"scale.run_per_recipient_{name}", f"{name} job end to end, time per recipient",
                "ms", [big["per_recipient_ms"]]),
        Measure(f"scale.run_freeze_{name}", f"{name} job, upload + freeze + prepare", "s",
                [big["freeze_s"]]),
        Measure(f"scale.run_seconds_{name}", f"{name} job, upload to the last intent out of the "
                "queue", "s", [big["seconds"]]),
    ]  # fmt: skip
    if name != label(REFERENCE):
        found.append(
            Measure(f"scale.run_per_recipient_{label(REFERENCE)}",
                    f"{label(REFERENCE)} job end to end, time per recipient", "ms", reference)
        )  # fmt: skip
    # Each job's split: whether a recipient of the large job costs more in
    # the preparation or in the dispatch after it.
    found += _split(name, [big])
    if name != label(REFERENCE):
        found += _split(label(REFERENCE), references)
    if big["done"] and reference:
        ratio = big["per_recipient_ms"] / statistics.median(reference)
        found.append(
            Measure(f"scale.ratio_{name}", f"time per recipient end to end, {name} / 10k", "x",
                    [ratio])
        )  # fmt: skip
    for kind, text in (("status", "job status read"), ("page", "page of 1,000 recipients")):
        for stat, value in spread(big["polls"][kind]).items():
            found.append(
                Measure(f"scale.run_{kind}_{stat}_ms", f"during the run, {text}, {stat}", "ms",
                        [value])
            )  # fmt: skip
    for who, text in (("worker", "a worker's"), ("api", "the API's")):
        found += [
            Measure(f"scale.rss_{who}_peak_mb", f"{text} RSS during the run, peak", "MB",
                    [big[f"rss_{who}_peak"]]),
            Measure(f"scale.rss_{who}_growth_mb", f"{text} RSS growth, 10% to 100% of the run",
                    "MB", [big[f"rss_{who}_growth"]]),
        ]  # fmt: skip
    for page, values in big["console"].items():
        found.append(
            Measure(f"scale.console_{page}_ms", f"console {page} page after the run", "ms", values)
        )
    evidence = dict(big["evidence"])
    deadlocks = evidence.pop("deadlocks", 0)
    found += [
        Measure("scale.evidence_rows", "evidence rows after the run (transitions, attempts, "
                "observations, events)", "rows", [float(sum(evidence.values()))]),
        Measure("scale.run_deadlocks", "deadlocks PostgreSQL counted during the run", "",
                [float(deadlocks)]),
    ]  # fmt: skip
    return found


def _split(name: str, runs: list[dict[str, Any]]) -> list[Measure]:
    """Per recipient: the upload, freeze and preparation; then, from the job
    prepared to the last intent out, per intent still queued at that point."""
    return [
        Measure(f"scale.run_prepare_per_recipient_{name}",
                f"{name} job, upload + freeze + prepare, time per recipient", "ms",
                [r["freeze_s"] / r["size"] * 1000 for r in runs]),
        Measure(f"scale.run_out_at_prepared_{name}",
                f"{name} job, share out of the queue when prepared", "%",
                [r["out_at_prepared"] / r["size"] * 100 for r in runs]),
        Measure(f"scale.run_after_prepare_per_recipient_{name}",
                f"{name} job, prepared to the last intent out, per intent then queued", "ms",
                [(r["seconds"] - r["freeze_s"]) / max(r["size"] - r["out_at_prepared"], 1) * 1000
                 for r in runs]),
    ]  # fmt: skip


def _once(
    ctx: Context, template: str, size: int, cap_s: float, watch: bool = False
) -> dict[str, Any]:
    name, dsn = ctx.server.fresh("scalerun", template)
    key = api_client.create_key(dsn)
    try:
        with (
            simulator(0.0) as (provider_url, _),
            api(dsn) as (base_url, api_pid),
            api_client.client(base_url, key) as http,
            WorkerGroup(WorkerSpec(dsn, simulator_url=provider_url), WORKERS) as group,
        ):
            pids = {"api": api_pid} | {f"worker{i}": p.pid or 0
                                       for i, p in enumerate(group.processes)}  # fmt: skip
            sampler = RssSampler(pids)
            started = group.go()
            sampler.start()
            job = api_client.submit_uploaded_job(http, f"scalerun{size}", size)
            with (
                api_client.client(base_url, key) as status_http,
                api_client.client(base_url, key) as page_http,
            ):
                status, pages = StatusPoller(status_http, job), PageWalker(page_http, job)
                status.start()  # the reference is read the same way: like for like
                pages.start()
                frozen: list[tuple[float, int]] = []
                done, queued = wait_done(
                    dsn,
                    job,
                    size,
                    started + cap_s,
                    lambda out: frozen.append((time.perf_counter(), out)),
                )
                finished = time.perf_counter()
                status.stop()
                pages.stop()
            sampler.stop()
            hwm = {n: peak_rss_mb(p) for n, p in pids.items()}
            console = _console(base_url, key, pages.intent_id) if watch else {}
        seconds = finished - started
        workers = [n for n in pids if n.startswith("worker")]
        return {
            "size": size,
            "per_recipient_ms": seconds / size * 1000,
            "seconds": seconds,
            "freeze_s": (frozen[0][0] if frozen else finished) - started,
            "out_at_prepared": frozen[0][1] if frozen else size,
            "done": done,
            "queued": queued,
            "rss_worker_peak": max(sampler.peak(workers), *(hwm[n] for n in workers)),
            "rss_api_peak": max(sampler.peak(["api"]), hwm["api"]),
            "rss_worker_growth": sampler.growth(workers),
            "rss_api_growth": sampler.growth(["api"]),
            "rss_samples": [
                (round(t, 1), {n: round(v, 1) for n, v in s.items()}) for t, s in sampler.samples
            ],
            "polls": {
                "status": status.latencies,
                "page": pages.latencies,
                "status_errors": status.errors,
                "page_errors": pages.errors,
                "pages": pages.pages,
                "page_wraps": pages.wraps,
                "last_status": status.last.get("status"),
            },
            "console": console,
            "evidence": evidence_rows(dsn) if watch else {},
        }
    finally:
        ctx.server.drop(name)


def _console(base_url: str, key: str, intent_id: str | None) -> dict[str, list[float]]:
    """Sign in as a browser does, then read each page CONSOLE_READS times (ms)."""
    pages = dict(CONSOLE_PAGES)
    if intent_id:
        pages["intent"] = f"/console/intents/{intent_id}"
    timed: dict[str, list[float]] = {}
    with httpx.Client(base_url=base_url, timeout=120.0) as browser:
        browser.get("/console/")  # 401 with the sign-in form: sets the csrf cookie
        token = browser.cookies["tidings_console_csrf"]
        signed = browser.post("/console/login", data={"key": key, "csrf": token})
        if signed.status_code != 303:  # signed in: a redirect to the overview
            raise RuntimeError(f"console sign-in: HTTP {signed.status_code}")
        for page, path in pages.items():
            for _ in range(CONSOLE_READS):
                started = time.perf_counter()
                reply = browser.get(path)
                elapsed = (time.perf_counter() - started) * 1000
                if reply.status_code != 200:
                    raise RuntimeError(f"console {path}: HTTP {reply.status_code}")
                timed.setdefault(page, []).append(elapsed)
    return timed
