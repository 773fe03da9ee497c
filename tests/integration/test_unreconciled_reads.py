"""The unreconciled reads at any backlog (issue 38, item 4): the console's
table, the metric and the alert count intents in flight exactly from the
kept counts, find the oldest call through intents_unreconciled's first
entries (0047), and the alert counts distinct recipients up to a cap that
is never below a page threshold, saying "at least" past it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import ManualClock, Tidings
from tidings.console import data
from tidings.observability.alerts import config as alert_config
from tidings.observability.alerts.config import AlertConfig, Objective
from tidings.store import console_reads, metrics_reads

from .dispatch_helpers import offer, publish_offer_template, simulator, worker

AGE = re.compile(r"^tidings_oldest_unreconciled_age_seconds\{[^}]*\} (\S+)$", re.M)
COUNT = re.compile(r"^tidings_unreconciled_intents\{[^}]*\} (\S+)$", re.M)


def accepted_forever(t: Tidings, clock: ManualClock, n: int) -> list[UUID]:
    """`n` offers to `n` members, called now and accepted, never answered."""
    publish_offer_template(t)
    w = worker(t, simulator(clock, profile="sns"))  # accepted is all it will ever say
    ids = [
        offer(t, k, recipient={"ref": f"m{k}", "phone": "+14155550123"}, expires_at=None).id
        for k in range(n)
    ]
    w.dispatch_once()
    return ids


def set_times(t: Tidings, intent_id: UUID, claimed: datetime, called: datetime) -> None:
    # As if its claim and its call had been that far apart (a slow render,
    # a worker that paused between the two).
    with t.db.transaction() as conn:
        conn.execute("UPDATE intents SET claimed_at = %s WHERE id = %s", (claimed, intent_id))
        conn.execute(
            "UPDATE attempts SET created_at = %s, call_started_at = %s WHERE intent_id = %s",
            (claimed, called, intent_id),
        )


def test_a_claim_writes_when_it_claimed(tidings: Tidings, clock: ManualClock) -> None:
    ids = accepted_forever(tidings, clock, 2)
    with tidings.db.transaction() as conn:
        rows = conn.execute(
            "SELECT i.claimed_at, a.created_at FROM intents i JOIN attempts a"
            " ON a.tenant_id = i.tenant_id AND a.intent_id = i.id AND a.n = i.attempt_count"
            " WHERE i.id = ANY(%s)",
            (ids,),
        ).fetchall()
    assert [r["claimed_at"] for r in rows] == [r["created_at"] for r in rows]
    assert [r["claimed_at"] for r in rows] == [clock.now(), clock.now()]


def test_the_oldest_call_is_found_past_the_first_claim(
    tidings: Tidings, clock: ManualClock, monkeypatch: Any
) -> None:
    first, oldest, late = accepted_forever(tidings, clock, 3)
    t0 = clock.now()
    set_times(tidings, first, t0 - timedelta(seconds=30), t0)  # claimed first, called late
    set_times(tidings, oldest, t0 - timedelta(seconds=20), t0 - timedelta(seconds=20))
    set_times(tidings, late, t0 + timedelta(seconds=1), t0 + timedelta(seconds=1))
    clock.advance(100)
    with tidings.db.transaction() as conn:
        rows = console_reads.unreconciled(conn, tidings.tenant)
    assert [(r["event_class"], r["channel"], r["n"]) for r in rows] == [
        ("waitlist_offer", "sms", 3)
    ]
    assert (clock.now() - rows[0]["oldest"]).total_seconds() == 120.0
    body = render_metrics(tidings.runtime)[0].decode()
    assert AGE.findall(body) == ["120.0"] and COUNT.findall(body) == ["3.0"]
    objective = Objective(warn_seconds=60, page_seconds=1800, page_recipients=1)
    [alert] = [
        a
        for a in evaluate_alerts(tidings.db, clock.now(), AlertConfig(unreconciled=objective))
        if a.condition == "unreconciled_backlog"
    ]
    assert alert.details["oldest_intent_id"] == str(oldest)
    assert alert.details["oldest_nonterminal_age_seconds"] == 120.0
    # The walk stops at its cap: past it, the oldest of the entries read
    # (only a claim storm inside one call's start gets there).
    monkeypatch.setattr(console_reads, "OLDEST_WALK_CAP", 1)
    with tidings.db.transaction() as conn:
        [row] = console_reads.unreconciled(conn, tidings.tenant)
    assert (row["n"], (clock.now() - row["oldest"]).total_seconds()) == (3, 100.0)


def test_the_count_in_flight_is_exact_and_the_recipients_stop_at_the_cap(
    tidings: Tidings, clock: ManualClock, monkeypatch: Any
) -> None:
    accepted_forever(tidings, clock, 4)
    clock.advance(200)
    monkeypatch.setattr(alert_config, "RECIPIENTS_CAP", 2)
    objective = Objective(warn_seconds=60, page_seconds=120, page_recipients=2)

    def backlog(config: AlertConfig) -> Any:
        alerts = evaluate_alerts(tidings.db, clock.now(), config)
        [alert] = [a for a in alerts if a.condition == "unreconciled_backlog"]
        return alert

    alert = backlog(AlertConfig(unreconciled=objective))
    assert alert.severity == "page"
    assert alert.details["affected_intents"] == 4  # exact, from the kept counts
    assert alert.details["affected_recipients"] == 2  # the two oldest intents' members
    assert alert.details["affected_recipients_more"] is True
    assert "at least 2 recipient(s) without delivery evidence" in alert.summary
    # A threshold above the cap raises the cap: the rule still pages.
    higher = Objective(warn_seconds=60, page_seconds=120, page_recipients=4)
    alert = backlog(AlertConfig(unreconciled=higher))
    assert alert.severity == "page" and alert.details["affected_recipients"] == 4
    assert alert.details["affected_recipients_more"] is False
    assert "at least" not in alert.summary


@pytest.mark.parametrize("thresholds", [(10,), (10, 50_000), (20_000, 3)])
def test_the_recipients_cap_is_never_below_a_page_threshold(thresholds: tuple[int, ...]) -> None:
    default, *others = thresholds
    config = AlertConfig(
        unreconciled=Objective(600, 1800, default),
        objectives={f"class{k}": Objective(600, 1800, n) for k, n in enumerate(others)},
    )
    assert config.recipients_cap() == max(alert_config.RECIPIENTS_CAP, *thresholds)
    assert metrics_reads.OLDEST_WALK_CAP == 10_000


def test_a_scrape_or_an_alert_round_reads_without_jit(tidings: Tidings) -> None:
    # Their capped reads are priced as if read whole: JIT compiled them for
    # about 1 s of a 1.3 s alert read (docs/benchmarks.md).
    with tidings.db.transaction() as conn:
        metrics_reads.limit_statement_time(conn, 5000)
        row = conn.execute("SELECT current_setting('jit') AS jit").fetchone()
    assert row is not None and row["jit"] == "off"


def test_the_console_overview_reads_without_jit(tidings: Tidings, clock: ManualClock) -> None:
    with tidings.db.transaction() as conn:
        data.overview(conn, tidings.tenant, clock.now())
        row = conn.execute("SELECT current_setting('jit') AS jit").fetchone()
    assert row is not None and row["jit"] == "off"
