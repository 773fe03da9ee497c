"""Reading a phone number, fast for the input producers actually send.

Parsing with `phonenumbers.parse` is the largest Python cost of creating
an SMS intent (docs/benchmarks.md). Most input is already E.164 (`+`
and digits): for it the number is built from its country code directly,
and then checked exactly as a parsed one is (`is_valid_number_for_region`),
so a number the fast path cannot vouch for takes the full parse instead of
being judged differently. Results, failures included, are remembered by
the raw string in a bounded LRU: a waitlist or a re-sent job repeats
numbers.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

import phonenumbers
from phonenumbers import timezone as phone_timezone

from tidings.domain.schedules import zone_or_none

_E164: Final = re.compile(r"\+([1-9][0-9]{6,14})")
CACHE_SIZE: Final = 65_536
MAX_CACHED_LENGTH: Final = 32


class PhoneError(ValueError):
    """Why a string is not a phone number tidings sends to."""


def read_uncached(raw: str, *, fast: bool = True) -> tuple[str, str, tuple[str, ...]] | str:
    """(E.164, region, zones) or the reason the string is refused."""
    quick = _fast(raw) if fast else None
    if quick is not None:
        number, region = quick
    else:
        try:
            number = phonenumbers.parse(raw, None)
        except phonenumbers.NumberParseException:
            return "not an international number"
        # `is_valid_number` is exactly these two steps; the region is asked
        # for once instead of twice (docs/benchmarks.md).
        found = phonenumbers.region_code_for_number(number)
        if found is None or not phonenumbers.is_valid_number_for_region(number, found):
            return "not a valid phone number"
        region = found
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    zones = tuple(
        z for z in phone_timezone.time_zones_for_number(number) if zone_or_none(z) is not None
    )
    return e164, region, zones


_read_cached = lru_cache(maxsize=CACHE_SIZE)(read_uncached)


def _fast(raw: str) -> tuple[phonenumbers.PhoneNumber, str] | None:
    """The number of an exact E.164 string, validated, when it is one the
    full parse would read the same way; None sends it to the full parse."""
    found = _E164.fullmatch(raw)
    if found is None:
        return None
    digits = found.group(1)
    for size in (1, 2, 3):
        code = int(digits[:size])
        if code in phonenumbers.COUNTRY_CODE_TO_REGION_CODE:
            national = digits[size:]
            # A leading zero (Italy and others) is a flag the parse sets;
            # leave such numbers to it.
            if not national or national[0] == "0":
                return None
            number = phonenumbers.PhoneNumber(country_code=code, national_number=int(national))
            region = phonenumbers.region_code_for_number(number)
            if region is None or not phonenumbers.is_valid_number_for_region(number, region):
                return None
            return number, region
    return None


def read_phone(raw: str) -> tuple[str, str, tuple[str, ...]]:
    """E.164, the region (a country, or "001" for a non-geographic number),
    and the time zones the number may be in; PhoneError when refused."""
    # Only strings a number can be are remembered: hostile long input
    # must not fill the cache.
    found = _read_cached(raw) if len(raw) <= MAX_CACHED_LENGTH else read_uncached(raw)
    if isinstance(found, str):
        raise PhoneError(found)
    return found
