"""Shadow replay of decision fixtures: shipped fixtures, diffs, malformed files."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.states import AttemptState, IntentState
from tidings.replay import (
    EVENT_NAMES,
    EXIT_DIFFERENCES,
    EXIT_INVALID,
    EXIT_OK,
    FixtureError,
    Step,
    load_fixtures,
    replay,
    replay_command,
    replay_events,
    shipped_fixtures,
)

# 14:00 in Berlin: inside the EU SMS window.
CASE: dict[str, Any] = {
    "name": "eu-offer",
    "why": "a waitlist offer inside the window",
    "policy": "eu",
    "request": {
        "channel": "sms",
        "purpose": "transactional",
        "event_class": "waitlist_offer",
        "country": "DE",
        "timezone": "Europe/Berlin",
        "now": "2026-06-01T12:00:00Z",
        "recent_sends": {"sms-daily": {"count": 0}},
    },
    "events": ["claim", "provider_accepted", "delivered"],
    "expect": {
        "decision": {"allowed": True, "code": "ALLOWED"},
        "action": "send",
        "final_state": "delivered",
        "sends": 1,
    },
}


def case(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(CASE)
    doc.update(changes)
    return doc


def write(tmp_path: Path, *cases: dict[str, Any], name: str = "cases.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"cases": list(cases)}), "utf-8")
    return path


# --- shipped fixtures ---------------------------------------------------------


def test_shipped_fixtures_all_pass() -> None:
    report = replay(shipped_fixtures())
    assert report.ok, report.format_text()
    assert len(report.cases) >= 20
    assert report.exit_code() == EXIT_OK


def test_shipped_fixtures_cover_the_rollout_scenarios() -> None:
    cases = load_fixtures(shipped_fixtures())
    codes = {str(c.expect["decision.code"]) for c in cases}
    assert codes >= {
        "ALLOWED",
        "CONSENT_MISSING",
        "COUNTRY_DISABLED",
        "QUIET_WINDOW",
        "EXPIRED",
        "OPTED_OUT",
        "SUPPRESSED",
        "RECIPIENT_LIMIT",
    }
    assert {c.policy.name for c in cases} >= {"eu", "us"}
    assert all(len(c.why) > 20 for c in cases)
    prefixes = {c.name.split("-")[0] for c in cases}
    assert prefixes >= {"eu", "us", "race", "expired", "deadline", "duplicate", "delayed", "cap"}


def test_a_clean_run_prints_pass_lines_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert replay_command(write(tmp_path, case()), as_json=False) == EXIT_OK
    out = capsys.readouterr().out
    assert "PASS eu-offer [cases.json]" in out
    assert out.rstrip().endswith("1 cases: 1 passed, 0 failed")


def test_inline_policy_document(tmp_path: Path) -> None:
    from tidings.policies import builtin_document

    doc = builtin_document("eu")
    doc["channels"]["sms"]["countries"] = ["FR"]
    report = replay(
        write(
            tmp_path,
            case(
                policy=doc,
                events=[],
                expect={"decision": {"allowed": False, "code": "COUNTRY_DISABLED"}},
            ),
        )
    )
    assert report.ok, report.format_text()


# --- differences ---------------------------------------------------------------


def wrong_case() -> dict[str, Any]:
    # 22:30 in Berlin: the real answer is QUIET_WINDOW until 08:00, no send.
    doc = case(name="wrong-on-purpose")
    doc["request"]["now"] = "2026-06-01T20:30:00Z"
    doc["events"] = ["claim", "claim"]
    doc["expect"] = {
        "decision": {"allowed": True, "code": "ALLOWED", "not_before": "2026-06-02T07:00:00+02:00"},
        "action": "send",
        "final_state": "sending",
        "sends": 2,
    }
    return doc


def test_wrong_fixture_fails_with_a_readable_diff(tmp_path: Path) -> None:
    report = replay(write(tmp_path, wrong_case(), case()))
    assert not report.ok
    assert report.exit_code() == EXIT_DIFFERENCES
    assert [c.case.name for c in report.failed] == ["wrong-on-purpose"]
    text = report.format_text()
    assert "FAIL wrong-on-purpose [cases.json]" in text
    assert "why: a waitlist offer inside the window" in text
    assert "decision.allowed: expected true, got false" in text
    assert "decision.code: expected ALLOWED, got QUIET_WINDOW" in text
    # the actual time is shown in the offset the fixture used
    assert (
        "decision.not_before: expected 2026-06-02T07:00:00+02:00, got 2026-06-02T08:00:00+02:00"
    ) in text
    assert "action: expected send, got reschedule" in text
    assert "final_state: expected sending, got pending" in text
    assert "sends: expected 2, got 0" in text
    assert "event 1: claim as defer: pending -> pending [applied]" in text
    assert "event 2: claim as defer: pending -> pending [applied]" in text
    assert "PASS eu-offer" in text
    assert text.rstrip().endswith("2 cases: 1 passed, 1 failed")


def test_wrong_fixture_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert replay_command(write(tmp_path, wrong_case()), as_json=True) == EXIT_DIFFERENCES
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["failed"] == 1
    result = out["cases"][0]
    diffs = {d["field"]: (d["expected"], d["actual"]) for d in result["differences"]}
    assert diffs["decision.code"] == ("ALLOWED", "QUIET_WINDOW")
    assert diffs["sends"] == (2, 0)
    assert diffs["decision.not_before"][1] == "2026-06-02T08:00:00+02:00"
    assert result["actual"]["effects"] == ["applied", "applied"]
    assert result["trace"][0]["applied_as"] == "defer"


def test_only_pinned_fields_are_compared(tmp_path: Path) -> None:
    doc = case(expect={"decision": {"allowed": True, "code": "ALLOWED"}})
    assert replay(write(tmp_path, doc)).ok


def test_null_not_before_is_pinned(tmp_path: Path) -> None:
    doc = wrong_case()
    doc["expect"] = {"decision": {"allowed": False, "code": "QUIET_WINDOW", "not_before": None}}
    text = replay(write(tmp_path, doc)).format_text()
    assert "decision.not_before: expected none, got 2026-06-02T06:00:00+00:00" in text


# --- malformed fixtures -----------------------------------------------------------


def with_request(**changes: Any) -> dict[str, Any]:
    doc = case()
    doc["request"].update(changes)
    return doc


def without(key: str) -> dict[str, Any]:
    doc = case()
    del doc[key]
    return doc


MALFORMED = [
    (without("why"), "cases[0]: missing key(s) why"),
    (case(colour="red"), "cases[0]: unknown key(s) colour"),
    (case(events=["claim", "deliverd"]), "cases[0].events[1]: 'deliverd' is not one of"),
    (case(events=[{"event": "cancel", "attempt": 1}]), "cases[0].events[0].attempt"),
    (case(policy="mars"), "cases[0].policy: no built-in policy named 'mars'"),
    (case(policy={"name": "x"}), "cases[0].policy: policy: missing key(s)"),
    (with_request(now="2026-06-01T12:00:00"), "cases[0].request.now: expected an ISO 8601"),
    (with_request(now="yesterday"), "cases[0].request.now"),
    (with_request(recent_sends={}), "cases[0].request.recent_sends: missing a count for"),
    (with_request(opted_out="no"), "cases[0].request.opted_out: expected true or false"),
    (with_request(consents=[{"channel": "sms"}]), "cases[0].request.consents[0]: missing"),
    (case(expect={"decision": {"allowed": True}}), "cases[0].expect.decision: missing key(s) code"),
    (
        case(expect={"decision": {"allowed": True, "code": "ALLOWD"}}),
        "cases[0].expect.decision.code: 'ALLOWD' is not one of",
    ),
    (
        case(expect={"decision": {"allowed": True, "code": "ALLOWED"}, "final_state": "done"}),
        "cases[0].expect.final_state: 'done' is not one of",
    ),
    (
        case(expect={"decision": {"allowed": True, "code": "ALLOWED"}, "effects": ["applied"]}),
        "cases[0].expect.effects: 1 effects for 3 events",
    ),
    (
        case(expect={"decision": {"allowed": True, "code": "ALLOWED"}, "sends": -1}),
        "cases[0].expect.sends: expected an integer >= 0",
    ),
]


@pytest.mark.parametrize(("doc", "message"), MALFORMED)
def test_malformed_case_names_file_and_field(tmp_path: Path, doc: Any, message: str) -> None:
    path = write(tmp_path, doc, name="broken.json")
    with pytest.raises(FixtureError) as err:
        replay(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"cases": [], "cases": []}', "duplicate key(s) cases"),
        ('{"cases": []}', "cases: expected at least one case"),
        ("[]", "file: expected an object"),
        ('{"cases": {}}', "cases: expected a list"),
    ],
)
def test_malformed_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(text, "utf-8")
    with pytest.raises(FixtureError, match=r"broken\.json") as err:
        load_fixtures(path)
    assert message in str(err.value)


def test_malformed_fixture_exits_two_with_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, case(), name="a.json")
    write(tmp_path, case(events=["claim", "teleport"]), name="b.json")
    assert replay_command(tmp_path, as_json=False) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "b.json: cases[0].events[1]" in err
    assert replay_command(tmp_path, as_json=True) == EXIT_INVALID
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_missing_path_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="no such file or directory"):
        load_fixtures(tmp_path / "nope.json")
    with pytest.raises(FixtureError, match=r"no fixture files \(\*\.json\)"):
        load_fixtures(tmp_path)


def test_case_names_are_unique_across_files(tmp_path: Path) -> None:
    write(tmp_path, case(), name="a.json")
    write(tmp_path, case(), name="b.json")
    with pytest.raises(FixtureError, match=r"b\.json: case name 'eu-offer' is also used in"):
        load_fixtures(tmp_path)


# --- replay semantics ---------------------------------------------------------------


def steps(*names: str) -> list[Step]:
    return [Step(n) for n in names]


def test_late_observations_after_cancel_touch_only_the_attempt() -> None:
    out = replay_events(
        steps("claim", "cancel", "provider_accepted", "delivered"), action="send", resend_budget=1
    )
    assert out.state is IntentState.CANCELED
    assert out.sends == 1
    assert [t.effect for t in out.trace] == ["applied", "applied", "attempt_only", "attempt_only"]


def test_claim_follows_the_gate_verdict() -> None:
    for action, state in [
        ("reschedule", IntentState.PENDING),
        ("suppress", IntentState.SUPPRESSED),
        ("expire", IntentState.EXPIRED),
    ]:
        out = replay_events(steps("claim"), action=action, resend_budget=1)  # type: ignore[arg-type]
        assert (out.state, out.sends) == (state, 0)


event_names = st.sampled_from(EVENT_NAMES)
event_lists = st.lists(event_names, max_size=25)


@given(names=event_lists, budget=st.integers(0, 3))
def test_replaying_each_event_twice_changes_nothing(names: list[str], budget: int) -> None:
    once = replay_events(steps(*names), action="send", resend_budget=budget)
    twice = replay_events(
        steps(*(n for n in names for _ in range(2))), action="send", resend_budget=budget
    )
    assert (twice.state, twice.sends, twice.attempts) == (once.state, once.sends, once.attempts)


# An explicit `undelivered_retryable` is a receipt the ledger already judged
# resendable, so it bypasses the budget by definition; `undelivered` is the
# raw receipt the budget applies to.
budgeted_lists = st.lists(event_names.filter(lambda n: n != "undelivered_retryable"), max_size=25)


@given(names=budgeted_lists, budget=st.integers(0, 3))
def test_no_sms_beyond_the_budget_or_after_cancel_or_expiry(names: list[str], budget: int) -> None:
    out = replay_events(steps(*names), action="send", resend_budget=budget)
    assert out.reached <= budget + 1
    stopped = False
    for entry in out.trace:
        if stopped:
            assert entry.applied_as != "claim"
        stopped = stopped or entry.after in (IntentState.CANCELED, IntentState.EXPIRED)


def test_a_late_answer_leaves_a_recovered_attempt_to_reconciliation() -> None:
    # As record._settle: once a recovered lease marked the attempt unknown,
    # the worker's late rejection settles neither the attempt nor the intent.
    out = replay_events(
        steps("claim", "outcome_unknown", "provider_rejected"), action="send", resend_budget=1
    )
    assert (out.state, out.attempts) == (IntentState.RECONCILING, (AttemptState.UNKNOWN,))
    assert out.trace[-1].effect == "ignored"
