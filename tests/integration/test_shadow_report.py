"""Shadow mode that can end (#23 item 7, seed 000's rollout plan): shadow
decisions end `suppressed` for good (another system sends), and a report
compares them with what the live system did, so a rollout can be judged,
through the library, HTTP and `tidings replay --from-shadow`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.conftest import TEST_SECRET
from tidings import IntentState, InvalidInput, ManualClock, Tidings
from tidings.cli import app

from .api_support import auth, client, new_key
from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

NOON_NEW_YORK = datetime(2026, 6, 1, 16, 0, tzinfo=UTC)
KEY = "waitlist:771:{}:offer:1"


def shadow_rollout(tidings: Tidings, clock: ManualClock) -> dict[str, Any]:
    """Four offers decided in shadow: two sends, one marketing SMS without
    consent (suppress), one with a passed deadline (expire)."""
    publish_offer_template(tidings)
    clock.set(NOON_NEW_YORK)
    core = simulator(clock)
    tidings.set_control("shadow_mode", True, channel="sms")
    made = {
        "send-1": offer(tidings, 1),
        "send-2": offer(tidings, 2),
        "no-consent": offer(tidings, 3, purpose="marketing"),
        "late": offer(tidings, 4, expires_at=clock.now() + timedelta(seconds=1)),
    }
    clock.advance(2)
    worker(tidings, core).dispatch_once()
    assert sends(core) == []  # shadow never calls a provider
    for intent in made.values():
        got = tidings.get(intent.id)
        assert got.state is IntentState.SUPPRESSED or got.state is IntentState.EXPIRED
    return made


def live_says(**sent: bool) -> list[dict[str, Any]]:
    """The live system's outcomes for offers by number: `n1=True` is offer 1 sent."""
    return [
        {"idempotency_key": KEY.format(1800 + int(name.removeprefix("n"))), "sent": value}
        for name, value in sent.items()
    ]


def test_the_report_counts_agreement_and_names_each_difference(
    tidings: Tidings, clock: ManualClock
) -> None:
    made = shadow_rollout(tidings, clock)
    # The live system sent 1 and 3 (marketing without consent!), not 2.
    report = tidings.shadow_report(live_says(n1=True, n2=False, n3=True, n9=True))
    assert report["shadow_decisions"] == 3  # the expired offer was never decided
    assert report["by_action"] == {"send": 2, "suppress": 1}
    assert report["by_code"] == {"ALLOWED": 2, "CONSENT_MISSING": 1}
    assert (report["agreed"], report["differences"]) == (1, 2)
    assert report["matrix"] == {"send": {"sent": 1, "not_sent": 1}, "suppress": {"sent": 1}}
    by_key = {d["idempotency_key"]: d for d in report["difference_examples"]}
    assert by_key[KEY.format(1802)]["tidings"]["action"] == "send"
    assert by_key[KEY.format(1802)]["live"] == "not_sent"
    assert by_key[KEY.format(1803)]["tidings"]["code"] == "CONSENT_MISSING"
    assert by_key[KEY.format(1803)]["intent_id"] == str(made["no-consent"].id)
    assert report["live_without_shadow_decision_examples"] == [KEY.format(1809)]


def test_without_live_outcomes_the_report_counts_the_decisions(
    tidings: Tidings, clock: ManualClock
) -> None:
    shadow_rollout(tidings, clock)
    report = tidings.shadow_report()
    assert report["compared_with_live"] is False and report["differences"] == 0
    assert report["by_action"] == {"send": 2, "suppress": 1}
    later = tidings.shadow_report(since=clock.now() + timedelta(seconds=1))
    assert later["shadow_decisions"] == 0


def test_a_quiet_window_shadow_decision_is_a_deferral_not_an_agreement(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    clock.set(datetime(2026, 6, 2, 3, 0, tzinfo=UTC))  # 20:00 in San Francisco
    tidings.put_contact("m1", timezone="America/Los_Angeles")
    tidings.publish_policy(_quiet_after(19))
    tidings.set_control("shadow_mode", True)
    offer(
        tidings,
        1,
        recipient={"ref": "m1", "phone": "+14155550123"},
        expires_at=clock.now() + timedelta(days=2),
    )
    worker(tidings, simulator(clock)).dispatch_once()
    report = tidings.shadow_report(live_says(n1=True))
    assert report["matrix"] == {"reschedule": {"sent": 1}}
    [diff] = report["difference_examples"]
    assert diff["tidings"]["code"] == "QUIET_WINDOW"


def _quiet_after(hour: int) -> dict[str, Any]:
    import copy

    from tidings.policies import builtin_document

    doc = copy.deepcopy(builtin_document("default"))
    doc["version"] = "quiet-evenings"
    doc["send_windows"] = {"sms": {"start": "08:00", "end": f"{hour}:00"}}
    for purpose in doc["purposes"].values():
        purpose["send_window"] = True
    return doc


def test_bad_live_outcomes_are_refused_by_field(tidings: Tidings) -> None:
    with pytest.raises(InvalidInput, match=r"live\[1\]\.sent"):
        tidings.shadow_report([{"idempotency_key": "a", "sent": True}, {"idempotency_key": "b"}])
    with pytest.raises(InvalidInput, match="given twice"):
        tidings.shadow_report([{"idempotency_key": "a", "sent": True}] * 2)


def test_the_http_report(tidings: Tidings, clock: ManualClock) -> None:
    shadow_rollout(tidings, clock)
    http: TestClient = client(tidings)
    http.headers.update(auth(new_key(tidings, tidings.tenant)))
    answer = http.post(
        "/v1/controls/shadow-mode/report", json={"live": live_says(n1=True, n2=True)}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["agreed"], body["differences"]) == (2, 1)  # the suppress had no live answer
    assert body["matrix"]["suppress"] == {"absent": 1}
    bad = http.post("/v1/controls/shadow-mode/report", json={"live": [{"sent": True}]})
    assert bad.status_code == 422


def test_the_cli_report_exits_one_on_a_difference(
    tidings: Tidings,
    clock: ManualClock,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shadow_rollout(tidings, clock)
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("TIDINGS_SECRET_KEY", TEST_SECRET)
    live = tmp_path / "live.jsonl"
    live.write_text("\n".join(json.dumps(o) for o in live_says(n1=True, n2=False)))

    def run(*args: str) -> Any:
        return CliRunner().invoke(app, ["replay", "--from-shadow", *args])

    differs = run("--live", str(live), "--json")
    assert differs.exit_code == 1, differs.output
    assert json.loads(differs.stdout)["differences"] == 2
    counted = run()
    assert counted.exit_code == 0, counted.output
    assert "would: send 2, suppress 1" in counted.stdout
    live.write_text("not json")
    assert run("--live", str(live)).exit_code == 2
    assert run("--since", "yesterday").exit_code == 2
