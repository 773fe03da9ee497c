"""Unknown is loud: counted by provider, event class and channel, paged on
as `report_delivery_unknown` (R002.1), and giving up never clears the
unreconciled alert. And a channel moved to another provider leaves no
attempt stranded: the old account's adapter keeps reconciling them."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.integration.observability_helpers import evaluate_alerts, render_metrics
from tidings import IntentState, ManualClock, Tidings
from tidings.observability.alerts import sync_alerts
from tidings.observability.alerts.config import AlertConfig, Objective
from tidings.policies import builtin_document
from tidings.providers.errors import ProviderConfigError
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

SCHEDULE = {
    "first_check_after_seconds": 5,
    "factor": 2,
    "max_interval_seconds": 20,
    "jitter": 0.0,
    "max_checks": 4,
    "give_up_after_seconds": 300,
}
CONFIG = AlertConfig(
    unreconciled=Objective(warn_seconds=60, page_seconds=120, page_recipients=2),
    unknown_window_seconds=3600,
)


def short_polls(t: Tidings) -> None:
    doc: dict[str, Any] = copy.deepcopy(builtin_document("default"))
    doc.update(version="short-polls-4", poll_schedule=SCHEDULE)
    t.publish_policy(doc)


def report_sms(t: Tidings, n: int) -> Any:
    return t.notify(
        idempotency_key=f"report:8421:{n}",
        channel="sms",
        recipient={"ref": f"reader-{n}", "phone": "+14155550123"},
        template="report_notice",
        variables={"report_id": "8421", "report_revision": 7},
        purpose="transactional",
        event_class="report_delivery",
    )


def run(w: Any, clock: ManualClock, seconds: int, step: int = 15) -> None:
    for _ in range(seconds // step):
        clock.advance(step)
        w.sweep_once()
        w.reconcile_once()


def gauge(body: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in body.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match and ",".join(sorted(match.group(1).split(","))) == wanted:
            return float(match.group(2))
    return 0.0


def test_outcomes_that_stay_unknown_are_counted_and_paged_and_keep_the_alert_open(
    tidings: Tidings, clock: ManualClock
) -> None:
    short_polls(tidings)
    tidings.publish_template(
        "report_notice",
        channel="sms",
        body="Report {{ report_id }} is ready.",
        required_variables=["report_id"],
    )
    # SNS: no lookup, no receipts. Accepted is all it will ever say.
    core = simulator(clock, profile="sns")
    w = worker(tidings, core)
    intents = [report_sms(tidings, n) for n in range(1, 4)]
    w.dispatch_once()
    assert {tidings.get(i.id).state for i in intents} == {IntentState.ACCEPTED}
    clock.advance(150)
    [backlog] = evaluate_alerts(tidings.db, clock.now(), CONFIG)
    assert backlog.condition == "unreconciled_backlog" and backlog.severity == "page"
    opened = sync_alerts(tidings.db, clock.now(), CONFIG)
    assert opened is not None and [r["key"] for r in opened.opened] == [backlog.key]

    run(w, clock, 600)  # the budget ends
    assert {tidings.get(i.id).state for i in intents} == {IntentState.UNKNOWN}
    alerts = {a.condition: a for a in evaluate_alerts(tidings.db, clock.now(), CONFIG)}
    assert set(alerts) == {"unreconciled_backlog", "report_delivery_unknown"}
    assert alerts["unreconciled_backlog"].details["given_up_unknown"] == 3
    unknown = alerts["report_delivery_unknown"]
    assert unknown.key == "delivery_unknown:report_delivery:sms"
    assert unknown.severity == "page"  # 3 recipients, page from 2
    d = unknown.details
    assert d["affected_recipients"] == 3 and d["affected_intents"] == 3
    assert d["report_ids"] == ["8421 rev 7"]
    assert d["template_revisions"] == ["report_notice rev 1"]
    assert d["providers"] == ["simulator"]
    assert "Do not resend blind" in d["action"] and "tidings timeline" in d["action"]
    assert "last successful reconciliation" in unknown.summary
    changes = sync_alerts(tidings.db, clock.now(), CONFIG)
    assert changes is not None
    assert [r["key"] for r in changes.opened] == [unknown.key]
    assert changes.resolved == []  # giving up did not clear the backlog alert

    body, _ = render_metrics(tidings.runtime)
    labels = {
        "tenant": tidings.tenant,
        "provider": "simulator",
        "event_class": "report_delivery",
        "channel": "sms",
    }
    assert gauge(body.decode(), "tidings_unknown_intents", **labels) == 3

    clock.advance(3600)  # past the unknown window: both resolve
    assert evaluate_alerts(tidings.db, clock.now(), CONFIG) == []
    changes = sync_alerts(tidings.db, clock.now(), CONFIG)
    assert changes is not None and len(changes.resolved) == 2
    assert len(sends(core)) == 3  # never resent


class Successor(InProcessSimulatorAdapter):
    """Another provider account the SMS channel moved to."""

    name = "successor"


def test_attempts_at_a_retired_provider_are_still_reconciled_after_the_move(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    old_core = simulator(clock, receipt_delay_ms=30_000)
    before = worker(tidings, old_core)
    first = offer(tidings, 1)
    before.dispatch_once()  # accepted at the old account, not yet delivered
    assert tidings.get(first.id).attempts[0].provider == "simulator"

    new_core = simulator(clock)
    built: list[str] = []

    def from_settings(account: str) -> Any:  # what TIDINGS_<NAME>_* would build
        built.append(account)
        return InProcessSimulatorAdapter(old_core)

    moved = worker(tidings, new_core, Successor(new_core), accounts_factory=from_settings)
    second = offer(tidings, 2)
    moved.dispatch_once()
    run(moved, clock, 60, step=5)
    assert tidings.get(first.id).state is IntentState.DELIVERED
    assert tidings.get(second.id).state is IntentState.DELIVERED
    assert tidings.get(second.id).attempts[0].provider == "successor"
    assert built == ["simulator"] and moved.accounts.retired() == ["simulator"]
    assert len(sends(old_core)) == 1 and len(sends(new_core)) == 1


def test_attempts_at_an_account_nobody_can_configure_end_unknown_not_polled_forever(
    tidings: Tidings, clock: ManualClock
) -> None:
    short_polls(tidings)
    publish_offer_template(tidings)
    old_core = simulator(clock, receipt_delay_ms=10_000_000)
    before = worker(tidings, old_core)
    intent = offer(tidings)
    before.dispatch_once()

    def gone(account: str) -> Any:
        raise ProviderConfigError(f"TIDINGS_{account.upper()}_BASE_URL is not set")

    new_core = simulator(clock)
    moved = worker(tidings, new_core, Successor(new_core), accounts_factory=gone)
    run(moved, clock, 900)
    got = tidings.get(intent.id)
    assert got.state is IntentState.UNKNOWN and got.decision_code == "CHECKS_EXHAUSTED"
    assert got.attempts[0].check_count == SCHEDULE["max_checks"]
    [alert] = [
        a
        for a in evaluate_alerts(tidings.db, clock.now(), CONFIG)
        if a.condition == "report_delivery_unknown"
    ]
    assert alert.details["providers"] == ["simulator"]
