"""What a run records: measures (one value per repetition), grouped by scenario."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Measure:
    key: str  # stable: targets and ratios refer to it
    label: str
    unit: str
    values: list[float] = field(default_factory=list)
    # Baseline keys this figure is divided by in the report.
    compare: tuple[str, ...] = ()
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def low(self) -> float:
        return min(self.values) if self.values else float("nan")

    @property
    def high(self) -> float:
        return max(self.values) if self.values else float("nan")

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(median=self.median, min=self.low, max=self.high)
        return data


@dataclass
class ScenarioResult:
    name: str
    title: str
    measures: list[Measure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def measure(self, key: str) -> Measure | None:
        return next((m for m in self.measures if m.key == key), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 1),
            "notes": self.notes,
            "measures": [m.as_dict() for m in self.measures],
            "extra": self.extra,
        }


def repeat(times: int, run: Callable[[], dict[str, float]]) -> dict[str, list[float]]:
    """Run `times` repetitions; each returns named values, gathered by name."""
    gathered: dict[str, list[float]] = {}
    for _ in range(times):
        for name, value in run().items():
            gathered.setdefault(name, []).append(value)
    return gathered


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]
