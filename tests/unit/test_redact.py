"""The one redactor: e-mail addresses and phone numbers in text, sensitive keys in values.

It covers what logs need and what provider payloads need (destinations under
the keys providers use, international numbers with irregular separators).
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.domain.redaction import (
    EMAIL_PLACEHOLDER,
    PHONE_PLACEHOLDER,
    REDACTED,
    is_drop_key,
    redact_text,
    redact_value,
)

# ------------------------------------------------------------------ examples


@pytest.mark.parametrize(
    "address",
    [
        "bob@example.com",
        "Bob.Smith+report@mail.example.co.uk",
        "o'brien@example.ie",
        "x_y-z@sub-domain.example.museum",
        "user@xn--bcher-kva.example",
        "zoë@bücher.de",
        "john%40example.com",
    ],
)
def test_emails_are_redacted(address: str) -> None:
    out = redact_text(f"sent to {address}, ok")
    assert address not in out
    assert out == f"sent to {EMAIL_PLACEHOLDER}, ok"


def test_email_inside_url_is_redacted() -> None:
    out = redact_text("GET https://app.example/reset?u=bob@example.com&x=1")
    assert "bob@example.com" not in out and "example.com" not in out


@pytest.mark.parametrize("plus", ["%2B", "%2b"])
def test_a_number_in_a_query_string_is_redacted_with_its_plus_encoded(plus: str) -> None:
    """httpx logs each request's URL: a provider's list search by number
    (`Messages.json?To=%2B14155550100`) wrote the number into every worker's
    log until its encoded plus was read as one."""
    line = f'HTTP Request: GET http://sim/Messages.json?To={plus}14155550100&PageSize=100 "200 OK"'
    out = redact_text(line)
    assert "4155550100" not in out
    assert out == line.replace(f"{plus}14155550100", PHONE_PLACEHOLDER)
    assert redact_text(f"to={plus}44%207700%20900123") == f"to={PHONE_PLACEHOLDER}"


@pytest.mark.parametrize(
    "number",
    [
        "+15551234567",
        "+4930123456789",
        "+1 (555) 123-4567",
        "+49 30 1234 5678",
        "+44 7700 900123",
        "+33 6 12 34 56 78",
        "(555) 123-4567",
        "555-123-4567",
        "555.123.4567",
        "555 123 4567",
        "555-1234",
        "030 1234567",
        "030-123-4567",
        "0171/1234567",
        "07700 900123",
        "0049 30 12345678",
        "+49 (0)30 1234567",
    ],
)
def test_phone_numbers_are_redacted(number: str) -> None:
    assert redact_text(f"call {number} now") == f"call {PHONE_PLACEHOLDER} now"
    assert redact_text(number) == PHONE_PLACEHOLDER
    assert redact_text(f"tel:{number}.") == f"tel:{PHONE_PLACEHOLDER}."


@pytest.mark.parametrize(
    "text",
    [
        "550e8400-e29b-41d4-a716-446655440000",
        "12345678-1234-1234-1234-123456789012",
        "2024-05-01",
        "2024-05-01T12:30:45Z",
        "2024-05-01T12:30:45.123456+00:00",
        "2024-05-01 12:30:45,123",
        "0001-01-01T00:00:00-05:30",
        "waitlist:771:1842:offer:1",
        "report:8421:revision:7:email",
        "report:8421:revision:7:email:attempt:2",
        "attempt 3 of 5",
        "attempts=12",
        "intent 184211 job 77",
        "1717171717",
        "1717171717123",
        "took 1234.5678 ms",
        "0.00123456",
        "10.0.12.254",
        "127.0.0.1:54321",
        "01.05.2024",
        "05/01/2024",
        "2024/05/01",
        "k-1234-5678",
        "SM0123456789abcdef0123456789abcdef",
        "HX1234567-890",
        "0100018f3c2b4a5e-1d2c3b4a-5e6f-7a8b-9c0d-1e2f3a4b5c6d-000000",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "v1.2.3",
        "-1234567",
        "12:30:45",
        "no personal data here",
        "",
    ],
)
def test_ids_and_timestamps_survive(text: str) -> None:
    assert redact_text(text) == text
    assert redact_text(f"x {text} y") == f"x {text} y"


def test_placeholders_are_stable() -> None:
    once = redact_text("a@b.co +15551234567")
    assert redact_text(once) == once == f"{EMAIL_PLACEHOLDER} {PHONE_PLACEHOLDER}"


def test_long_digit_strings_are_fast() -> None:
    # Possessive matching: no catastrophic backtracking on adversarial input.
    text = ("1-" * 5000) + "x" + ("1234567890" * 2000) + "a"
    redact_text(text)


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    ["a" * 50_000 + "@", "a." * 50_000 + "@x", "%40" * 30_000, "a@" + "b-" * 30_000 + "!"],
)
def test_adversarial_email_like_input_is_linear(text: str) -> None:
    redact_text(text)


# ------------------------------------------------------------------ redact_value


def test_redact_value_recurses_and_drops_keys() -> None:
    ident = uuid.uuid4()
    now = dt.datetime(2025, 5, 1, 12, 0, tzinfo=dt.UTC)
    payload = {
        "to": "+15551234567",
        "Email": "bob@example.com",
        "body": "your code",
        "reset_link": "https://x/r?t=abc",
        "access_token": "abc",
        "nested": {
            "note": "reply from bob@example.com via 555-123-4567",
            "items": ["a@b.co", 3, 2.5, None, True, ("c@d.io",)],
            "phone": {"e164": "+15551234567"},
        },
        "attempt": 2,
        "intent_id": ident,
        "at": now,
        "amount": Decimal("1.25"),
        "raw": b"from x@y.org",
        "idempotency_key": "waitlist:771:1842:offer:1",
        "bob@example.com": "key is an address",
    }
    out = redact_value(payload)
    assert out["to"] == REDACTED
    assert out["Email"] == REDACTED
    assert out["body"] == REDACTED
    assert out["reset_link"] == REDACTED
    assert out["access_token"] == REDACTED
    assert out["nested"]["note"] == f"reply from {EMAIL_PLACEHOLDER} via {PHONE_PLACEHOLDER}"
    assert out["nested"]["items"] == [EMAIL_PLACEHOLDER, 3, 2.5, None, True, (EMAIL_PLACEHOLDER,)]
    assert out["nested"]["phone"] == REDACTED
    assert out["attempt"] == 2
    assert out["intent_id"] is ident
    assert out["at"] is now
    assert out["amount"] == Decimal("1.25")
    assert out["raw"] == f"from {EMAIL_PLACEHOLDER}"
    assert out["idempotency_key"] == "waitlist:771:1842:offer:1"
    assert out[EMAIL_PLACEHOLDER] == "key is an address"
    # the input is not modified
    assert payload["to"] == "+15551234567"


def test_redact_value_other_objects_become_redacted_text() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing for bob@example.com"

    assert redact_value(Thing()) == f"thing for {EMAIL_PLACEHOLDER}"
    assert redact_value(ValueError("bad +15551234567")) == f"bad {PHONE_PLACEHOLDER}"


def test_redact_value_custom_drop_keys() -> None:
    assert redact_value({"body": "x", "secret_sauce": "y"}, drop_keys={"Secret_Sauce"}) == {
        "body": "x",
        "secret_sauce": REDACTED,
    }
    assert redact_value({"a": "1"}, drop_keys=lambda k: k == "a") == {"a": REDACTED}


def test_drop_keys() -> None:
    for key in ("body", "rendered", "token", "reset_link", "link", "password", "destination"):
        assert is_drop_key(key)
    for key in ("to", "phone", "email", "PHONE", "refresh_token", "db_password"):
        assert is_drop_key(key)
    for key in ("idempotency_key", "token_expires_at", "template_revision", "channel"):
        assert not is_drop_key(key)


# ------------------------------------------------------------------ properties

_sep = st.sampled_from([" ", "\n", "\t", " (", ") ", ", ", ": ", " <", "> ", '"', "'"])
_noise = st.text(max_size=40)


@st.composite
def e164(draw: st.DrawFn) -> str:
    first = draw(st.integers(1, 9))
    rest = draw(st.text("0123456789", min_size=6, max_size=14))
    return f"+{first}{rest}"


@st.composite
def national(draw: st.DrawFn) -> str:
    digits = draw(st.text("0123456789", min_size=7, max_size=12))
    style = draw(st.sampled_from(["-", " ", ".", "/", "paren"]))
    if style == "paren":
        return f"({digits[:3]}) {digits[3:6]}-{digits[6:]}"
    if style == "/":
        return f"0{digits[1:4]}/{digits[4:]}"
    # groups of 3 then the rest, like 555-123-4567 or 030 123 4567
    head, mid, tail = digits[:3], digits[3:6], digits[6:]
    return style.join(part for part in (head, mid, tail) if part)


def embed(prefix: str, sep1: str, needle: str, sep2: str, suffix: str) -> str:
    return f"{prefix}{sep1}{needle}{sep2}{suffix}"


@settings(max_examples=300)
@given(_noise, _sep, st.emails(), _sep, _noise)
def test_generated_emails_never_survive(
    prefix: str, s1: str, address: str, s2: str, suffix: str
) -> None:
    out = redact_text(embed(prefix, s1, address, s2, suffix))
    assert address not in out
    assert "@" + address.split("@", 1)[1] not in out


@settings(max_examples=300)
@given(_noise, _sep, e164(), _sep, _noise)
def test_generated_e164_never_survives(
    prefix: str, s1: str, number: str, s2: str, suffix: str
) -> None:
    out = redact_text(embed(prefix, s1, number, s2, suffix))
    assert number not in out
    assert number[1:] not in out


@settings(max_examples=300)
@given(_noise, _sep, national(), _sep, _noise)
def test_generated_national_numbers_never_survive(
    prefix: str, s1: str, number: str, s2: str, suffix: str
) -> None:
    out = redact_text(embed(prefix, s1, number, s2, suffix))
    assert number not in out


@settings(max_examples=300)
@given(_noise, _sep, st.uuids(), _sep, _noise)
def test_uuids_always_survive(prefix: str, s1: str, value: uuid.UUID, s2: str, suffix: str) -> None:
    for text in (str(value), str(value).upper()):
        assert text in redact_text(embed(prefix, s1, text, s2, suffix))


@settings(max_examples=300)
@given(
    _noise,
    _sep,
    st.one_of(
        st.datetimes().map(lambda d: d.isoformat()),
        st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
        st.datetimes(timezones=st.just(dt.UTC)).map(lambda d: d.isoformat().replace("+00:00", "Z")),
        st.datetimes().map(lambda d: d.isoformat(sep=" ", timespec="seconds")),
        st.dates().map(lambda d: d.isoformat()),
    ),
    _sep,
    _noise,
)
def test_iso_timestamps_always_survive(
    prefix: str, s1: str, stamp: str, s2: str, suffix: str
) -> None:
    assert stamp in redact_text(embed(prefix, s1, stamp, s2, suffix))


@settings(max_examples=200)
@given(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
    st.sampled_from(["waitlist", "report", "reset", "job"]),
)
def test_idempotency_keys_survive(numbers: list[int], kind: str) -> None:
    key = ":".join([kind, *(str(n) for n in numbers), "attempt", "1"])
    assert redact_text(f"key={key}") == f"key={key}"


@given(st.text(max_size=200))
def test_redact_text_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


# ------------------------------------------------------------ provider payloads

phones = st.from_regex(r"\+[1-9]\d{7,14}", fullmatch=True)


@given(email=st.emails(), phone=phones)
def test_destinations_inside_free_text_are_redacted(email: str, phone: str) -> None:
    raw = {"note": f"sent to {email} and {phone}", "nested": [{"msg": f"<{email}>"}]}
    text = repr(redact_value(raw))
    assert email not in text and phone not in text


@pytest.mark.parametrize(
    "key",
    [
        "to",
        "To",
        "phone_number",
        "phone-number",
        "DestinationPhoneNumber",
        "PhoneNumber",
        "email",
        "recipient",
        "address",
    ],
)
def test_provider_destination_keys_are_dropped_whatever_the_value(key: str) -> None:
    assert redact_value({key: "15551234567", "id": "SM1"}) == {key: REDACTED, "id": "SM1"}


@pytest.mark.parametrize("number", ["+49  30 1234 5678", "+1--555--123--4567", "+4930 - 12345678"])
def test_international_numbers_with_irregular_separators_are_redacted(number: str) -> None:
    out = redact_text(f"call {number} now")
    assert not any(ch.isdigit() for ch in out), out
