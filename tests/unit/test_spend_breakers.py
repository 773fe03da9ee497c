"""Each country's spend breaker as the console shows it."""

from __future__ import annotations

from datetime import UTC, datetime

from tidings.domain.policy_document import parse_policy
from tidings.domain.spend_breakers import breakers
from tidings.policies import builtin_document

NOW = datetime(2026, 6, 1, 12, 30, tzinfo=UTC)
HOUR = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LIMITS = {
    "sms": {
        "LV": {"segments": 100, "per_seconds": 3600},
        "GB": {"segments": 10, "per_seconds": 3600},
        "DE": {"segments": 50, "per_seconds": 86400},
    }
}


def test_each_country_in_its_window_with_its_state() -> None:
    policy = parse_policy({**builtin_document("default"), "country_spend_limits": LIMITS})
    used = {("country_spend:sms:3600s:GB", HOUR): 10, ("country_spend:sms:3600s:LV", HOUR): 85}
    shown = breakers(policy, NOW, used)
    assert [(b.country, b.used, b.limit, b.state) for b in shown] == [
        ("DE", 0, 50, "ok"),
        ("GB", 10, 10, "tripped"),
        ("LV", 85, 100, "near"),
    ]
    assert shown[1].resets_at == datetime(2026, 6, 1, 13, 0, tzinfo=UTC)
    assert shown[0].window_start == datetime(2026, 6, 1, tzinfo=UTC)


def test_a_policy_without_limits_has_no_breakers() -> None:
    assert breakers(parse_policy(builtin_document("default")), NOW, {}) == []
