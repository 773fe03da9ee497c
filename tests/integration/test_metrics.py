"""Metrics and alerts from rows, driven by a real worker and a manual clock.

The failure shape of R002.1 (docs/requirements.md): a batch is accepted, receipts and the poller
are held back, the clock moves on. The warning must fire before any
"delivery unknown" page, name the oldest age and the last successful
poll, page only with both age and volume, and resolve itself once the
poller reconciles.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import IntentState, ManualClock, Tidings
from tidings.observability.alerts import sync_alerts
from tidings.observability.alerts.config import AlertConfig, Objective
from tidings.observability.process_metrics import record_provider_call

from .dispatch_helpers import offer, publish_offer_template, simulator, worker

# Pinned: dashboards and alert rules depend on these exact names.
PINNED = {
    "tidings_ledger_up",
    "tidings_intents",
    "tidings_intents_by_code",
    "tidings_suppressed_total",
    "tidings_due_intents",
    "tidings_oldest_due_intent_age_seconds",
    "tidings_unreconciled_intents",
    "tidings_oldest_unreconciled_age_seconds",
    "tidings_last_successful_reconciliation_timestamp_seconds",
    "tidings_due_status_checks",
    "tidings_poll_lag_seconds",
    "tidings_attempts_per_intent",
    "tidings_accept_to_terminal_seconds",
    "tidings_lease_recoveries_total",
    "tidings_impossible_transitions_total",
    "tidings_quarantined_intents_total",
    "tidings_unknown_intents",
    "tidings_provider_paused_seconds",
    "tidings_provider_tenant_held_seconds",
    "tidings_canary_ok",
    "tidings_canary_last_run_timestamp_seconds",
    "tidings_provider_calls_total",
    "tidings_provider_call_seconds",
    "tidings_provider_calls_withheld_total",
    "tidings_reconciliation_lookups_total",
    "tidings_rate_limit_waits_total",
    "tidings_request_refusals_total",
    "tidings_rate_limit_wait_seconds",
    "tidings_lane_due_intents",
    "tidings_lane_oldest_due_seconds",
    "tidings_oldest_retry_due_seconds",
    "tidings_expired_unsent_intents",
    "tidings_suppression_list_entries",
    "tidings_claims_total",
    "tidings_claim_seconds",
    "tidings_claimed_intents_total",
    "tidings_database_waiting_for_primary",
    "tidings_database_primary_waits_total",
    "tidings_database_primary_wait_seconds_total",
}

REPORT_BODY = "Report {{ report_id }} revision {{ report_revision }} is attached."


def scrape(t: Tidings) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = render_metrics(t.runtime)
    assert content_type.startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def rows(db_url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, args).fetchall()


def publish_report_template(t: Tidings) -> None:
    t.publish_template(
        "report_ready",
        channel="email",
        subject="Report {{ report_id }}",
        body=REPORT_BODY,
        required_variables=["report_id", "report_revision"],
    )


def report_email(t: Tidings, n: int) -> Any:
    return t.notify(
        idempotency_key=f"report:8421:revision:7:email:reader-{n}",
        channel="email",
        recipient={"ref": f"reader-{n}", "email": f"reader{n}@example.com"},
        template="report_ready",
        variables={"report_id": "8421", "report_revision": 7},
        purpose="transactional",
        event_class="report_delivery",
    )


def test_metric_names_are_pinned(tidings: Tidings) -> None:
    publish_offer_template(tidings)  # makes the tenant exist: every family has its series
    body, _ = render_metrics(tidings.runtime)
    names = set(re.findall(r"^# HELP (\S+)", body.decode(), re.MULTILINE))
    assert names == PINNED


def test_values_match_rows_after_driving_a_worker(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, receipt_delay_ms=1000)
    w = worker(tidings, core, lease_seconds=30)
    sent = [offer(tidings, n) for n in range(1, 4)]
    w.dispatch_once()
    clock.advance(10)
    w.reconcile_once()  # all three delivered
    canceled = offer(tidings, 4)
    tidings.cancel(canceled.id, reason="member_left")
    crashed = offer(tidings, 5)
    [claimed] = w.claim("sms", 10)
    w._starts.verdict(claimed)  # its call started; the worker "dies" holding the lease
    clock.advance(31)
    w.sweep_once()  # lease expired: reconciling, LEASE_EXPIRED audited
    tidings.set_control("kill_switch", True, channel="sms")
    held = offer(tidings, 6)
    clock.advance(45)
    record_provider_call("simulator", "sms", "accepted", 0.02)

    m = scrape(tidings)
    tenant = tidings.tenant
    states = dict(rows(db_url, "SELECT state, count(*) FROM intents GROUP BY state"))
    for state in IntentState:
        assert value(m, "tidings_intents", tenant=tenant, state=state.value) == states.get(
            state.value, 0
        )
    assert states == {"delivered": 3, "canceled": 1, "reconciling": 1, "pending": 1}
    assert tidings.get(crashed.id).state is IntentState.RECONCILING

    [(due_at,)] = rows(db_url, "SELECT next_due_at FROM intents WHERE id = %s", held.id)
    assert value(m, "tidings_due_intents", tenant=tenant, channel="sms") == 1
    assert (
        value(m, "tidings_oldest_due_intent_age_seconds", tenant=tenant, channel="sms")
        == (clock.now() - due_at).total_seconds()
    )
    assert value(m, "tidings_oldest_due_intent_age_seconds", tenant=tenant, channel="email") == 0

    [(created,)] = rows(db_url, "SELECT created_at FROM intents WHERE id = %s", crashed.id)
    labels = {"tenant": tenant, "event_class": "waitlist_offer", "channel": "sms"}
    assert value(m, "tidings_unreconciled_intents", **labels) == 1
    assert (
        value(m, "tidings_oldest_unreconciled_age_seconds", **labels)
        == (clock.now() - created).total_seconds()
    )

    [(last_seen,)] = rows(
        db_url,
        "SELECT max(received_at) FROM observations WHERE source IN ('poll','lookup','webhook')",
    )
    assert (
        value(
            m,
            "tidings_last_successful_reconciliation_timestamp_seconds",
            tenant=tenant,
            channel="sms",
        )
        == last_seen.timestamp()
    )

    [(next_check,)] = rows(
        db_url,
        "SELECT min(next_check_at) FROM attempts WHERE state IN ('sending','accepted','unknown')"
        " AND next_check_at <= %s",
        clock.now(),
    )
    assert (
        value(m, "tidings_poll_lag_seconds", tenant=tenant)
        == (clock.now() - next_check).total_seconds()
    )

    # Histograms: counts and sums from the terminal intents' own rows.
    [(n_terminal, attempts_sum)] = rows(
        db_url, "SELECT count(*), sum(attempt_count) FROM intents WHERE terminal_at IS NOT NULL"
    )
    hist = {"tenant": tenant, "channel": "sms"}
    assert value(m, "tidings_attempts_per_intent_count", **hist) == n_terminal == 4
    assert value(m, "tidings_attempts_per_intent_sum", **hist) == attempts_sum == 3
    assert value(m, "tidings_attempts_per_intent_bucket", le="0.0", **hist) == 1  # the cancel
    assert value(m, "tidings_attempts_per_intent_bucket", le="1.0", **hist) == 4
    [(latencies,)] = rows(
        db_url,
        "SELECT array_agg(extract(epoch FROM terminal_at - accepted_at)::float8) FROM intents"
        " WHERE accepted_at IS NOT NULL AND terminal_at IS NOT NULL",
    )
    assert value(m, "tidings_accept_to_terminal_seconds_count", **hist) == len(latencies) == 3
    assert value(m, "tidings_accept_to_terminal_seconds_sum", **hist) == sum(latencies)
    assert value(m, "tidings_accept_to_terminal_seconds_bucket", le="5.0", **hist) == 0
    assert value(m, "tidings_accept_to_terminal_seconds_bucket", le="15.0", **hist) == 3

    assert value(m, "tidings_lease_recoveries_total", tenant=tenant) == 1
    assert value(m, "tidings_impossible_transitions_total", tenant=tenant) == 0
    assert value(m, "tidings_ledger_up") == 1
    assert (
        value(
            m,
            "tidings_provider_calls_total",
            provider="simulator",
            channel="sms",
            outcome="accepted",
        )
        >= 1
    )
    assert {i.id for i in sent} <= {r[0] for r in rows(db_url, "SELECT id FROM intents")}


def test_suppressions_are_counted_by_code(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core)
    tidings.set_control("shadow_mode", True)
    offer(tidings, 1)
    offer(tidings, 2)
    w.dispatch_once()
    m = scrape(tidings)
    tenant = tidings.tenant
    assert value(m, "tidings_suppressed_total", tenant=tenant, code="SHADOW_MODE") == 2
    assert value(m, "tidings_intents_by_code", tenant=tenant, code="SHADOW_MODE") == 2


def test_an_impossible_transition_is_counted_and_pages(tidings: Tidings, db_url: str) -> None:
    publish_offer_template(tidings)
    intent = offer(tidings)
    with psycopg.connect(db_url) as conn:  # what only a bug (or a hand edit) could write
        conn.execute(
            "INSERT INTO transitions (tenant_id, intent_id, version, from_state, to_state, event,"
            " actor, at) VALUES (%s, %s, 2, 'delivered', 'pending', 'claim', 'test', now())",
            (tidings.tenant, intent.id),
        )
    assert (
        value(scrape(tidings), "tidings_impossible_transitions_total", tenant=tidings.tenant) == 1
    )
    [alert] = evaluate_alerts(tidings.db, tidings.clock.now(), AlertConfig())
    assert alert.key == "impossible_transitions" and alert.severity == "page"
    assert alert.details["samples"][0]["intent_id"] == str(intent.id)
    assert f"tidings timeline {intent.id}" in alert.details["action"]


def test_the_ledger_being_unreadable_is_a_metric_not_an_error(tidings: Tidings) -> None:
    tidings.close()  # the pool is gone: every query fails
    with pytest.raises(Exception):  # noqa: B017 - the closed pool's own error type
        tidings.get("00000000-0000-0000-0000-000000000000")
    body, _ = render_metrics(tidings.runtime)
    assert b"tidings_ledger_up 0.0" in body


# --- R002.1: delayed reconciliation -------------------------------------------

CONFIG = AlertConfig(
    unreconciled=Objective(warn_seconds=600, page_seconds=1800, page_recipients=10)
)


def test_delayed_reconciliation_warns_then_resolves_itself(
    tidings: Tidings, clock: ManualClock, db_url: str
) -> None:
    publish_report_template(tidings)
    core = simulator(clock, receipt_delay_ms=3_600_000)  # receipts held back an hour
    w = worker(tidings, core)
    intents = [report_email(tidings, n) for n in range(1, 4)]
    start = clock.now()
    assert w.dispatch_once() == 3  # the "worker completed" that proves nothing
    clock.advance(10)
    w.reconcile_once()  # a successful poll: still queued at the provider
    last_poll = clock.now()
    assert evaluate_alerts(tidings.db, clock.now(), CONFIG) == []

    clock.advance(minutes=11)  # the poller is held back; nothing new is learned
    [alert] = evaluate_alerts(tidings.db, clock.now(), CONFIG)
    assert alert.key == "unreconciled:report_delivery:email"
    assert alert.severity == "warning"
    d = alert.details
    assert d["oldest_nonterminal_age_seconds"] == (clock.now() - start).total_seconds() == 670
    assert d["last_successful_reconciliation_at"] == last_poll.isoformat()
    assert d["event_class"] == "report_delivery" and d["channel"] == "email"
    assert d["affected_recipients"] == 3
    assert d["report_ids"] == ["8421 rev 7"]
    assert d["template_revisions"] == ["report_ready rev 1"]
    assert d["oldest_intent_id"] == str(intents[0].id)
    assert f"tidings timeline {intents[0].id}" in d["action"]
    assert "PUT /v1/controls/kill-switch" in d["action"]
    assert "11m 10s" in alert.summary and last_poll.isoformat() in alert.summary

    changes = sync_alerts(tidings.db, clock.now(), CONFIG)
    assert changes is not None and [r["key"] for r in changes.opened] == [alert.key]
    assert sync_alerts(tidings.db, clock.now(), CONFIG).opened == []  # type: ignore[union-attr]

    clock.advance(minutes=50)  # receipts are due now; the poller runs again
    while w.reconcile_once():
        pass
    assert {tidings.get(i.id).state for i in intents} == {IntentState.DELIVERED}
    assert evaluate_alerts(tidings.db, clock.now(), CONFIG) == []
    changes = sync_alerts(tidings.db, clock.now(), CONFIG)
    assert changes is not None and [r["key"] for r in changes.resolved] == [alert.key]
    [(resolved_at, details)] = rows(db_url, "SELECT resolved_at, details FROM alerts")
    assert resolved_at == clock.now()
    assert details["last_successful_reconciliation_at"] == last_poll.isoformat()


def test_paging_needs_both_age_and_volume(tidings: Tidings, clock: ManualClock) -> None:
    publish_report_template(tidings)
    core = simulator(clock, receipt_delay_ms=3_600_000)
    w = worker(tidings, core)
    for n in range(1, 4):
        report_email(tidings, n)
    w.dispatch_once()
    clock.advance(minutes=31)  # past the paging age

    def severity(objective: Objective) -> str:
        [alert] = evaluate_alerts(tidings.db, clock.now(), AlertConfig(unreconciled=objective))
        return alert.severity

    assert severity(Objective(600, 1800, page_recipients=10)) == "warning"  # too few
    assert severity(Objective(600, 1800, page_recipients=3)) == "page"  # age and volume
    assert severity(Objective(600, 3600, page_recipients=3)) == "warning"  # too young
    per_class = AlertConfig(
        objectives={"report_delivery:email": Objective(60, 120, page_recipients=1)}
    )
    [alert] = evaluate_alerts(tidings.db, clock.now(), per_class)
    assert alert.severity == "page"
    assert alert.details["thresholds"] == {
        "warn_seconds": 60,
        "page_seconds": 120,
        "page_recipients": 1,
    }


def test_an_expanding_due_backlog_warns_and_names_the_kill_switch(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    tidings.set_control("kill_switch", True, channel="sms")
    held = offer(tidings, 1, expires_at=clock.now() + timedelta(hours=2))
    clock.advance(minutes=6)
    [alert] = evaluate_alerts(tidings.db, clock.now(), AlertConfig())
    assert alert.key == "due_backlog:sms" and alert.severity == "warning"
    assert alert.details["oldest_due_age_seconds"] == 360
    assert alert.details["kill_switch"] is True
    assert alert.details["oldest_intent_id"] == str(held.id)
    assert "kill switch covers sms" in alert.details["action"]


def test_a_single_intent_waiting_past_half_a_minute_warns_as_urgent(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    waiting = offer(tidings, 1, expires_at=clock.now() + timedelta(hours=2))
    clock.advance(seconds=29)
    assert [a.key for a in evaluate_alerts(tidings.db, clock.now(), AlertConfig())] == []
    clock.advance(seconds=2)
    [alert] = evaluate_alerts(tidings.db, clock.now(), AlertConfig())
    assert (alert.key, alert.severity) == ("urgent_backlog:sms", "warning")
    assert alert.details["affected_intents"] == 1
    assert alert.details["event_classes"] == [waiting.event_class]
    clock.advance(minutes=2)
    keys = {a.key: a.severity for a in evaluate_alerts(tidings.db, clock.now(), AlertConfig())}
    assert keys["urgent_backlog:sms"] == "page"


def test_the_lanes_queue_ages_retry_age_and_stop_lists(
    tidings: Tidings, clock: ManualClock
) -> None:
    tenant = tidings.tenant
    publish_offer_template(tidings)
    offer(tidings, 1, expires_at=clock.now() + timedelta(hours=2))
    tidings.suppress("sms", "+14155550199", reason="operator")
    tidings.handle_inbound("+14155550123", "STOP")
    clock.advance(seconds=40)
    m = scrape(tidings)
    assert value(m, "tidings_lane_due_intents", tenant=tenant, channel="sms", lane="urgent") == 1
    assert value(m, "tidings_lane_due_intents", tenant=tenant, channel="sms", lane="bulk") == 0
    urgent_age = value(
        m, "tidings_lane_oldest_due_seconds", tenant=tenant, channel="sms", lane="urgent"
    )
    assert urgent_age == 40
    assert value(m, "tidings_oldest_retry_due_seconds", tenant=tenant, channel="sms") == 0
    entries = {
        labels: v for (name, labels), v in m.items() if name == "tidings_suppression_list_entries"
    }
    assert entries == {
        (("channel", "sms"), ("reason", "operator"), ("tenant", tenant)): 1,
        (("channel", "sms"), ("reason", "opt_out"), ("tenant", tenant)): 1,
    }


def test_an_intent_that_expired_unsent_is_counted(tidings: Tidings, clock: ManualClock) -> None:
    publish_offer_template(tidings)
    offer(tidings, 1, expires_at=clock.now() + timedelta(seconds=5))
    clock.advance(seconds=10)
    worker(tidings, simulator(clock)).dispatch_once()  # the gate expires it
    m = scrape(tidings)
    assert (
        value(
            m, "tidings_expired_unsent_intents", tenant=tidings.tenant, event_class="waitlist_offer"
        )
        == 1
    )


def test_alert_config_from_the_environment() -> None:
    config = AlertConfig.from_env(
        {
            "TIDINGS_ALERT_UNRECONCILED_WARN_SECONDS": "120",
            "TIDINGS_ALERT_UNRECONCILED_PAGE_RECIPIENTS": "3",
            "TIDINGS_ALERT_OBJECTIVES": '{"report_delivery:email": {"page_seconds": 7200}}',
            "TIDINGS_ALERT_WEBHOOK_URL": "http://127.0.0.1:9/alerts",
        }
    )
    assert config.unreconciled == Objective(120, 1800, 3)
    assert config.objective_for("report_delivery", "email") == Objective(120, 7200, 3)
    assert config.objective_for("waitlist_offer", "sms") == config.unreconciled
    assert config.webhook_url == "http://127.0.0.1:9/alerts"


def test_a_due_backlog_alert_rolls_up_every_held_intent(
    tidings: Tidings, clock: ManualClock
) -> None:
    """Counts, names and the oldest across intents of several classes and
    recipients (the backlog is grouped finely, then rolled up per channel)."""
    publish_offer_template(tidings)
    tidings.set_control("kill_switch", True, channel="sms")
    later = clock.now() + timedelta(hours=2)
    oldest = offer(tidings, 1, expires_at=later)
    clock.advance(seconds=30)
    offer(tidings, 2, expires_at=later, event_class="class_reminder")
    offer(
        tidings,
        3,
        expires_at=later,
        recipient={"ref": "member-1801", "phone": "+14155550123"},
        variables={"class_name": "Spin 7am", "deadline": "18:00", "report_id": "8421"},
    )
    clock.advance(minutes=6)
    [alert] = evaluate_alerts(tidings.db, clock.now(), AlertConfig())
    assert alert.key == "due_backlog:sms"
    assert alert.details["affected_intents"] == 3
    assert alert.details["affected_recipients"] == 2  # member-1801 twice
    assert alert.details["oldest_intent_id"] == str(oldest.id)
    assert alert.details["oldest_due_age_seconds"] == 390
    assert alert.details["event_class"] == "class_reminder, waitlist_offer"
    assert alert.details["report_ids"] == ["8421"]
    assert alert.details["template_revisions"] == ["waitlist_offer rev 1"]


def test_a_scoped_kill_switch_holds_only_its_scope_and_never_hides_a_stuck_backlog(
    tidings: Tidings, clock: ManualClock
) -> None:
    # A kill switch on one event class holds that class; the rest of the
    # channel waiting unclaimed is a real backlog and must page as one.
    publish_offer_template(tidings)
    tidings.set_control("kill_switch", True, channel="sms", event_class="class_reminder")
    later = clock.now() + timedelta(hours=2)
    offer(tidings, 1, expires_at=later, event_class="class_reminder")
    clock.advance(seconds=30)
    stuck = offer(tidings, 2, expires_at=later)
    clock.advance(minutes=6)
    alerts = {a.key: a for a in evaluate_alerts(tidings.db, clock.now(), AlertConfig())}
    assert alerts["urgent_backlog:sms"].severity == "page"
    assert alerts["urgent_backlog:sms"].details["affected_intents"] == 1
    due = alerts["due_backlog:sms"]
    assert due.details["kill_switch"] is False
    assert due.details["affected_intents"] == 1 and due.details["held_intents"] == 1
    assert due.details["oldest_intent_id"] == str(stuck.id)
    assert due.details["oldest_due_age_seconds"] == 360
    assert "Workers are not claiming sms" in due.details["action"]
    # Once the switch covers the whole channel, everything due is held on purpose.
    tidings.set_control("kill_switch", True, channel="sms")
    alerts = {a.key: a for a in evaluate_alerts(tidings.db, clock.now(), AlertConfig())}
    assert "urgent_backlog:sms" not in alerts
    assert alerts["due_backlog:sms"].details["kill_switch"] is True
    assert alerts["due_backlog:sms"].details["affected_intents"] == 2
