"""The targets of issue 42, reported against (never asserted), and the
earlier targets of issues 25 and 38, reported as information (their values,
no verdict). Every figure and baseline they name is measured by
`python -m bench` (the 1M job with `--full`); a run that leaves one out
(`--only`, `--no-baselines`, a quick run for 1M) reports its target
"not measured"."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.model import Measure, ScenarioResult


@dataclass(frozen=True)
class Target:
    text: str
    numerator: str  # a measure key
    denominator: str | None  # a measure key, or None for an absolute figure
    threshold: float
    below: bool = False  # met when the value is under the threshold


# Issue 42: each figure against a baseline doing the same work, measured in
# the same run.
TARGETS = (
    Target("library notify ≥ 0.6x the create's own SQL, no engine logic", "create.notify",
           "sql.create", 0.6),
    Target("POST /v1/intents, 8 clients ≥ 0.7x the thinnest HTTP app doing the create's SQL "
           "(same uvicorn options, same client, pinned)", "create.http_c8", "http.peer_c8", 0.7),
    Target("job freeze + prepare ≥ 0.5x the freeze's and prepare's own SQL, no engine logic",
           "create.job_prepared", "sql.job_prepared", 0.5),
    Target("dispatch, 2 workers, in-process provider ≥ 0.45x dispatch's own SQL", "dispatch.w2",
           "sql.dispatch", 0.45),
    Target("dispatch over HTTP, 20 ms provider, concurrency 64 ≥ 2.5x the procrastinate HTTP "
           "peer (pinned)", "http.c64", "procrastinate.http_worker", 2.5),
    Target("p50 create-to-call < 10 ms at a fixed 150/s, receipts posted", "latency.p50_150",
           None, 10.0, below=True),
    Target("p99 create-to-call < 50 ms at a fixed 150/s, receipts posted", "latency.p99_150",
           None, 50.0, below=True),
)  # fmt: skip

# The earlier targets (issues 25 and 38), reported as information: their
# ratios and figures, without met or missed.
INFORMATION = (
    Target(
        "library notify ≥ 1.4x procrastinate's one-job enqueue",
        "create.notify",
        "procrastinate.enqueue_one",
        1.4,
    ),
    Target("POST /v1/intents, 8 clients ≥ 0.8x library notify", "create.http_c8", "create.notify",
           0.8),
    Target("POST /v1/intents, 1 client ≥ 0.5x library notify", "create.http_c1", "create.notify",
           0.5),
    Target(
        "bulk freeze of fresh recipients ≥ 1.5x batch_defer",
        "create.job_freeze",
        "procrastinate.enqueue_batch",
        1.5,
    ),
    Target(
        "freeze + prepare to intents ≥ 0.6x batch_defer",
        "create.job_prepared",
        "procrastinate.enqueue_batch",
        0.6,
    ),
    Target("dispatch, 2 workers ≥ 0.5x the dispatch same-SQL limit", "dispatch.w2",
           "sql.dispatch", 0.5),
    Target("dispatch, 2 workers ≥ 9x procrastinate's worker", "dispatch.w2",
           "procrastinate.worker", 9.0),
    Target("p50 create-to-call < 10 ms at half load", "latency.p50", None, 10.0, below=True),
    Target("p99 create-to-call < 50 ms at half load", "latency.p99", None, 50.0, below=True),
    Target("urgent create-to-call p99 beside a 100k job < 1,000 ms", "lanes.urgent_p99_ms", None,
           1000.0, below=True),
    Target("a job's throughput beside 20 urgent/s ≥ 0.9x the job alone", "lanes.job_ratio", None,
           0.9),
    # Issue 38: the 1M job end to end (scenario 10), against a 10k job run the same way.
    Target("time per recipient at 1M within 1.2x of 10k, end to end", "scale.ratio_1m", None,
           1.2, below=True),
    Target("during the end-to-end job, a page of 1,000 recipients p99 < 100 ms",
           "scale.run_page_p99_ms", None, 100.0, below=True),
    Target("during the end-to-end job, the job's status p99 < 50 ms",
           "scale.run_status_p99_ms", None, 50.0, below=True),
    # Issue 38: an operator's reads of a 100k job on tables never analyzed.
    Target("a page of 1,000 recipients of a 100k job < 100 ms", "reads.recipients_page_ms", None,
           100.0, below=True),
    Target("a 100k job's status < 50 ms", "reads.job_status_ms", None, 50.0, below=True),
)  # fmt: skip


def find(results: Mapping[str, ScenarioResult], key: str) -> Measure | None:
    for result in results.values():
        found = result.measure(key)
        if found is not None and found.values:
            return found
    return None


def ratio(results: Mapping[str, ScenarioResult], numerator: str, denominator: str) -> float | None:
    top, bottom = find(results, numerator), find(results, denominator)
    if top is None or bottom is None or not bottom.median:
        return None
    return top.median / bottom.median


def value_of(results: Mapping[str, ScenarioResult], target: Target) -> float | None:
    """The target's ratio (or absolute figure); None when not measured."""
    if target.denominator:
        value = ratio(results, target.numerator, target.denominator)
    else:
        found = find(results, target.numerator)
        value = found.median if found else None
    return None if value is None or math.isnan(value) else value


def evaluate(results: Mapping[str, ScenarioResult]) -> list[dict[str, Any]]:
    rows = []
    for target in TARGETS:
        value = value_of(results, target)
        if value is None:
            status = "not measured"
        else:
            met = value < target.threshold if target.below else value >= target.threshold
            status = "met" if met else "missed"
        rows.append({"target": target.text, "value": value, "status": status})
    return rows


def information(results: Mapping[str, ScenarioResult]) -> list[dict[str, Any]]:
    """The earlier targets' values, as information: no met or missed."""
    return [
        {"earlier_target": target.text, "value": value_of(results, target)}
        for target in INFORMATION
    ]
