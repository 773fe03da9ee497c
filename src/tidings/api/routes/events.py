"""The application's event feed: state changes it cares about, by cursor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from tidings.api.auth import Reader
from tidings.api.openapi import responses
from tidings.api.schemas import EventOut, EventPage
from tidings.store import events
from tidings.store.events import MAX_LIMIT, START, Cursor

router = APIRouter(prefix="/v1/events", tags=["events"])


@router.get(
    "",
    responses=responses(422),
    summary="Events after a cursor, oldest first; an empty page means caught up",
)
def list_events(
    caller: Reader,
    after: Annotated[
        str | None, Query(max_length=200, description="`next` of the last page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
) -> EventPage:
    cursor = Cursor.decode(after) if after else START
    with caller.tidings.db.transaction() as conn:
        page = events.page(conn, caller.tenant, cursor, limit)
    return EventPage(
        items=[EventOut(**{k: row[k] for k in EventOut.model_fields}) for row in page.items],
        next=page.next.encode(),
        has_more=len(page.items) == limit,
    )
