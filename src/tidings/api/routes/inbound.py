"""Inbound messages from recipients: STOP opts out, START opts back in,
before any further send. Authenticated by the provider's signature.

The tenants they act for come from configuration, never from the request:
a query parameter is not covered by every provider's signature, and a
forged one opted numbers out for any tenant it named, creating the tenant
as it went. An inbound message never creates a tenant.

Which tenants: those that send from the number the message was sent to, on
the account it came through (`TIDINGS_SENDER_NUMBERS`, domain/senders.py):
providers enforce STOP per sender number, so every tenant sending from it
is opted out, and a tenant with a number of its own only by messages to
that number. A number nobody is named with falls back to
`TIDINGS_INBOUND_TENANT` (else the server's `TIDINGS_TENANT`), as before
(issue #39, finding 6).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Depends, Path, Request

from tidings.api.auth import engine
from tidings.api.openapi import responses
from tidings.api.problems import InvalidWebhook, InvalidWebhookSignature
from tidings.api.routes.webhooks import ANY_BODY, not_configured, webhook_request
from tidings.api.schemas.events import InboundHandled
from tidings.client import Tidings
from tidings.domain.errors import InvalidInput, NotFound
from tidings.domain.senders import SenderNumbers
from tidings.providers.base import ProviderAdapter
from tidings.providers.errors import InvalidSignature, ProviderConfigError, ProviderError
from tidings.providers.messages import WebhookRequest

if TYPE_CHECKING:
    from tidings.api.settings import ApiSettings

router = APIRouter(prefix="/v1/inbound", tags=["webhooks"])


@router.post(
    "/{provider}",
    responses=responses(400, 401, 404, 422, auth=False),
    openapi_extra=ANY_BODY,
    summary="A recipient's inbound SMS; STOP and START update the opt-out list",
)
def receive_inbound(
    provider: Annotated[
        str,
        Path(
            examples=["simulator"],
            description="The provider adapter's name (twilio, aws_sms, sns, vonage, ses, "
            "sendgrid, postmark, ...)",
        ),
    ],
    received: Annotated[WebhookRequest, Depends(webhook_request)],
    root: Annotated[Tidings, Depends(engine)],
    request: Request,
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
        raise not_configured(adapter, exc) from None
    except ProviderError as exc:
        raise InvalidWebhook(str(exc)) from None
    found = _inbound_tenants(root, request, adapter.account, message.to)
    try:
        keywords = [
            root.for_tenant(tenant).handle_inbound(
                message.sender, message.text, source=f"inbound:{provider}"
            )
            for tenant in found
        ]
    except InvalidInput:
        raise InvalidWebhook("the sender is not a valid phone number") from None
    return InboundHandled(keyword=keywords[0].value)


def _inbound_tenants(root: Tidings, request: Request, account: str, to: str | None) -> list[str]:
    settings: ApiSettings = request.app.state.api_settings
    fallback = settings.inbound_tenant or root.tenant
    asked = request.query_params.get("tenant")
    if asked is not None and asked != fallback:
        # Old provider configurations named the tenant in the URL: say why
        # it is refused rather than act for a tenant the caller did not mean.
        raise InvalidWebhook("the inbound tenant is configured on the server, not in the URL")
    named = SenderNumbers.parse(settings.sender_numbers).tenants(account, to, fallback)
    found = root.existing_tenants(named)
    if not found:
        raise NotFound("no tenant is configured for inbound messages to that number")
    return found
