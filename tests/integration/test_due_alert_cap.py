"""The due backlog alert at any backlog (issue 38): the scan reads each
tenant's channel lane by lane, the oldest `cap` + 1 of each, so a million
due intents cost what ten thousand do (counting them all ran past the
round's statement timeout, and the whole round failed with it). The oldest
due is exact; counts past the cap say "at least"; the cap is never below
the due page threshold.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.integration.observability_helpers import evaluate_alerts
from tidings import ManualClock, Tidings
from tidings.observability import alerts as alerts_module
from tidings.observability.alerts import config as alert_config
from tidings.observability.alerts import sync_alerts
from tidings.observability.alerts.config import AlertConfig, Objective
from tidings.store import alerts as stored

from .dispatch_helpers import offer, publish_offer_template


def due_backlog(t: Tidings, clock: ManualClock, config: AlertConfig) -> Any:
    alerts = evaluate_alerts(t.db, clock.now(), config)
    [alert] = [a for a in alerts if a.condition == "due_backlog"]
    return alert


def test_the_due_count_stops_at_the_cap_and_the_oldest_stays_exact(
    tidings: Tidings, clock: ManualClock, monkeypatch: Any
) -> None:
    publish_offer_template(tidings)
    later = clock.now() + timedelta(hours=2)
    oldest = offer(tidings, 0, recipient={"ref": "m0", "phone": "+14155550100"}, expires_at=later)
    clock.advance(10)
    for k in range(1, 4):
        offer(tidings, k, recipient={"ref": f"m{k}", "phone": "+14155550100"}, expires_at=later)
    clock.advance(minutes=6)
    monkeypatch.setattr(alert_config, "RECIPIENTS_CAP", 2)
    objective = Objective(warn_seconds=60, page_seconds=120, page_recipients=2)

    alert = due_backlog(tidings, clock, AlertConfig(due=objective))
    assert alert.severity == "page"
    assert alert.details["affected_intents"] == 3  # the cap and one more: "at least"
    assert alert.details["affected_intents_more"] is True
    assert "at least 3 intent(s) due and unclaimed" in alert.summary
    assert alert.details["oldest_intent_id"] == str(oldest.id)
    assert alert.details["oldest_due_age_seconds"] == 370

    # A page threshold above the cap raises the cap: every intent is counted.
    higher = Objective(warn_seconds=60, page_seconds=120, page_recipients=4)
    alert = due_backlog(tidings, clock, AlertConfig(due=higher))
    assert alert.details["affected_intents"] == 4
    assert alert.details["affected_recipients"] == 4
    assert alert.details["affected_intents_more"] is False
    assert alert.severity == "page" and "at least" not in alert.summary


@pytest.mark.parametrize("threshold", [10, 10_000, 50_000])
def test_the_due_cap_is_never_below_the_page_threshold(threshold: int) -> None:
    config = AlertConfig(due=Objective(300, 900, threshold))
    assert config.due_cap() == max(alert_config.RECIPIENTS_CAP, threshold)


def test_a_scan_past_its_timeout_costs_the_round_only_its_own_alerts(
    tidings: Tidings, clock: ManualClock, monkeypatch: Any
) -> None:
    publish_offer_template(tidings)
    waiting = offer(tidings, 1, expires_at=clock.now() + timedelta(hours=2))
    clock.advance(minutes=6)
    monkeypatch.setattr(alerts_module, "SCRAPE_TIMEOUT_MS", 300)

    def due_open() -> bool:
        with tidings.db.transaction() as conn:
            return any(r["condition"] == "due_backlog" for r in stored.open_alerts(conn))

    # The canaries' scan waits on a lock until the statement timeout stops it.
    with psycopg.connect(tidings.db.url, autocommit=False) as locker:
        locker.execute("LOCK TABLE canary_results IN ACCESS EXCLUSIVE MODE")
        changes = sync_alerts(tidings.db, clock.now(), AlertConfig())
        assert changes is not None
        opened = {a["condition"] for a in changes.opened}
        assert opened == {"due_backlog", "urgent_backlog"}
        # Cleared meanwhile, but a round with a scan that failed resolves nothing.
        tidings.cancel(waiting.id, reason="member_left")
        changes = sync_alerts(tidings.db, clock.now(), AlertConfig())
        assert changes is not None and changes.resolved == [] and due_open()
        locker.rollback()
    changes = sync_alerts(tidings.db, clock.now(), AlertConfig())
    assert changes is not None
    assert {a["condition"] for a in changes.resolved} == opened and not due_open()
