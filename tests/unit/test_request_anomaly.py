"""When a country's or prefix's requests jump against their own baseline."""

from __future__ import annotations

import pytest

from tidings.domain.request_anomaly import (
    BASELINE_HOURS,
    Thresholds,
    Volume,
    anomalies,
    recent,
)

LIMITS = Thresholds(floor=30, factor=5.0)


def _v(prefix: str, current: int, previous: int = 0, per_hour: float = 0, **kw: str) -> Volume:
    total = round(per_hour * BASELINE_HOURS)
    return Volume(
        kw.get("tenant", "t1"), "password_reset", kw.get("country", "GB"), prefix, current,
        previous, total,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("current", "previous", "elapsed", "expected"),
    [(10, 0, 0.5, 10), (0, 60, 0.0, 60), (0, 60, 0.75, 15), (5, 60, 1.0, 5), (5, 60, -1, 65)],
)
def test_the_last_hour_weighs_the_previous_window_by_what_is_left_of_it(
    current: int, previous: int, elapsed: float, expected: int
) -> None:
    assert recent(current, previous, elapsed) == expected


def test_a_jump_over_floor_and_factor_names_the_prefix_and_the_country() -> None:
    found = anomalies([_v("+44909", 60), _v("+44790", 2, per_hour=2)], 0.5, LIMITS)
    assert [(a.scope, a.value, a.recent) for a in found] == [
        ("country", "GB", 62),
        ("prefix", "+44909", 60),
    ]
    country = found[0]
    assert country.prefixes == ("+44909", "+44790") and country.country == "GB"
    assert country.baseline_per_hour == pytest.approx(2.0)


def test_a_quiet_country_does_not_alert_under_the_floor() -> None:
    assert anomalies([_v("+371900", 29)], 0.0, LIMITS) == []
    assert len(anomalies([_v("+371900", 30)], 0.0, LIMITS)) == 2


def test_a_busy_range_is_measured_against_its_own_baseline() -> None:
    # 200 an hour where 50 an hour is usual: 4x, not an anomaly; 250 is.
    assert anomalies([_v("+1415", 200, per_hour=50)], 0.0, LIMITS) == []
    assert [a.ratio for a in anomalies([_v("+1415", 250, per_hour=50)], 0.0, LIMITS)] == [
        5.0,
        5.0,
    ]


def test_prefixes_each_under_the_floor_can_add_up_to_a_country() -> None:
    spread = [_v(f"+44909{i}", 10) for i in range(4)]
    found = anomalies(spread, 0.0, LIMITS)
    assert [(a.scope, a.value, a.recent) for a in found] == [("country", "GB", 40)]


def test_tenants_and_countries_are_never_summed_together() -> None:
    rows = [_v("+44909", 20), _v("+44909", 20, tenant="t2"), _v("+371900", 20, country="LV")]
    assert anomalies(rows, 0.0, LIMITS) == []
