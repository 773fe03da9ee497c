"""Run the API under uvicorn (`tidings serve`)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping

import uvicorn

from tidings.api.access_log import strip_query_strings
from tidings.api.app import ApiSettings, create_app
from tidings.client import Tidings
from tidings.providers.base import ProviderAdapter

STARTUP_FAILURE = 3  # uvicorn's exit status for a server that never started


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
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level=log_level, proxy_headers=True)
    )
    strip_query_strings()  # after uvicorn configured its loggers
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:  # as uvicorn.run: a port in use is a failed start
        sys.exit(STARTUP_FAILURE)
