"""The application's event feed: state changes it cares about, by cursor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from tidings.api.auth import Admin, Reader
from tidings.api.openapi import WITH_BODY, responses
from tidings.api.schemas.events import EventOut, EventPage, EventWebhookIn, EventWebhookOut
from tidings.client.serving import MAX_EVENTS_PAGE

router = APIRouter(prefix="/v1/events", tags=["events"])


@router.get(
    "",
    responses=responses(422),
    summary="Events after a cursor, oldest first; an empty page means caught up",
)
def list_events(
    caller: Reader,
    after: Annotated[
        str | None,
        Query(
            max_length=200, description="`next` of the last page; omit to start at the beginning"
        ),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_EVENTS_PAGE, description="Most events in the page")
    ] = 100,
) -> EventPage:
    page = caller.tidings.events(after, limit)
    return EventPage(
        items=[EventOut(**{k: row[k] for k in EventOut.model_fields}) for row in page.items],
        next=page.next.encode(),
        has_more=len(page.items) == limit,
    )


@router.put(
    "/webhook",
    responses=responses(*WITH_BODY, 429, 504),
    summary="Push events to a URL, signed (X-Tidings-Signature), at least once, in order",
)
async def put_event_webhook(body: EventWebhookIn, caller: Admin) -> EventWebhookOut:
    """A URL whose host is or resolves to a loopback, private, link-local,
    metadata or other non-public address is refused (422 `URL_NOT_ALLOWED`),
    and checked again at every connection. A name that does not resolve in
    5 s answers 504 `DNS_TIMEOUT`; while two lookups of the tenant's names
    are still under way, another answers 429 `DNS_BUSY` at once."""
    # Async: the wait for the tenant's name server holds no API thread.
    await caller.tidings.set_event_webhook_async(body.url, body.secret)
    return EventWebhookOut(url=body.url, enabled=True)


@router.delete("/webhook", responses=responses(), summary="Stop pushing events")
def delete_event_webhook(caller: Admin) -> EventWebhookOut:
    caller.tidings.remove_event_webhook()
    return EventWebhookOut(url=None, enabled=False)
