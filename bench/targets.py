"""The targets of issue 10, reported against (never asserted)."""

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


TARGETS = (
    Target(
        "dispatch, 2 workers ≥ 7x procrastinate's worker",
        "dispatch.w2",
        "procrastinate.worker",
        7.0,
    ),
    Target(
        "dispatch, 2 workers ≥ 0.15x the bare batched claim loop",
        "dispatch.w2",
        "bare.claim_100",
        0.15,
    ),
    Target(
        "library notify ≥ 0.5x pgbench single-update TPS", "create.notify", "pgbench.update_1", 0.5
    ),
    Target(
        "bulk freeze ≥ 3x procrastinate batched enqueue",
        "create.job_freeze",
        "procrastinate.enqueue_batch",
        3.0,
    ),
    Target("p99 create-to-call < 50 ms at half load", "latency.p99", None, 50.0, below=True),
    Target(
        "time per recipient at 1M within 1.2x of 10k",
        "scale.ratio_1M",
        None,
        1.2,
        below=True,
    ),
)


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


def evaluate(results: Mapping[str, ScenarioResult]) -> list[dict[str, Any]]:
    rows = []
    for target in TARGETS:
        if target.denominator:
            value = ratio(results, target.numerator, target.denominator)
        else:
            found = find(results, target.numerator)
            value = found.median if found else None
        if value is None or math.isnan(value):
            status = "not measured"
        else:
            met = value < target.threshold if target.below else value >= target.threshold
            status = "met" if met else "missed"
        rows.append({"target": target.text, "value": value, "status": status})
    return rows
