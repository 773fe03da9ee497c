"""The request edge's pure parts: the policy field, prefixes and keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tidings.domain.policy_document import PolicyError, parse_policy
from tidings.domain.request_limits import (
    PREFIX_DIGITS,
    RequestBound,
    UserTriggered,
    phone_prefix,
    request_keys,
    retry_after,
    scope_of,
    volume_key,
    volume_parts,
)
from tidings.policies import builtin_document

NOW = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)
RESETS = {
    "password_reset": {
        "destination": {"limit": 3, "per_seconds": 3600},
        "prefix": {"limit": 50, "per_seconds": 600},
    }
}


def _policy(user_triggered: Any) -> Any:
    return parse_policy({**builtin_document("default"), "user_triggered": user_triggered})


def test_the_policy_marks_classes_user_triggered_with_their_bounds() -> None:
    policy = _policy(RESETS)
    assert policy.user_triggered["password_reset"] == UserTriggered(
        RequestBound(3, 3600), RequestBound(50, 600)
    )
    assert "waitlist_offer" not in policy.user_triggered
    assert parse_policy(builtin_document("default")).user_triggered == {}


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ([], "user_triggered"),
        ({"password_reset": {}}, "user_triggered.password_reset"),
        ({"password_reset": {"country": {}}}, "user_triggered.password_reset"),
        ({"r": {"prefix": {"limit": 0, "per_seconds": 60}}}, "user_triggered.r.prefix.limit"),
        ({"r": {"prefix": {"limit": 1}}}, "user_triggered.r.prefix"),
        (
            {"r": {"destination": {"limit": 1, "per_seconds": 10**12}}},
            "user_triggered.r.destination.per_seconds",
        ),
    ],
)
def test_a_bad_field_is_named(value: Any, field: str) -> None:
    with pytest.raises(PolicyError) as refused:
        _policy(value)
    assert refused.value.field == field


@pytest.mark.parametrize(
    ("e164", "prefix"),
    [
        ("+14155550123", "+1415"),  # NANP: the area code
        ("+449098790123", "+44909"),  # UK premium rate
        ("+37190012345", "+371900"),  # Latvia premium rate
        ("+2250700000000", "+225070"),
        ("+881612345678", "+881612"),  # non-geographic
        ("14155550123", None),
        ("+12", None),
        ("+1-415", None),
    ],
)
def test_a_prefix_is_the_calling_code_and_the_next_digits(e164: str, prefix: str | None) -> None:
    assert phone_prefix(e164) == prefix
    if prefix is not None:
        assert len(prefix) - 1 <= 3 + PREFIX_DIGITS


def test_a_create_spends_one_key_per_bound_with_a_value() -> None:
    rule = _policy(RESETS).user_triggered["password_reset"]
    keys = request_keys(rule, "password_reset", "dh-1", "+44909")
    assert [(k.scope, k.key, k.limit, k.per_seconds, k.cost) for k in keys] == [
        ("request_destination", "password_reset:3600s:dh-1", 3, 3600, 1),
        ("request_prefix", "password_reset:600s:+44909", 50, 600, 1),
    ]
    assert [scope_of(k) for k in keys] == ["destination", "prefix"]
    assert keys[0].counted_for("t1") == "t1"  # every tenant counts its own
    # An e-mail has no prefix; a rule without a prefix bound counts none.
    assert [k.scope for k in request_keys(rule, "r", "dh", None)] == ["request_destination"]
    only_destination = UserTriggered(destination=RequestBound(1, 60))
    assert len(request_keys(only_destination, "r", "dh", "+44909")) == 1


def test_retry_after_is_the_rest_of_the_window_rounded_up() -> None:
    rule = UserTriggered(prefix=RequestBound(1, 60))
    (key,) = request_keys(rule, "r", "dh", "+44909")
    assert retry_after(key, NOW) == 30
    assert retry_after(key, NOW.replace(second=59, microsecond=500_000)) == 1


def test_volume_keys_read_back_even_with_a_bar_in_the_class() -> None:
    key = volume_key("reset|sms", "GB", "+44909")
    assert key.scope == "request_volume" and key.per_seconds == 3600
    assert volume_parts(key.key) == ("reset|sms", "GB", "+44909")
    assert volume_parts("no-bars") is None
