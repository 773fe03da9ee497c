"""Scenario 6: bulk jobs of 10k and 100k recipients.

Through the API process, with two workers running that send to the
simulator process (no added latency): the audience is streamed to
`POST /v1/audiences` (an NDJSON generator body, never whole in either
process), `POST /v1/jobs` names the upload and freezes it, the workers
prepare it (channels resolved, intents created) and dispatch it. The freeze
time includes the upload. Time per recipient = (freeze + prepare time) /
recipients + the time per recipient dispatched after preparation, within
a few seconds (its per-recipient cost is what is compared). Both parts are
reported too. The 1M job is scenario 10 (`scale_run`), dispatched to the
end there. Peak memory is VmHWM
of the worker and API processes, read before they stop. The provider is a
process of its own, as in production: an in-process simulator keeps every
message it accepted, and its memory would read as the worker's.
"""

from __future__ import annotations

import time
from functools import partial

from bench import api_client
from bench.context import Context
from bench.model import Measure, ScenarioResult, repeat
from bench.procs import WorkerGroup, WorkerSpec, api, peak_rss_mb, simulator
from bench.progress import still_queued, wait_dispatched, wait_job
from bench.scenarios.creation import FROZEN
from bench.seed import published_template

TITLE = "6. Scale: bulk jobs"
WORKERS = 2
SIZES = {"10k": 10_000, "100k": 100_000}
FREEZE_CAP_S = 900.0
# Dispatch throughput is scenario 1's subject; here a few seconds of it
# suffice to show whether the per-recipient cost grows with the job.
DISPATCH_CAP_S = 5.0


def run(ctx: Context) -> ScenarioResult:
    result = ScenarioResult("scale", TITLE)
    reason = api_client.unavailable("uploads")
    if reason:
        result.skipped = reason
        return result
    template = published_template(ctx)
    for label, size in SIZES.items():
        values = repeat(ctx.config.repetitions, partial(_once, ctx, template, size))
        result.measures += [
            Measure(f"scale.per_recipient_{label}", f"{label} job, time per recipient", "ms",
                    values["per_recipient_ms"]),
            Measure(f"scale.freeze_{label}", f"{label} job, freeze + prepare per recipient",
                    "ms", values["freeze_ms"]),
            Measure(f"scale.dispatch_{label}", f"{label} job, dispatch per recipient", "ms",
                    values["dispatch_ms"]),
            Measure(f"scale.rss_worker_{label}", f"{label} job, worker peak RSS", "MB",
                    values["rss_worker"]),
            Measure(f"scale.rss_api_{label}", f"{label} job, API peak RSS", "MB",
                    values["rss_api"]),
        ]  # fmt: skip
    _ratio(result, "100k")
    return result


def _once(ctx: Context, template: str, size: int) -> dict[str, float]:
    name, dsn = ctx.server.fresh("scale", template)
    key = api_client.create_key(dsn)
    try:
        with (
            simulator(0.0) as (provider_url, _),
            api(dsn) as (base_url, api_pid),
            api_client.client(base_url, key) as http,
            WorkerGroup(WorkerSpec(dsn, simulator_url=provider_url), WORKERS) as group,
        ):
            started = group.go()
            job = api_client.submit_uploaded_job(http, f"scale{size}", size)
            status = wait_job(dsn, job, FROZEN, FREEZE_CAP_S)
            frozen_at = time.perf_counter()
            if status not in FROZEN:
                raise RuntimeError(f"{size:,} recipients not frozen in {FREEZE_CAP_S:.0f} s")
            # Workers dispatch while the job is prepared; only what they send
            # after it counts against the time after it.
            since, remaining = still_queued(dsn, size)
            measured_from = time.perf_counter()
            done, spent = wait_dispatched(
                dsn, remaining, measured_from, min(ctx.config.seconds, DISPATCH_CAP_S), since
            )
            rss = {"rss_worker": group.peak_rss_mb(), "rss_api": peak_rss_mb(api_pid)}
        freeze, send = (frozen_at - started) / size, spent / max(done, 1)
        return {
            "per_recipient_ms": (freeze + send) * 1000,
            "freeze_ms": freeze * 1000,
            "dispatch_ms": send * 1000,
            **rss,
        }
    finally:
        ctx.server.drop(name)


def _ratio(result: ScenarioResult, largest: str) -> None:
    big = result.measure(f"scale.per_recipient_{largest}")
    small = result.measure("scale.per_recipient_10k")
    if big and small and small.median:
        result.measures.append(
            Measure(f"scale.ratio_{largest}", f"time per recipient, {largest} / 10k", "x",
                    [big.median / small.median])
        )  # fmt: skip
