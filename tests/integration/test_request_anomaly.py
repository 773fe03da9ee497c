"""The `request_anomaly` alert (issue #41): a country's or prefix's reset
requests jump against their own baseline, refused ones counted; the alert
names tenant, class, country or prefix and the numbers, and clears when the
last hour falls back. Time is the injected clock's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tidings import ManualClock, RequestLimited, Tidings
from tidings.observability.alerts import sync_alerts
from tidings.observability.alerts.config import AlertConfig
from tidings.observability.alerts.rules import Alert

from .edge_support import PER_PREFIX, ordinary, premium, reset_body, set_up_resets
from .observability_helpers import evaluate_alerts

CONFIG = AlertConfig(request_floor=30, request_factor=5.0, request_page_requests=50)
START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)


def _anomalies(t: Tidings, now: datetime) -> dict[str, Alert]:
    found = evaluate_alerts(t.db, now, CONFIG)
    return {a.key: a for a in found if a.condition == "request_anomaly"}


def _requests(t: Tidings, phones: list[str], tag: str) -> int:
    """Ask for a reset to each number; how many were refused at the edge."""
    refused = 0
    for n, phone in enumerate(phones):
        try:
            t.notify(**reset_body(t, phone, f"{tag}-{n}"))
        except RequestLimited:
            refused += 1
    return refused


def test_a_pumping_burst_raises_the_alert_and_it_clears_when_the_hour_falls_back(
    tidings: Tidings, clock: ManualClock
) -> None:
    clock.set(START)
    t = tidings.for_tenant("game")
    set_up_resets(t)
    # A day of ordinary US resets, ten an hour: the baseline.
    for hour in range(25):
        _requests(t, [ordinary(10 * hour + i) for i in range(10)], f"day-{hour}")
        clock.advance(hours=1)
    clock.advance(minutes=20)
    # A busy but ordinary hour: 35 US resets, over the floor, 3.5x the baseline.
    _requests(t, [ordinary(1000 + i) for i in range(35)], "busy")
    assert _anomalies(t, clock.now()) == {}

    # The script: 60 resets to UK premium-rate numbers in ten minutes.
    clock.advance(minutes=10)
    assert _requests(t, [premium(i) for i in range(60)], "pump") == 60 - PER_PREFIX
    found = _anomalies(t, clock.now())
    assert sorted(found) == [
        "request_anomaly:password_reset:country:GB",
        "request_anomaly:password_reset:prefix:+44909",
    ]
    prefix = found["request_anomaly:password_reset:prefix:+44909"]
    assert prefix.tenant_id == "game" and prefix.severity == "page"
    assert prefix.details["requests_last_hour"] == 60  # refused ones counted
    assert prefix.details["baseline_per_hour"] == 0 and prefix.details["country"] == "GB"
    assert "password_reset" in prefix.summary and "+44909" in prefix.summary
    assert "60 in the last hour" in prefix.summary
    assert '"country": "GB"' in prefix.details["action"]
    country = found["request_anomaly:password_reset:country:GB"]
    assert country.details["busiest_prefixes"] == ["+44909"]

    changes = sync_alerts(t.db, clock.now(), CONFIG)
    assert changes is not None
    assert sorted(r["key"] for r in changes.opened if r["condition"] == "request_anomaly") == [
        *sorted(found)
    ]

    # Still inside the last hour 40 minutes on (the previous window weighs in).
    clock.advance(minutes=40)
    assert sorted(_anomalies(t, clock.now())) == sorted(found)
    # Quiet again: the last hour falls back and the alerts resolve themselves.
    clock.advance(hours=1)
    assert _anomalies(t, clock.now()) == {}
    changes = sync_alerts(t.db, clock.now(), CONFIG)
    assert changes is not None
    resolved = sorted(r["key"] for r in changes.resolved if r["condition"] == "request_anomaly")
    assert resolved == sorted(found)


def test_one_tenants_burst_is_its_own_alert(tidings: Tidings, clock: ManualClock) -> None:
    clock.set(START)
    pumped, quiet = tidings.for_tenant("pumped"), tidings.for_tenant("quiet")
    set_up_resets(pumped)
    set_up_resets(quiet)
    _requests(pumped, [premium(i, "LV") for i in range(40)], "lv")
    _requests(quiet, [premium(i, "LV") for i in range(3)], "lv")
    found = _anomalies(tidings, clock.now())
    assert {a.tenant_id for a in found.values()} == {"pumped"}
    assert found["request_anomaly:password_reset:prefix:+371900"].severity == "warning"


@pytest.mark.parametrize("count", [29, 30])
def test_a_quiet_country_needs_the_floor(tidings: Tidings, clock: ManualClock, count: int) -> None:
    clock.set(START)
    t = tidings.for_tenant("game")
    set_up_resets(t)
    clock.advance(minutes=59)
    _requests(t, [f"+1415555{i:04d}" for i in range(count)], "sf")
    # One prefix (+1415), under its bound of 20: created or refused, all count.
    assert bool(_anomalies(t, clock.now())) is (count >= CONFIG.request_floor)
