"""The signature a receiver checks on tidings' outgoing requests."""

from __future__ import annotations

import pytest

from tidings.platform.signing import sign, verify_signature

SECRET = "receiver-secret"


def test_a_fresh_signature_verifies() -> None:
    header = sign(SECRET, b"{}", 1_700_000_000)
    assert verify_signature(SECRET, header, b"{}", now=1_700_000_010)


@pytest.mark.parametrize("stamp", ["³", "١٧٠٠٠٠٠٠٠٠", "-5", ""])
def test_a_timestamp_that_is_not_ascii_digits_is_refused_not_raised(stamp: str) -> None:
    # "³" passes str.isdigit and then fails int(): a 500 instead of a refusal.
    given = sign(SECRET, b"{}", 1_700_000_000).split("v1=", 1)[1]
    assert not verify_signature(SECRET, f"t={stamp},v1={given}", b"{}", now=1_700_000_000)
