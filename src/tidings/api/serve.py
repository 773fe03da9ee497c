"""Run the API under uvicorn (`tidings serve`)."""

from __future__ import annotations

from collections.abc import Mapping

import uvicorn

from tidings.api.app import ApiSettings, create_app
from tidings.client import Tidings
from tidings.providers.base import ProviderAdapter


def serve(
    host: str,
    port: int,
    tidings: Tidings,
    adapters: Mapping[str, ProviderAdapter] | None = None,
    *,
    settings: ApiSettings | None = None,
    log_level: str = "info",
) -> None:
    """Serve until interrupted. Handlers are synchronous and run in uvicorn's
    thread pool, each taking a connection from the shared pool."""
    config = settings or ApiSettings.from_settings(tidings.settings)
    app = create_app(tidings, adapters=adapters or {}, settings=config)
    uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=True)
