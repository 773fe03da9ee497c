"""The E.164 fast path reads every number exactly as the full parse does."""

from __future__ import annotations

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.domain.phones import PhoneError, read_phone, read_uncached


def examples() -> list[str]:
    found = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        for kind in range(12):  # every PhoneNumberType
            number = phonenumbers.example_number_for_type(region, kind)
            if number is not None:
                found.append(
                    phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
                )
    for code in phonenumbers.COUNTRY_CODES_FOR_NON_GEO_REGIONS:
        number = phonenumbers.example_number_for_non_geo_entity(code)
        if number is not None:
            found.append(phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164))
    return found


def test_every_example_number_reads_the_same_both_ways() -> None:
    numbers = examples()
    assert len(numbers) > 1000  # the check below is not vacuous
    differ = [n for n in numbers if read_uncached(n) != read_uncached(n, fast=False)]
    assert differ == []


@settings(max_examples=3000)
@given(st.from_regex(r"\+[0-9]{1,16}", fullmatch=True))
def test_any_plus_digits_string_reads_the_same_both_ways(raw: str) -> None:
    assert read_uncached(raw) == read_uncached(raw, fast=False)


def test_refusals_are_remembered_and_still_refused() -> None:
    for _ in range(2):
        with pytest.raises(PhoneError, match="not a valid phone number"):
            read_phone("+10000000000")
        with pytest.raises(PhoneError, match="not an international number"):
            read_phone("4155550123")
    long = "+1" + "4" * 200
    with pytest.raises(PhoneError):
        read_phone(long)


def test_italian_numbers_keep_their_leading_zero() -> None:
    assert read_phone("+390612345678")[:2] == ("+390612345678", "IT")
