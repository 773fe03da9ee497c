"""The HTTP service: `create_app(tidings, adapters=...)` returns a FastAPI app.

    app = create_app(Tidings(), adapters={"simulator": SimulatorAdapter(...)})

OpenAPI at /openapi.json and /docs. Every error is problem+json with a
stable code (`tidings.api.problems`); every tenant route acts only for the
API key's tenant (`tidings.api.auth`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from tidings.api import problems
from tidings.api.middleware import BodyLimit, CatchAll
from tidings.api.openapi import problems_as_problem_json
from tidings.api.routes import ROUTERS, audiences
from tidings.client import Tidings
from tidings.config import Settings
from tidings.console import console_router
from tidings.observability.metrics import metrics_router
from tidings.providers.base import ProviderAdapter

API_VERSION = "1.0.0"
DESCRIPTION = (
    "Durable e-mail and SMS notifications. Authenticate with "
    "`Authorization: Bearer <API key>`; errors are `application/problem+json` "
    "with a stable `code`."
)


@dataclass(frozen=True)
class ApiSettings:
    max_body_bytes: int = 256 * 1024
    # Uploaded audiences are streamed, never buffered, so they get their own
    # much larger limit (TIDINGS_MAX_UPLOAD_BYTES).
    max_upload_bytes: int = 1024**3
    # Set when a proxy sits in front: webhook signatures cover the public URL.
    public_base_url: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiSettings:
        return cls(max_upload_bytes=settings.max_upload_bytes)


def create_app(
    tidings: Tidings,
    *,
    adapters: Mapping[str, ProviderAdapter] | None = None,
    settings: ApiSettings | None = None,
) -> FastAPI:
    """The API over `tidings`; `adapters` verify webhooks, by provider name."""
    config = settings or ApiSettings()
    app = FastAPI(title="tidings", version=API_VERSION, description=DESCRIPTION)
    app.state.tidings = tidings
    app.state.adapters = dict(adapters or {})
    app.state.api_settings = config
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(metrics_router())
    app.include_router(console_router(tidings), prefix="/console")
    problems.install(app)
    # Last added runs first: the size limit guards everything, and CatchAll
    # sits inside it so even a failing handler answers problem+json.
    app.add_middleware(CatchAll)
    app.add_middleware(
        BodyLimit,
        max_bytes=config.max_body_bytes,
        streamed={audiences.PATH: config.max_upload_bytes},
    )
    _document_problems(app)
    return app


def _document_problems(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = problems_as_problem_json(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
