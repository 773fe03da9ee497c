"""Whose texts an inbound message is about: the tenants sending from its number."""

from __future__ import annotations

import pytest

from tidings.domain.errors import InvalidInput
from tidings.domain.senders import SenderNumbers, sender_number

SENDERS = SenderNumbers.parse(
    {"twilio": {"a": "+1 (415) 555-0100", "b": "+14155550200", "c": "+14155550100"}}
)


def test_numbers_are_compared_as_providers_write_them() -> None:
    assert sender_number("+1 (415) 555-0100") == "+14155550100"
    assert sender_number("12345") == "12345"  # a short code
    for bad in ("", "tidings", "+0123456789", "1", "+1415555010012345"):
        with pytest.raises(InvalidInput):
            sender_number(bad)


def test_an_inbound_message_is_for_every_tenant_sending_from_its_number() -> None:
    assert SENDERS.tenants("twilio", "+14155550100", "a") == ["a", "c"]
    assert SENDERS.tenants("twilio", "+1 415 555 0200", "a") == ["b"]
    assert SENDERS.number("twilio", "b") == "+14155550200"
    assert SENDERS.number("twilio", "d") is None and SENDERS.number("vonage", "a") is None


def test_a_number_nobody_sends_from_falls_back_unless_the_fallback_has_its_own() -> None:
    assert SENDERS.tenants("twilio", "+14155550999", "d") == ["d"]
    assert SENDERS.tenants("twilio", "+14155550999", "a") == []
    assert SENDERS.tenants("twilio", "not a number", "a") == []
    assert SENDERS.tenants("twilio", None, "a") == ["a"]  # the message named no number
    assert SENDERS.tenants("vonage", "+14155550100", "a") == ["a"]  # no mapping there
