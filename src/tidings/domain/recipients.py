"""Recipients as the caller describes them, validated before anything is stored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tidings.domain.errors import InvalidInput
from tidings.domain.phones import PhoneError, read_phone


class Channel(StrEnum):
    SMS = "sms"
    EMAIL = "email"


class InvalidRecipient(InvalidInput):
    """Bad input about whom to notify; nothing is created."""


# Deliberately simple: the provider is the authority on deliverability; this
# only refuses what can never be an address.
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]{2,}$")


@dataclass(frozen=True)
class Recipient:
    ref: str
    channel: Channel
    destination: str  # normalized: E.164 phone or lower-cased e-mail
    country: str | None
    timezone: str | None
    locale: str | None
    # Where an SMS number may be when no time zone was given (quiet hours
    # must then hold in all of them); read from the number while parsing it.
    candidate_timezones: tuple[str, ...] = ()


def parse_channel(value: object) -> Channel:
    try:
        return Channel(str(value))
    except ValueError:
        raise InvalidRecipient("channel", f"unknown channel {value!r}; use sms or email") from None


def normalize_phone(raw: str) -> tuple[str, str | None]:
    """E.164 and the destination country; only full international numbers."""
    e164, region, _ = _valid_number(raw)
    return e164, region


def _valid_number(raw: str) -> tuple[str, str, tuple[str, ...]]:
    """E.164, the region (the country, or "001" for a non-geographic
    number) and the zones the number may be in (domain/phones.py)."""
    try:
        return read_phone(raw)
    except PhoneError as e:
        raise InvalidRecipient("recipient.phone", str(e)) from None


def normalize_email(raw: str) -> str:
    value = raw.strip()
    if len(value) > 254 or not _EMAIL.match(value):
        raise InvalidRecipient("recipient.email", "not a valid e-mail address")
    local, domain = value.rsplit("@", 1)
    return f"{local}@{domain.lower()}"


def check_timezone(value: object) -> str | None:
    if value is None:
        return None
    try:
        ZoneInfo(str(value))
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidRecipient("recipient.timezone", f"unknown time zone {value!r}") from None
    return str(value)


def parse_recipient(channel: Channel, data: Mapping[str, Any]) -> Recipient:
    ref = data.get("ref")
    if not isinstance(ref, str) or not ref:
        raise InvalidRecipient("recipient.ref", "a recipient reference is required")
    timezone = check_timezone(data.get("timezone"))
    locale = data.get("locale")
    if channel is Channel.SMS:
        phone = data.get("phone")
        if not isinstance(phone, str):
            raise InvalidRecipient("recipient.phone", "an SMS needs a phone number")
        e164, country, number_zones = _valid_number(phone)
        zones = () if timezone is not None else number_zones
        return Recipient(ref, channel, e164, country, timezone, locale, zones)
    email = data.get("email")
    if not isinstance(email, str):
        raise InvalidRecipient("recipient.email", "an e-mail needs an address")
    return Recipient(ref, channel, normalize_email(email), data.get("country"), timezone, locale)
