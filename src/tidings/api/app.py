"""The HTTP service: `create_app(tidings, adapters=...)` returns a FastAPI app.

    app = create_app(Tidings(), adapters={"simulator": SimulatorAdapter(...)})

OpenAPI at /openapi.json and /docs. Every error is problem+json with a
stable code (`tidings.api.problems`); every tenant route acts only for the
API key's tenant (`tidings.api.auth`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from tidings.api import problems
from tidings.api.docs_ui import install_docs
from tidings.api.middleware import BodyLimit, CatchAll
from tidings.api.openapi import operation_id, problems_as_problem_json
from tidings.api.rate_limit import TenantRateLimit
from tidings.api.routes import ROUTERS, audiences
from tidings.api.settings import ApiSettings
from tidings.api.upload_slots import UploadSlots
from tidings.client import Tidings
from tidings.console import console_router
from tidings.dispatch.observe import apply_received
from tidings.domain.auth_failures import AuthFailures
from tidings.providers.accounts import ProviderAccounts
from tidings.providers.base import ProviderAdapter
from tidings.providers.outcomes import Observation
from tidings.runtime import Runtime

API_VERSION = "1.0.0"
DESCRIPTION = (
    "Durable e-mail and SMS notifications. Authenticate with "
    "`Authorization: Bearer <API key>`; errors are `application/problem+json` "
    "with a stable `code`."
)


def create_app(
    tidings: Tidings,
    *,
    adapters: Mapping[str, ProviderAdapter] | None = None,
    settings: ApiSettings | None = None,
) -> FastAPI:
    """The API over `tidings`; `adapters` verify webhooks, by provider name."""
    config = settings or ApiSettings()
    app = FastAPI(
        title="tidings",
        version=API_VERSION,
        description=DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        generate_unique_id_function=operation_id,
    )
    install_docs(app)
    app.state.tidings = tidings
    # By provider account, retired ones built on demand (providers/accounts.py).
    app.state.adapters = ProviderAccounts(adapters or {})
    app.state.api_settings = config
    app.state.rate_limit = TenantRateLimit(config.api_rate_per_second, config.api_rate_burst)
    app.state.auth_failures = AuthFailures(
        config.auth_failure_rate_per_second, config.auth_failure_burst
    )
    app.state.upload_slots = UploadSlots(config.uploads_per_tenant)
    # The console and provider receipts run on the runtime, as the workers
    # do; they stand beside the client, which cannot hand them on.
    runtime = tidings.runtime
    app.state.receipts = WebhookReceipts(runtime)
    for router in ROUTERS:
        app.include_router(router)
    # No /metrics here: it names every tenant. `tidings serve --metrics-port`
    # serves it on a listener of its own (observability.metrics).
    app.include_router(
        console_router(runtime, public_base_url=config.public_base_url), prefix="/console"
    )
    problems.install(app)
    # Last added runs first: the size limit guards everything, and CatchAll
    # sits inside it so even a failing handler answers problem+json.
    app.add_middleware(CatchAll)
    app.add_middleware(
        BodyLimit,
        max_bytes=config.max_body_bytes,
        streamed={audiences.PATH: config.max_upload_bytes},
    )
    _document_problems(app, config)
    return app


@dataclass(frozen=True)
class WebhookReceipts:
    """`webhooks.Receipts` over the runtime: observations a provider pushed,
    applied in one transaction, so a failure leaves nothing half-applied."""

    runtime: Runtime

    def apply(self, observations: Sequence[Observation]) -> list[str]:
        now = self.runtime.clock.now()
        with self.runtime.db.transaction() as conn:
            return apply_received(conn, observations, "webhook", now)


def _document_problems(app: FastAPI, config: ApiSettings) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                servers=[{"url": config.public_base_url or "/", "description": "this API"}],
            )
            app.openapi_schema = problems_as_problem_json(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
