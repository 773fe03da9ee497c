"""Contacts: destinations in (stored encrypted), never echoed back out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tidings.api.schemas.common import JsonObject, Moment, RequestModel, Text


class ConsentIn(RequestModel):
    channel: Literal["sms", "email"] = Field(description="The channel consented to")
    purpose: Text = Field(
        min_length=1,
        max_length=200,
        description="The message purpose consented to, as the policy names it",
    )
    source: Text = Field(
        min_length=1,
        max_length=200,
        description="Where the consent was given (a sign-up form, ...)",
    )
    captured_at: Moment = Field(description="When it was given, with a UTC offset")
    evidence_ref: Text | None = Field(
        default=None,
        max_length=500,
        description="Your reference to the proof of consent; null: none",
    )
    revoked_at: Moment | None = Field(
        default=None, description="When it was withdrawn; null while it stands"
    )


class ContactIn(RequestModel):
    phone: Text | None = Field(
        default=None,
        max_length=32,
        description="E.164 phone number, stored encrypted; null: none (replaces the one stored)",
    )
    email: Text | None = Field(
        default=None,
        max_length=254,
        description="E-mail address, stored encrypted; null: none (replaces the one stored)",
    )
    timezone: Text | None = Field(
        default=None, max_length=64, description="IANA time zone for local send windows; null: none"
    )
    locale: Text | None = Field(
        default=None,
        max_length=35,
        description="BCP 47 language tag for the template's locale; null: none",
    )
    preferences: JsonObject = Field(
        default_factory=dict,
        description="Free-form preferences; `channels` lists the channels accepted, in order",
    )
    consents: list[ConsentIn] = Field(
        default_factory=list, max_length=100, description="Consent evidence to record, at most 100"
    )


class ContactOut(BaseModel):
    ref: str = Field(description="Your id for the contact")
    has_phone: bool = Field(description="Whether a phone number is stored (never returned)")
    has_email: bool = Field(description="Whether an e-mail address is stored (never returned)")
    timezone: str | None = Field(description="IANA time zone; null: none")
    locale: str | None = Field(description="BCP 47 language tag; null: none")
    preferences: dict[str, Any] = Field(description="The preferences, as stored")
    consents_recorded: int = Field(description="Consent records given in this request")


class OptOutIn(RequestModel):
    channel: Literal["sms", "email"] = Field(description="The channel to opt out of")


class OptOutOut(BaseModel):
    ref: str = Field(description="The contact's id")
    channel: str = Field(description="The channel opted out of")
    opted_out: bool = Field(description="True: the destination gets nothing more on that channel")
