"""The scenarios, in run order; each module has `run(ctx) -> ScenarioResult`.

Baselines run first (the ratios need them) and dispatch before latency,
which paces its load at half of dispatch's measured maximum.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from bench.context import Context
from bench.model import ScenarioResult

ORDER = (
    "baselines", "dispatch", "http", "creation", "latency", "reconcile", "scale", "purge", "lanes",
    "reads", "scale_run",
)  # fmt: skip
_MODULES = {
    "baselines": "bench.baselines",
    "dispatch": "bench.scenarios.dispatch",
    "http": "bench.scenarios.http_dispatch",
    "creation": "bench.scenarios.creation",
    "latency": "bench.scenarios.latency",
    "reconcile": "bench.scenarios.reconcile",
    "scale": "bench.scenarios.scale",
    "purge": "bench.scenarios.purge",
    "lanes": "bench.scenarios.lanes",
    "reads": "bench.scenarios.reads",
    "scale_run": "bench.scenarios.scale_run",
}


def runner(name: str) -> Callable[[Context], ScenarioResult]:
    module = importlib.import_module(_MODULES[name])
    run: Callable[[Context], ScenarioResult] = module.run
    return run
