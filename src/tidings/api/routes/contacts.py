"""Contacts: destinations (stored encrypted), consent evidence, preferences,
opt-out. Responses never echo a destination."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from tidings.api.auth import Sender
from tidings.api.openapi import NOT_FOUND, WITH_BODY, responses
from tidings.api.schemas.common import JsonObject, Moment, RequestModel, Text
from tidings.domain.errors import NotFound
from tidings.store import contacts
from tidings.store.contacts import ConsentRecord

router = APIRouter(prefix="/v1/contacts", tags=["contacts"])
# Checked like any stored text: a NUL in the path reached PostgreSQL (a 500).
ContactRef = Annotated[
    Text, Path(min_length=1, max_length=200, description="Your id for the contact")
]


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


@router.put(
    "/{ref}", responses=responses(*WITH_BODY), summary="Record a contact and consent evidence"
)
def put_contact(ref: ContactRef, body: ContactIn, caller: Sender) -> ContactOut:
    consents = [ConsentRecord(**c.model_dump()) for c in body.consents]
    caller.tidings.put_contact(
        ref,
        phone=body.phone,
        email=body.email,
        timezone=body.timezone,
        locale=body.locale,
        preferences=body.preferences,
        consents=consents,
    )
    with caller.tidings.db.transaction() as conn:
        row = contacts.contact(conn, caller.tenant, ref)
    assert row is not None
    return ContactOut(
        ref=ref,
        has_phone=row["phone_hash"] is not None,
        has_email=row["email_hash"] is not None,
        timezone=row["timezone"],
        locale=row["locale"],
        preferences=row["preferences"],
        consents_recorded=len(consents),
    )


@router.post(
    "/{ref}/opt-out",
    responses=responses(*WITH_BODY, NOT_FOUND),
    summary="Opt the contact's destination out of a channel",
)
def opt_out(ref: ContactRef, body: OptOutIn, caller: Sender) -> OptOutOut:
    t = caller.tidings
    with t.db.transaction() as conn:
        row = contacts.contact(conn, caller.tenant, ref)
        destination = (
            None if row is None else row["phone_hash" if body.channel == "sms" else "email_hash"]
        )
        if destination is None:
            raise NotFound(f"no {body.channel} destination for contact {ref}")
        contacts.opt_out(
            conn, caller.tenant, body.channel, destination, caller.actor, t.clock.now()
        )
    return OptOutOut(ref=ref, channel=body.channel, opted_out=True)
