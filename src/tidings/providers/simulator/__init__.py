"""The provider simulator: one stand-in for every provider, run as its own process.

    python -m tidings.providers.simulator --port 8099
    run("127.0.0.1", 8099, seed=7, webhook_url="http://127.0.0.1:8000/v1/webhooks/simulator")

In-process (no HTTP, zero latency): `SimulatorCore()` plus
`tidings.providers.simulator.in_process.InProcessSimulatorAdapter(core)`.
Magic destinations are documented in `magic.py`.
"""

from __future__ import annotations

from typing import Any

from tidings.providers.simulator.config import DEFAULT_WEBHOOK_SECRET, SimulatorConfig
from tidings.providers.simulator.core import SimulatorCore

DEFAULT_PORT = 8099

__all__ = ["DEFAULT_PORT", "DEFAULT_WEBHOOK_SECRET", "SimulatorConfig", "SimulatorCore", "run"]


def run(
    host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, log_level: str = "warning", **config: Any
) -> None:
    """Serve the simulator until interrupted; `config` takes SimulatorConfig fields."""
    # Imported here so in-process users of the core never load uvicorn.
    from tidings.providers.simulator.app import serve

    serve(host, port, log_level=log_level, **config)
