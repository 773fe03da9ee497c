"""Provider status webhooks, authenticated by the provider's signature.

No API key here: the adapter registered under the path's provider name
verifies the request exactly as received (full URL with query, headers,
raw body). A request that fails verification records nothing. Verified
observations are applied in one transaction, so a failure leaves nothing
half-applied and the provider's retry starts clean; deduplication makes
that retry (and any replay) harmless.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request

from tidings.api.auth import engine
from tidings.api.openapi import responses
from tidings.api.problems import InvalidWebhook, InvalidWebhookSignature
from tidings.api.schemas import WebhookReceived
from tidings.client import Tidings
from tidings.dispatch.observe import apply_observation
from tidings.domain.errors import NotFound
from tidings.providers.base import (
    InvalidSignature,
    Observation,
    ProviderAdapter,
    ProviderConfigError,
    ProviderError,
    WebhookRequest,
)

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])

# Providers post JSON or forms; the body is read raw either way.
_ANY_BODY: dict[str, Any] = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {"schema": {}},
            "application/x-www-form-urlencoded": {"schema": {"type": "object"}},
        },
    }
}


async def webhook_request(request: Request) -> WebhookRequest:
    """The request as the provider signed it. Behind a proxy, set the public
    base URL in the API settings: signatures like Twilio's cover the URL."""
    base: str | None = request.app.state.api_settings.public_base_url
    url = str(request.url)
    if base:
        url = (
            base.rstrip("/")
            + request.url.path
            + (f"?{request.url.query}" if request.url.query else "")
        )
    return WebhookRequest(
        method=request.method,
        url=url,
        headers=dict(request.headers),
        body=await request.body(),
        query=dict(request.query_params),
    )


@router.post(
    "/{provider}",
    responses=responses(400, 401, 404, auth=False),
    openapi_extra=_ANY_BODY,
    summary="A provider's status callback; 401 and nothing recorded unless signed",
)
def receive_webhook(
    provider: Annotated[str, Path(examples=["simulator"])],
    received: Annotated[WebhookRequest, Depends(webhook_request)],
    root: Annotated[Tidings, Depends(engine)],
    request: Request,
) -> WebhookReceived:
    adapters: Mapping[str, ProviderAdapter] = request.app.state.adapters
    adapter = adapters.get(provider)
    if adapter is None:
        raise NotFound(f"no webhook receiver for provider {provider!r}")
    observations = _verify(adapter, received)
    now = root.clock.now()
    with root.db.transaction() as conn:
        effects = [apply_observation(conn, obs, "webhook", now) for obs in observations]
    return WebhookReceived(received=len(observations), effects=effects)


def _verify(adapter: ProviderAdapter, received: WebhookRequest) -> list[Observation]:
    try:
        return list(adapter.verify_webhook(received))
    except InvalidSignature:
        raise InvalidWebhookSignature("the webhook signature could not be verified") from None
    except ProviderConfigError:
        raise  # our misconfiguration, not the caller's fault: a logged 500
    except ProviderError as exc:
        raise InvalidWebhook(f"signed, but not understood: {exc}") from None
