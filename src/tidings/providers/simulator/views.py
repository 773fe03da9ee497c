"""How a simulated message reads under a profile: lookups and receipts in
the provider's words, with our reference where that provider echoes it.

Send requests and their answers stay in the simulator's own protocol (the
adapter under test speaks it); what changes with the profile is what the
provider tells back afterwards, which is what reconciliation depends on.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from tidings.providers.simulator.profiles import Echo, Profile

# Our reference inside the echoing field, in each provider's shape: SES
# tags are lists of values, AWS Context and Postmark Metadata are maps.
KEY_NAME = {
    "tags": "tidings_attempt",
    "context": "tidings_attempt",
    "Metadata": "tidings_key_0",
}


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def echo_value(profile: Profile, reference: str) -> Any:
    """The value placed at `profile.reference_field` in an event."""
    name = KEY_NAME.get(profile.reference_field)
    if name is None:
        return reference
    if profile.reference_field == "tags":
        return {name: [reference]}
    return {name: reference}


def echoed_reference(profile: Profile, body: dict[str, Any], query: dict[str, str]) -> str | None:
    """Our reference as a receipt (or lookup) of this profile carries it, if at all."""
    if profile.echo is Echo.CALLBACK_QUERY:
        found = query.get(profile.reference_field)
        return found if isinstance(found, str) and found else None
    if profile.echo is Echo.NONE:
        return None
    value = body.get(profile.reference_field)
    name = KEY_NAME.get(profile.reference_field)
    if name is not None:
        value = value.get(name) if isinstance(value, dict) else None
        if isinstance(value, list):
            value = value[0] if len(value) == 1 else None
    return value if isinstance(value, str) and value else None


def event_id(message_id: str, stage: str) -> str:
    # Derived from the transition, not the delivery: duplicates share the id.
    return "EV" + hashlib.sha256(f"{message_id}|{stage}".encode()).hexdigest()[:32]


def receipt_body(
    profile: Profile,
    message_id: str,
    reference: str,
    raw: tuple[str, str | None],
    at: float,
    stage: str,
) -> dict[str, Any]:
    status, code = raw
    body: dict[str, Any] = {
        "event_id": event_id(message_id, stage),
        "message_id": message_id,
        "status": status,
        "code": code,
        "occurred_at": iso(at),
    }
    if profile.echo is Echo.FIELD:
        body[profile.reference_field] = echo_value(profile, reference)
    return body


def lookup_view(
    profile: Profile,
    message_id: str,
    channel: str,
    reference: str,
    raw: tuple[str, str | None],
    updated_at: float,
    created_at: float,
) -> dict[str, Any]:
    status, code = raw
    view: dict[str, Any] = {
        "message_id": message_id,
        "channel": channel,
        "status": status,
        "code": code,
        "updated_at": iso(updated_at),
        "created_at": iso(created_at),
    }
    # Lookups name our reference only where the provider stores it with the
    # message (Postmark's Metadata; the ideal profile's key). Twilio's
    # message resource has no field for it.
    if profile.lookup_by_key or profile.reference_search:
        view[profile.reference_field] = echo_value(profile, reference)
    return view
