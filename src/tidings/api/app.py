"""The HTTP service: `create_app(tidings, adapters=...)` returns a FastAPI app.

    app = create_app(Tidings(), adapters={"simulator": SimulatorAdapter(...)})

OpenAPI at /openapi.json and /docs. Every error is problem+json with a
stable code (`tidings.api.problems`); every tenant route acts only for the
API key's tenant (`tidings.api.auth`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from tidings.api import problems
from tidings.api.middleware import BodyLimit, CatchAll
from tidings.api.openapi import problems_as_problem_json
from tidings.api.rate_limit import TenantRateLimit
from tidings.api.routes import ROUTERS, audiences
from tidings.api.upload_slots import UploadSlots
from tidings.client import Tidings
from tidings.config import Settings
from tidings.console import console_router
from tidings.domain.auth_failures import AuthFailures
from tidings.providers.accounts import ProviderAccounts
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
    # Set when a proxy sits in front (TIDINGS_PUBLIC_BASE_URL): webhook
    # signatures cover the public URL; https:// makes console cookies Secure.
    public_base_url: str | None = None
    # Whose opt-outs inbound STOPs are (TIDINGS_INBOUND_TENANT); unset, the
    # server's own tenant. Never from the request.
    inbound_tenant: str | None = None
    # account -> tenant -> the number it sends from (TIDINGS_SENDER_NUMBERS):
    # an inbound message is for the tenants sending from the number it was
    # sent to (domain/senders.py).
    sender_numbers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Slow uploads and request floods (issue #20): see config.Settings.
    upload_idle_seconds: float = 30.0
    upload_deadline_seconds: float = 900.0
    uploads_per_tenant: int = 2
    api_rate_per_second: float = 1000.0
    api_rate_burst: int = 2000
    # Failed authentications per client address and per key id, in process,
    # checked before any database read (domain/auth_failures.py); 0: off.
    auth_failure_rate_per_second: float = 1.0
    auth_failure_burst: int = 20

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiSettings:
        return cls(
            inbound_tenant=settings.inbound_tenant,
            sender_numbers=settings.sender_numbers,
            upload_idle_seconds=settings.upload_idle_seconds,
            upload_deadline_seconds=settings.upload_deadline_seconds,
            uploads_per_tenant=settings.uploads_per_tenant,
            api_rate_per_second=settings.api_rate_per_second,
            api_rate_burst=settings.api_rate_burst,
            auth_failure_rate_per_second=settings.auth_failure_rate_per_second,
            auth_failure_burst=settings.auth_failure_burst,
            max_upload_bytes=settings.max_upload_bytes,
            public_base_url=settings.public_base_url,
        )


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
    # By provider account, retired ones built on demand (providers/accounts.py).
    app.state.adapters = ProviderAccounts(adapters or {})
    app.state.api_settings = config
    app.state.rate_limit = TenantRateLimit(config.api_rate_per_second, config.api_rate_burst)
    app.state.auth_failures = AuthFailures(
        config.auth_failure_rate_per_second, config.auth_failure_burst
    )
    app.state.upload_slots = UploadSlots(config.uploads_per_tenant)
    for router in ROUTERS:
        app.include_router(router)
    # No /metrics here: it names every tenant. `tidings serve --metrics-port`
    # serves it on a listener of its own (observability.metrics).
    app.include_router(
        console_router(tidings.runtime, public_base_url=config.public_base_url), prefix="/console"
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
