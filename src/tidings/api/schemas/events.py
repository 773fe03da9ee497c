"""Webhook receipts, inbound messages, the event feed, its webhook and health."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from tidings.api.schemas.common import RequestModel, Text


class WebhookReceived(BaseModel):
    received: int = Field(description="Observations in the request")
    effects: list[str] = Field(description="What each did: duplicate, unmatched, intent_...")


class EventOut(BaseModel):
    id: int = Field(description="The event's position in the feed")
    type: str = Field(
        description="intent.delivered, intent.expired, offer.released, intent.canceled, "
        "intent.suppressed, intent.no_permitted_channel, intent.failed or "
        "intent.unknown"
    )
    intent_id: UUID | None = Field(
        description="The intent it is about; null for an event about no intent"
    )
    job_id: UUID | None = Field(description="The intent's job; null when it is not a job's")
    payload: dict[str, Any] = Field(
        description="The intent as it changed: id, idempotency_key, state, event_class, channel, "
        "code, cancel_reason, correlation_id, version, at"
    )
    created_at: datetime = Field(description="When it was recorded (UTC)")


class EventPage(BaseModel):
    items: list[EventOut] = Field(description="The events after the cursor, oldest first")
    next: str = Field(description="Opaque cursor: pass it as `after` to continue")
    has_more: bool = Field(description="True when the page was full: ask again at once")


class Health(BaseModel):
    status: Literal["ok"] = Field(description="ok when the API answers")


class InboundHandled(BaseModel):
    keyword: str = Field(description="What the reply was read as: stop, start or none")


class EventWebhookIn(RequestModel):
    url: Text = Field(
        min_length=8,
        max_length=2000,
        pattern=r"^https?://",
        description="Where to POST events: http(s), a public address",
    )
    secret: Text = Field(
        min_length=16,
        max_length=200,
        description="The key that signs every push (X-Tidings-Signature), 16 to 200 characters",
    )


class EventWebhookOut(BaseModel):
    url: str | None = Field(description="Where events go; null when pushing is off")
    enabled: bool = Field(description="Whether events are pushed")
