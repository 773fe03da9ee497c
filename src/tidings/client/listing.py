"""The client's listing of intents: find them by the caller's key, a
recipient, an event class, a state, a correlation id or when they were
created, a page at a time (docs/finding.md)."""

from __future__ import annotations

from datetime import datetime

from tidings.client.base import ClientBase
from tidings.domain.intent import Intent
from tidings.domain.listing import Cursor, IntentFilter, Page, page_size
from tidings.store import intent_listing

__all__ = ["IntentFilter", "ListingMethods", "Page"]


class ListingMethods(ClientBase):
    def list_intents(
        self,
        *,
        idempotency_key: str | None = None,
        recipient_ref: str | None = None,
        event_class: str | None = None,
        state: str | None = None,
        correlation_id: str | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Intent]:
        """This tenant's intents matching every given filter, newest first;
        pass the page's `next_cursor` back for the next page (None: the last).
        Intents created meanwhile never shift a page: they come before the
        first one."""
        which = IntentFilter(
            idempotency_key,
            recipient_ref,
            event_class,
            state,
            correlation_id,
            created_from,
            created_to,
        )
        size = page_size(limit)
        after = Cursor.decode(cursor) if cursor else None
        with self.db.transaction() as conn:
            return intent_listing.list_intents(conn, self.tenant, which, after, size)
