"""Synthetic canaries (issue #41 item 2): a round through each provider
account to its test destination, apart from member traffic, with an alert
that carries the provider's answer and clears after a good round."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tidings import ManualClock, Tidings
from tidings.cli import canary as canary_cli
from tidings.cli.main import app
from tidings.dispatch.canary import CanarySchedule, run_round
from tidings.observability.alerts import sync_alerts
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.store import alerts as stored_alerts
from tidings.store import canaries

from .dispatch_helpers import simulator

MEMBER_TABLES = ("intents", "attempts", "suppressions", "rate_counters", "destinations", "events")


def _adapters(core: SimulatorCore) -> dict[str, Any]:
    adapter = InProcessSimulatorAdapter(core)
    return {"sms": adapter, "email": adapter}


def _counts(t: Tidings) -> dict[str, int]:
    with t.db.transaction() as conn:
        return {
            name: conn.execute(f"SELECT count(*) AS n FROM {name}").fetchone()["n"]  # type: ignore[index]
            for name in MEMBER_TABLES
        }


def _canary_alerts(t: Tidings) -> list[dict[str, Any]]:
    with t.db.transaction() as conn:
        return [r for r in stored_alerts.open_alerts(conn) if r["condition"] == "canary_failed"]


def test_a_round_through_the_simulator_records_ok_and_touches_no_member_table(
    tidings: Tidings, clock: ManualClock
) -> None:
    core = simulator(clock)
    before = _counts(tidings)
    found = run_round(tidings.db, _adapters(core), clock.now(), environ={})
    assert [(r.account, r.channel, r.target, r.ok) for r in found.results] == [
        ("simulator", "sms", "simulator-success", True),
        ("simulator", "email", "simulator-success", True),
    ]
    assert _counts(tidings) == before  # no intent, attempt, suppression, counter
    with tidings.db.transaction() as conn:
        latest = canaries.latest(conn)
    assert {(r["channel"], r["ok"], r["code"]) for r in latest} == {
        ("sms", True, "ACCEPTED"),
        ("email", True, "ACCEPTED"),
    }
    # Only the target's name is kept, never the destination.
    assert all("+1555" not in r["answer"] and "@" not in r["answer"] for r in latest)
    assert _canary_alerts(tidings) == []


def test_a_failing_canary_raises_the_alert_with_the_answer_and_a_good_round_clears_it(
    tidings: Tidings, clock: ManualClock
) -> None:
    core = simulator(clock, rate_5xx=1.0)
    before = _counts(tidings)
    found = run_round(tidings.db, _adapters(core), clock.now(), environ={})
    assert [r.ok for r in found.results] == [False, False]
    assert {r.code for r in found.results} == {"PROVIDER_ERROR"}
    assert all("HTTP 500" in r.answer for r in found.results)
    sync_alerts(tidings.db, clock.now())
    [alert] = _canary_alerts(tidings)
    assert alert["key"] == "canary_failed:simulator"
    assert alert["severity"] == "page"
    assert "PROVIDER_ERROR" in alert["summary"] and "HTTP 500" in alert["summary"]
    failures = alert["details"]["failures"]
    assert {f["channel"] for f in failures} == {"sms", "email"}
    assert _counts(tidings) == before  # nothing suppressed, nothing counted

    core.configure({"rate_5xx": 0.0})
    clock.advance(60)
    assert all(r.ok for r in run_round(tidings.db, _adapters(core), clock.now(), {}).results)
    sync_alerts(tidings.db, clock.now())
    assert _canary_alerts(tidings) == []


def test_one_round_per_interval_across_workers(tidings: Tidings, clock: ManualClock) -> None:
    core = simulator(clock)
    first, second = (CanarySchedule(tidings.runtime, _adapters(core)) for _ in range(2))
    assert first.tick(clock.now()) is None  # off by default
    first.interval = second.interval = 600.0
    assert first.tick(clock.now()) is not None
    assert second.tick(clock.now()) is None  # the other worker took this interval's round
    clock.advance(601)
    assert second.tick(clock.now()) is not None
    assert len(core.ledger()) == 4  # two rounds, two channels each


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    return CliRunner()


def test_canary_run_by_hand(
    cli: CliRunner, tidings: Tidings, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = simulator(clock)
    monkeypatch.setattr(canary_cli, "configured_adapters", lambda settings: _adapters(core))
    result = cli.invoke(app, ["canary", "run"])
    assert result.exit_code == 0, result.output
    assert "ok     simulator sms (simulator-success): ACCEPTED" in result.output

    core.configure({"rate_5xx": 1.0})
    result = cli.invoke(app, ["canary", "run", "--json"])
    assert result.exit_code == 1, result.output
    answer = json.loads(result.output)
    assert [(r["channel"], r["ok"]) for r in answer["results"]] == [
        ("sms", False),
        ("email", False),
    ]
    assert [a["key"] for a in _canary_alerts(tidings)] == ["canary_failed:simulator"]


def test_canaries_are_metered_apart(tidings: Tidings, clock: ManualClock) -> None:
    from tests.integration.test_metrics import scrape

    run_round(tidings.db, _adapters(simulator(clock, rate_5xx=1.0)), clock.now(), {})
    m = scrape(tidings)
    labels = (("channel", "sms"), ("provider", "simulator"), ("target", "simulator-success"))
    assert m[("tidings_canary_ok", labels)] == 0.0
    stamp = (("channel", "email"), ("provider", "simulator"))
    assert m[("tidings_canary_last_run_timestamp_seconds", stamp)] == clock.now().timestamp()
    assert not any(name == "tidings_intents" and value for (name, _), value in m.items())


def test_the_console_overview_shows_the_canaries(tidings: Tidings, clock: ManualClock) -> None:
    from tests.security.test_console_session import browser, sign_in

    from .api_support import new_key

    http = browser(tidings)
    assert sign_in(http, new_key(tidings, tidings.tenant, policy=False)).status_code in (302, 303)
    assert "No canary has run" in http.get("/console/").text
    run_round(tidings.db, _adapters(simulator(clock, rate_5xx=1.0)), clock.now(), {})
    page = http.get("/console/")
    assert page.status_code == 200, page.text
    assert "<h2>Canaries</h2>" in page.text
    assert '<span class="badge canary failed">failed</span>' in page.text
    assert "simulator-success" in page.text and "+1555" not in page.text


def test_a_receipt_of_non_delivery_fails_the_canary(tidings: Tidings, clock: ManualClock) -> None:
    core = simulator(clock, delivered_share=0.0, receipt_delay_ms=0.0)
    found = run_round(tidings.db, _adapters(core), clock.now(), {})
    assert [(r.ok, r.answer.startswith("receipt:")) for r in found.results] == [
        (False, True),
        (False, True),
    ]


def test_the_worker_runs_a_due_round_on_a_thread_of_its_own(
    tidings: Tidings, clock: ManualClock
) -> None:
    from .dispatch_helpers import worker

    core = simulator(clock)
    run = worker(tidings, core)
    run.canaries.interval = 900.0
    run._start_canary()
    assert run._canary_thread is not None
    run._canary_thread.join(timeout=30)
    with tidings.db.transaction() as conn:
        assert {(r["channel"], r["ok"]) for r in canaries.latest(conn)} == {
            ("sms", True),
            ("email", True),
        }
    run._start_canary()  # not due again within the interval
    assert len(core.ledger()) == 2
