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
    id: int
    type: str
    intent_id: UUID | None
    job_id: UUID | None
    payload: dict[str, Any]
    created_at: datetime


class EventPage(BaseModel):
    items: list[EventOut]
    next: str = Field(description="Opaque cursor: pass it as `after` to continue")
    has_more: bool = Field(description="True when the page was full: ask again at once")


class Health(BaseModel):
    status: Literal["ok"]


class InboundHandled(BaseModel):
    keyword: str


class EventWebhookIn(RequestModel):
    url: Text = Field(min_length=8, max_length=2000, pattern=r"^https?://")
    secret: Text = Field(min_length=16, max_length=200)


class EventWebhookOut(BaseModel):
    url: str | None
    enabled: bool
