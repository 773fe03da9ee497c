"""Contacts: destinations in (stored encrypted), never echoed back out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tidings.api.schemas.common import JsonObject, Moment, RequestModel, Text


class ConsentIn(RequestModel):
    channel: Literal["sms", "email"]
    purpose: Text = Field(min_length=1, max_length=200)
    source: Text = Field(min_length=1, max_length=200)
    captured_at: Moment
    evidence_ref: Text | None = Field(default=None, max_length=500)
    revoked_at: Moment | None = None


class ContactIn(RequestModel):
    phone: Text | None = Field(default=None, max_length=32)
    email: Text | None = Field(default=None, max_length=254)
    timezone: Text | None = Field(default=None, max_length=64)
    locale: Text | None = Field(default=None, max_length=35)
    preferences: JsonObject = Field(default_factory=dict)
    consents: list[ConsentIn] = Field(default_factory=list, max_length=100)


class ContactOut(BaseModel):
    ref: str
    has_phone: bool
    has_email: bool
    timezone: str | None
    locale: str | None
    preferences: dict[str, Any]
    consents_recorded: int


class OptOutIn(RequestModel):
    channel: Literal["sms", "email"]


class OptOutOut(BaseModel):
    ref: str
    channel: str
    opted_out: bool
