"""The run's settings and shared state, handed to every scenario."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.db import Server
from bench.model import ScenarioResult


@dataclass(frozen=True)
class RunConfig:
    full: bool = False
    repetitions: int = 3
    seconds: float = 6.0  # the time cap of one measured repetition
    intents: int = 20_000  # the count cap of one dispatch repetition
    profile: bool = False
    only: tuple[str, ...] = ()
    baselines: bool = True
    results_dir: Path = Path(__file__).parent / "results"

    @property
    def mode(self) -> str:
        return "full" if self.full else "quick"


@dataclass
class Context:
    config: RunConfig
    server: Server
    results: dict[str, ScenarioResult] = field(default_factory=dict)
    # Seeded template databases by name, reused across scenarios.
    templates: dict[str, str] = field(default_factory=dict)
    profile: dict[str, Any] | None = None
    # 1-minute load averages seen at each scenario's start: other work on
    # the machine shows up here before it shows up as noise in the figures.
    load: list[float] = field(default_factory=list)

    def median(self, scenario: str, key: str) -> float | None:
        result = self.results.get(scenario)
        found = result.measure(key) if result else None
        return found.median if found and found.values else None
