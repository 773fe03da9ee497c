"""Contacts: destinations (stored encrypted), consent evidence, preferences,
opt-out. Responses never echo a destination."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from tidings.api.auth import Sender
from tidings.api.openapi import NOT_FOUND, WITH_BODY, responses
from tidings.api.schemas.common import Text
from tidings.api.schemas.contacts import ContactIn, ContactOut, OptOutIn, OptOutOut
from tidings.client.contacts import ConsentRecord

router = APIRouter(prefix="/v1/contacts", tags=["contacts"])
# Checked like any stored text: a NUL in the path reached PostgreSQL (a 500).
ContactRef = Annotated[
    Text, Path(min_length=1, max_length=200, description="Your id for the contact")
]


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
    row = caller.tidings.contact(ref)
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
    caller.tidings.opt_out_contact(ref, body.channel, source=caller.actor)
    return OptOutOut(ref=ref, channel=body.channel, opted_out=True)
