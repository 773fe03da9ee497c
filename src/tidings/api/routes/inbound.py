"""Inbound messages from recipients: STOP opts out, START opts back in,
before any further send. Authenticated by the provider's signature; the
tenant is named in the URL the provider is configured with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel

from tidings.api.auth import engine
from tidings.api.openapi import responses
from tidings.api.problems import InvalidWebhook, InvalidWebhookSignature
from tidings.api.routes.webhooks import _ANY_BODY, webhook_request
from tidings.client import Tidings
from tidings.domain.errors import InvalidInput, NotFound
from tidings.providers.base import (
    InvalidSignature,
    ProviderAdapter,
    ProviderConfigError,
    ProviderError,
    WebhookRequest,
)

router = APIRouter(prefix="/v1/inbound", tags=["webhooks"])


class InboundHandled(BaseModel):
    keyword: str


@router.post(
    "/{provider}",
    responses=responses(400, 401, 404, 422, auth=False),
    openapi_extra=_ANY_BODY,
    summary="A recipient's inbound SMS; STOP and START update the opt-out list",
)
def receive_inbound(
    provider: Annotated[str, Path(examples=["simulator"])],
    received: Annotated[WebhookRequest, Depends(webhook_request)],
    root: Annotated[Tidings, Depends(engine)],
    request: Request,
    tenant: Annotated[str, Query(min_length=1, max_length=200)] = "default",
) -> InboundHandled:
    adapters: Mapping[str, ProviderAdapter] = request.app.state.adapters
    adapter = adapters.get(provider)
    if adapter is None:
        raise NotFound(f"no provider named {provider!r} is configured")
    try:
        message = adapter.parse_inbound(received)
    except InvalidSignature as exc:
        raise InvalidWebhookSignature(str(exc)) from None
    except ProviderConfigError as exc:
        raise NotFound(str(exc)) from None
    except ProviderError as exc:
        raise InvalidWebhook(str(exc)) from None
    try:
        keyword = root.for_tenant(tenant).handle_inbound(
            message.sender, message.text, source=f"inbound:{provider}"
        )
    except InvalidInput:
        raise InvalidWebhook("the sender is not a valid phone number") from None
    return InboundHandled(keyword=keyword.value)
