"""The console shows each country's spend breaker (issue #41): what the
country has spent of its SMS segment budget in the current window, and
whether it is tripped."""

from __future__ import annotations

from tidings import ManualClock, Tidings
from tidings.console import data

from .api_support import new_key
from .dispatch_helpers import simulator, worker
from .edge_support import bounded_policy, ordinary, premium, reset_body


def _set_up(t: Tidings) -> None:
    doc = bounded_policy("spend-1")
    doc["country_spend_limits"] = {
        "sms": {
            "GB": {"segments": 10, "per_seconds": 3600},
            "US": {"segments": 100, "per_seconds": 86400},
        }
    }
    t.publish_policy(doc)
    t.publish_template(
        "password_reset", channel="sms", body="Your code is {{ code }}", required_variables=["code"]
    )


def test_the_overview_shows_a_tripped_country_beside_one_still_sending(
    tidings: Tidings, clock: ManualClock
) -> None:
    from tests.security.test_console_session import browser, sign_in

    _set_up(tidings)
    for n in range(12):
        tidings.notify(**reset_body(tidings, premium(n), f"gb-{n}"))
    for n in range(3):
        tidings.notify(**reset_body(tidings, ordinary(n), f"us-{n}"))
    run = worker(tidings, simulator(clock))
    while run.dispatch_once():
        pass
    with tidings.db.transaction() as conn:
        shown = data.spend_breakers(conn, tidings.tenant, clock.now())
    assert [(b.country, b.used, b.limit, b.state) for b in shown] == [
        ("GB", 10, 10, "tripped"),
        ("US", 3, 100, "ok"),
    ]
    http = browser(tidings)
    assert sign_in(http, new_key(tidings, tidings.tenant, policy=False)).status_code in (302, 303)
    page = http.get("/console/")
    assert page.status_code == 200, page.text
    assert "Spend breakers by country" in page.text
    assert '<span class="badge breaker tripped">tripped</span>' in page.text
    assert "+44909" not in page.text  # the page names countries, never numbers


def test_a_policy_without_spend_limits_says_so(tidings: Tidings, clock: ManualClock) -> None:
    with tidings.db.transaction() as conn:
        assert data.spend_breakers(conn, tidings.tenant, clock.now()) == []
