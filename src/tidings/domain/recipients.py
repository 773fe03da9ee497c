"""Recipients as the caller describes them, validated before anything is stored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import phonenumbers

from tidings.domain.errors import InvalidInput


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


def parse_channel(value: object) -> Channel:
    try:
        return Channel(str(value))
    except ValueError:
        raise InvalidRecipient("channel", f"unknown channel {value!r}; use sms or email") from None


def normalize_phone(raw: str) -> tuple[str, str | None]:
    """E.164 and the destination country; only full international numbers."""
    try:
        number = phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException:
        raise InvalidRecipient("recipient.phone", "not an international number") from None
    if not phonenumbers.is_valid_number(number):
        raise InvalidRecipient("recipient.phone", "not a valid phone number")
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    return e164, phonenumbers.region_code_for_number(number)


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
        e164, country = normalize_phone(phone)
        return Recipient(ref, channel, e164, country, timezone, locale)
    email = data.get("email")
    if not isinstance(email, str):
        raise InvalidRecipient("recipient.email", "an e-mail needs an address")
    country = data.get("country")
    return Recipient(ref, channel, normalize_email(email), country, timezone, locale)
