"""The one phone parser: recipients are validated and located by `tidings.domain.recipients`."""

from __future__ import annotations

import pytest

from tidings.domain.recipients import Channel, InvalidRecipient, normalize_phone, parse_recipient


def test_phone_numbers_are_normalised_to_e164_with_their_country() -> None:
    assert normalize_phone("+1 (212) 555-0123") == ("+12125550123", "US")
    assert normalize_phone("+49 151 12345678") == ("+4915112345678", "DE")


@pytest.mark.parametrize("raw", ["+49 123", "not a number", "030 901820"])
def test_invalid_phone_error_does_not_echo_the_number(raw: str) -> None:
    with pytest.raises(InvalidRecipient) as raised:
        normalize_phone(raw)
    assert raw not in str(raised.value)
    assert "123" not in str(raised.value) and "901820" not in str(raised.value)


def test_sms_recipient_carries_country_and_candidate_zones() -> None:
    recipient = parse_recipient(Channel.SMS, {"ref": "r1", "phone": "+1 212 555 0123"})
    assert recipient.destination == "+12125550123"
    assert recipient.country == "US"
    assert recipient.candidate_timezones == ("America/New_York",)


def test_known_timezone_replaces_candidate_zones() -> None:
    recipient = parse_recipient(
        Channel.SMS, {"ref": "r1", "phone": "+12125550123", "timezone": "Europe/Berlin"}
    )
    assert (recipient.timezone, recipient.candidate_timezones) == ("Europe/Berlin", ())
