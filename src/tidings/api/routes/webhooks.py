"""Provider status webhooks, authenticated by the provider's signature.

No API key here: the adapter registered under the path's provider name
verifies the request exactly as received (full URL with query, headers,
raw body). A request that fails verification records nothing. Verified
observations are applied in one transaction, so a failure leaves nothing
half-applied and the provider's retry starts clean; deduplication makes
that retry (and any replay) harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, Path, Request

from tidings.api.openapi import responses
from tidings.api.problems import InvalidWebhook, InvalidWebhookSignature, Unavailable
from tidings.api.schemas.events import WebhookReceived
from tidings.domain.errors import NotFound
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import (
    InvalidSignature,
    ProviderConfigError,
    ProviderError,
    ProviderUnavailable,
)
from tidings.providers.messages import WebhookRequest
from tidings.providers.outcomes import Observation

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])
log = logging.getLogger("tidings.webhooks")


class Receipts(Protocol):
    """Applies verified observations in one transaction: what each did
    (duplicate, unmatched, intent_...). The app wires the workers' own
    handling in (api/app.py): receipts are the dispatch's business, which
    the client stands beside and does not reach."""

    def apply(self, observations: Sequence[Observation]) -> list[str]: ...


# Providers post JSON or forms; the body is read raw either way.
ANY_BODY: dict[str, Any] = {
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
    responses=responses(400, 401, 404, 503, auth=False),
    openapi_extra=ANY_BODY,
    summary="A provider's status callback; 401 and nothing recorded unless signed",
)
def receive_webhook(
    provider: Annotated[
        str,
        Path(
            examples=["simulator"],
            description="The provider adapter's name (twilio, aws_sms, sns, vonage, ses, "
            "sendgrid, postmark, ...)",
        ),
    ],
    received: Annotated[WebhookRequest, Depends(webhook_request)],
    request: Request,
) -> WebhookReceived:
    adapters: Mapping[str, ProviderAdapter] = request.app.state.adapters
    adapter = adapters.get(provider)
    if adapter is None:
        raise NotFound(f"no webhook receiver for provider {provider!r}")
    observations = _verify(adapter, received)
    receipts: Receipts = request.app.state.receipts
    effects = receipts.apply(observations)
    return WebhookReceived(received=len(observations), effects=effects)


def _verify(adapter: ProviderAdapter, received: WebhookRequest) -> list[Observation]:
    try:
        return list(adapter.verify_webhook(received))
    except InvalidSignature:
        raise InvalidWebhookSignature("the webhook signature could not be verified") from None
    except ProviderConfigError as exc:
        raise not_configured(adapter, exc) from None
    except ProviderUnavailable:
        # We could not check it (an SNS certificate out of reach): a 5xx, so
        # the provider retries, rather than a 4xx that drops its receipt.
        raise Unavailable("the webhook could not be verified just now; retry") from None
    except ProviderError as exc:
        raise InvalidWebhook(f"signed, but not understood: {exc}") from None


def not_configured(adapter: ProviderAdapter, exc: ProviderConfigError) -> NotFound:
    """A provider with no webhooks, or whose webhooks are not set up here (no
    secret, no pinned topic): nothing to receive, so 404 to the caller, and a
    warning for the operator, whose provider may be posting in vain."""
    log.warning(
        "webhook refused, not configured", extra={"provider": adapter.name, "why": str(exc)}
    )
    return NotFound(f"provider {adapter.name!r} has no webhook receiver configured")
