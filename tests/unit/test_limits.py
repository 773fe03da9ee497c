"""Rate and spend limit math and the scope keys one message consumes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.limit_keys import limit_keys
from tidings.domain.limits import (
    SPEND_SCOPE,
    LimitKey,
    RateLimitRule,
    check,
    window_start,
)
from tidings.domain.policy_document import parse_policy
from tidings.policies import load_builtin

NOW = datetime(2026, 6, 1, 12, 0, 30, 500_000, tzinfo=UTC)
KEY = LimitKey("tenant", "tenant:sms:60s:t1", 10, 60, 1)


def _keys(**overrides: Any) -> list[LimitKey]:
    args: dict[str, Any] = {
        "channel": "sms",
        "recipient_ref": "member-1842",
        "destination_hash": "dh",
        "job_id": None,
        "event_class": "waitlist_offer",
        "tenant": "t1",
        "country": "DE",
        "provider_account": "twilio-main",
        "segments": 3,
    }
    return limit_keys(load_builtin("eu"), **(args | overrides))


def test_window_start_is_epoch_aligned() -> None:
    assert window_start(60, NOW) == datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    assert window_start(86400, NOW) == datetime(2026, 6, 1, tzinfo=UTC)


def test_room_left_is_allowed() -> None:
    assert check(KEY, NOW, 9).allowed


def test_full_window_gives_the_next_window_start() -> None:
    result = check(KEY, NOW, 10)
    assert not result.allowed
    assert result.next_eligible_at == datetime(2026, 6, 1, 12, 1, tzinfo=UTC)


def test_cost_larger_than_limit_can_never_fit() -> None:
    big = LimitKey(SPEND_SCOPE, "country_spend:sms:60s:DE", 2, 60, 3)
    result = check(big, NOW, 0)
    assert not result.allowed and result.next_eligible_at is None


def test_keys_cover_every_scope_with_a_value() -> None:
    scopes = [k.scope for k in _keys()]
    assert scopes == [
        "recipient",
        "destination",
        "event_class",
        "tenant",
        "country",
        "provider_account",
        SPEND_SCOPE,
    ]


def test_job_scope_applies_when_there_is_a_job() -> None:
    assert "job:*:1s:job-7" in [k.key for k in _keys(job_id="job-7")]


def test_channel_filter_skips_other_channel_rules() -> None:
    keys = [k.key for k in _keys(channel="email", country=None)]
    assert "tenant:email:1s:t1" in keys
    assert not any(":sms:" in k for k in keys)


def test_spend_key_costs_segments_and_others_cost_one() -> None:
    keys = _keys(segments=4)
    spend = [k for k in keys if k.scope == SPEND_SCOPE]
    assert [(k.key, k.cost, k.limit) for k in spend] == [("country_spend:sms:86400s:DE", 4, 20000)]
    assert all(k.cost == 1 for k in keys if k.scope != SPEND_SCOPE)


def test_no_spend_key_for_a_country_without_a_limit() -> None:
    assert SPEND_SCOPE not in [k.scope for k in _keys(country="AT")]


def test_rule_validation() -> None:
    with pytest.raises(ValueError, match="limit"):
        RateLimitRule("tenant", 0, 60)


def test_keys_are_distinct_so_no_counter_is_consumed_twice() -> None:
    keys = [k.key for k in _keys(job_id="job-7")]
    assert len(keys) == len(set(keys))


def _base_args() -> dict[str, Any]:
    return {
        "channel": "sms",
        "recipient_ref": "r",
        "destination_hash": "d",
        "job_id": "j",
        "event_class": "e",
        "tenant": "t",
        "country": "US",
        "provider_account": "p",
    }


def test_two_rules_on_one_scope_with_different_windows_get_two_keys() -> None:
    doc = {
        "name": "t",
        "version": "t-1",
        "channels": {"sms": {"countries": "*"}},
        "purposes": {"transactional": {"consent": {"sms": {"default": "not_required"}}}},
        "rate_limits": [
            {"scope": "recipient", "limit": 1, "per_seconds": 60},
            {"scope": "recipient", "limit": 5, "per_seconds": 3600},
        ],
        "resend_budget": 0,
        "poll_schedule": {
            "first_check_after_seconds": 30,
            "factor": 2,
            "max_interval_seconds": 600,
            "jitter": 0,
            "max_checks": 3,
            "give_up_after_seconds": 3600,
        },
        "retention": {
            "recipient_evidence_days": 1,
            "attempt_evidence_days": 1,
            "observation_days": 1,
            "job_facts_days": 1,
        },
        "retry": {"base_seconds": 1, "max_seconds": 10, "jitter": 0},
    }
    keys = limit_keys(parse_policy(doc), **_base_args())
    assert [k.key for k in keys] == ["recipient:*:60s:r", "recipient:*:3600s:r"]


@given(
    st.integers(1, 100),
    st.integers(1, 86400),
    st.integers(0, 200),
    st.integers(1, 5),
    st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1)),
)
def test_check_is_consistent(limit: int, per: int, used: int, cost: int, naive: datetime) -> None:
    now = naive.replace(tzinfo=UTC)
    key = LimitKey("tenant", "k", limit, per, cost)
    result = check(key, now, used)
    start = window_start(per, now)
    assert start <= now < start + timedelta(seconds=per)
    assert result.allowed == (used + cost <= limit)
    if not result.allowed and cost <= limit:
        assert result.next_eligible_at == start + timedelta(seconds=per)
        assert result.next_eligible_at > now
