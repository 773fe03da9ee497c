"""Policy document parsing and the deny-by-default evaluator."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain import policy as p
from tidings.domain.decision_codes import RETRYABLE_CODES
from tidings.domain.decision_codes import DecisionCode as Code
from tidings.domain.limits import SPEND_SCOPE, LimitCheck, LimitKey
from tidings.domain.policy import (
    CapUsage,
    ConsentEvidence,
    Decision,
    PolicyRequest,
    cap_windows,
    dispatch_action,
    evaluate,
    limit_decision,
)
from tidings.domain.policy_document import Policy, PolicyError, parse_policy
from tidings.domain.schedules import is_open
from tidings.policies import builtin_names, load_builtin, loads

EU = load_builtin("eu")
US = load_builtin("us")
# 14:00 in Berlin: inside the EU SMS window.
NOON = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NO_CAPS = {"sms-daily": CapUsage(0), "sms-marketing-weekly": CapUsage(0)}


def doc(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "test",
        "version": "test-1",
        "channels": {"sms": {"countries": ["DE", "FR"]}, "email": {"countries": "*"}},
        "purposes": {
            "transactional": {"consent": {"sms": {"default": "not_required"}}},
            "marketing": {
                "consent": {
                    "sms": {"default": "required", "overrides": {"FR": "not_required"}},
                    "email": {"default": "required"},
                },
                "send_window": False,
            },
        },
        "send_windows": {"sms": {"start": "08:00", "end": "21:00"}},
        "resend_budget": 1,
        "poll_schedule": {
            "first_check_after_seconds": 30,
            "factor": 2,
            "max_interval_seconds": 600,
            "jitter": 0.1,
            "max_checks": 5,
            "give_up_after_seconds": 3600,
        },
        "retention": {
            "recipient_evidence_days": 30,
            "attempt_evidence_days": 30,
            "observation_days": 30,
            "job_facts_days": 30,
        },
        "retry": {"base_seconds": 1, "max_seconds": 60, "jitter": 0.5},
    }
    return base | changes


def req(**changes: Any) -> PolicyRequest:
    base = PolicyRequest(
        channel="sms",
        purpose="transactional",
        event_class="waitlist_offer",
        country="DE",
        timezone="Europe/Berlin",
        consents=(),
        opted_out=False,
        suppressed=False,
        now=NOON,
        recent_sends=NO_CAPS,
    )
    return dataclasses.replace(base, **changes)


def consent(purpose: str = "marketing", channel: str = "sms", **kw: Any) -> ConsentEvidence:
    return ConsentEvidence(channel, purpose, kw.pop("captured_at", NOON - timedelta(days=1)), **kw)


# --- the document ------------------------------------------------------------


def test_builtin_policies_load() -> None:
    assert {"eu", "us"} <= set(builtin_names())
    assert all(load_builtin(name).name == name for name in builtin_names())
    assert (EU.version, US.version) == ("eu-2026-11.1", "us-2026-11.1")
    assert EU.countries["email"] is None
    assert "DE" in (EU.countries["sms"] or ())


def test_unknown_builtin_name_is_refused() -> None:
    with pytest.raises(PolicyError, match="no built-in policy"):
        load_builtin("../eu")


def test_policy_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        EU.version = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        EU.purposes["new"] = EU.purposes["marketing"]  # type: ignore[index]


def test_minimal_document_parses_with_defaults() -> None:
    policy = parse_policy(doc())
    assert policy.frequency_caps == () and policy.rate_limits == ()
    assert policy.purposes["transactional"].send_window is True


def _break(path: list[Any], value: Any) -> dict[str, Any]:
    broken = copy.deepcopy(doc())
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return broken


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["surprise"], 1, "policy: unknown key"),
        (["channels", "fax"], {"countries": "*"}, "channels: unknown key"),
        (["channels", "sms", "countries"], ["UK"], "not an ISO 3166"),
        (["channels", "sms", "countries"], "DE", "expected a list"),
        (["purposes", "marketing", "consent", "sms", "default"], "maybe", "one of"),
        (["purposes", "marketing", "send_window"], "yes", "true or false"),
        (["purposes", "marketing", "consent", "sms", "overrides"], {"XX": "required"}, "XX"),
        (["send_windows", "sms", "start"], "8am", "HH:MM"),
        (["send_windows", "sms", "end"], "08:00", "differ"),
        (["poll_schedule", "jitter"], 1.5, "poll_schedule: jitter"),
        (["poll_schedule", "max_checks"], 2.5, "max_checks"),
        (["retry", "max_seconds"], 0.5, "retry: max_seconds"),
        (["resend_budget"], -1, "resend_budget"),
        (["resend_budget"], True, "resend_budget"),
        (["version"], "", "version"),
        (["retention", "observation_days"], 0, "observation_days"),
        (["rate_limits"], [{"scope": "galaxy", "limit": 1, "per_seconds": 1}], "scope"),
        (["rate_limits"], [{"scope": "tenant", "limit": 1, "per_seconds": 1, "x": 1}], "x"),
        (["country_spend_limits"], {"email": {}}, "unknown key"),
        (["country_spend_limits"], {"sms": {"DE": {"segments": 0, "per_seconds": 1}}}, "segm"),
    ],
)
def test_invalid_documents_are_rejected_with_the_field(
    path: list[Any], value: Any, message: str
) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy(_break(path, value))


def test_missing_key_is_named() -> None:
    broken = doc()
    del broken["retry"]
    with pytest.raises(PolicyError, match=r"missing key.*retry"):
        parse_policy(broken)


def test_duplicate_cap_ids_are_rejected() -> None:
    cap = {"id": "c", "channel": "sms", "limit": 1, "per_seconds": 60}
    with pytest.raises(PolicyError, match="unique"):
        parse_policy(doc(frequency_caps=[cap, cap]))


def test_duplicate_json_keys_are_rejected() -> None:
    with pytest.raises(PolicyError, match="duplicate"):
        loads('{"name": "a", "name": "b"}')


# --- evaluation order and codes ---------------------------------------------


def test_allowed_transactional_sms_in_window() -> None:
    decision = evaluate(EU, req())
    assert decision == Decision(True, Code.ALLOWED, "eu-2026-11.1")
    assert not decision.final and not decision.retryable


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"destination_valid": False}, Code.DESTINATION_INVALID),
        ({"country": None}, Code.DESTINATION_INVALID),
        ({"purpose": "gossip"}, Code.PURPOSE_UNKNOWN),
        ({"channel": "fax"}, Code.CHANNEL_DISABLED),
        ({"country": "US"}, Code.COUNTRY_DISABLED),
        ({"suppressed": True, "suppression_reason": "operator"}, Code.SUPPRESSED),
        ({"suppressed": True, "suppression_reason": "invalid"}, Code.SUPPRESSED),
        ({"suppressed": True, "suppression_reason": "hard_bounce"}, Code.BOUNCED),
        ({"suppressed": True, "suppression_reason": "complaint"}, Code.COMPLAINED),
        ({"opted_out": True}, Code.OPTED_OUT),
        ({"purpose": "marketing"}, Code.CONSENT_MISSING),
        ({"expires_at": NOON}, Code.EXPIRED),
    ],
)
def test_final_denials(changes: dict[str, Any], code: str) -> None:
    decision = evaluate(EU, req(**changes))
    assert (decision.code, decision.final, decision.retry_after_seconds) == (code, True, None)


def test_suppression_reason_is_kept() -> None:
    assert evaluate(EU, req(suppressed=True, suppression_reason="hard_bounce")).detail == (
        "hard_bounce"
    )


def test_earlier_checks_win() -> None:
    late = datetime(2026, 6, 1, 21, 30, tzinfo=UTC)
    everything = req(purpose="marketing", opted_out=True, suppressed=True, now=late)
    assert evaluate(EU, everything).code == Code.SUPPRESSED
    assert evaluate(EU, req(purpose="marketing", now=late)).code == Code.CONSENT_MISSING
    assert evaluate(EU, req(now=late, expires_at=late)).code == Code.EXPIRED


def test_channel_missing_from_the_purpose_is_disabled() -> None:
    decision = evaluate(parse_policy(doc()), req(channel="email", country=None))
    assert decision.code == Code.CHANNEL_DISABLED


def test_email_without_country_is_allowed_only_under_star() -> None:
    email = req(
        channel="email", country=None, purpose="marketing", consents=(consent(channel="email"),)
    )
    assert evaluate(parse_policy(doc()), email).allowed
    closed = _break(["channels", "email", "countries"], ["DE"])
    assert evaluate(parse_policy(closed), email).code == Code.COUNTRY_DISABLED


# --- consent -----------------------------------------------------------------


def test_valid_marketing_consent_allows() -> None:
    assert evaluate(EU, req(purpose="marketing", consents=(consent(),))).allowed


@pytest.mark.parametrize(
    "evidence",
    [
        consent(revoked_at=NOON - timedelta(hours=1)),
        consent(revoked_at=NOON),
        consent(captured_at=NOON + timedelta(seconds=1)),
        consent(purpose="transactional"),
        consent(channel="email"),
    ],
)
def test_evidence_that_does_not_count(evidence: ConsentEvidence) -> None:
    assert evaluate(EU, req(purpose="marketing", consents=(evidence,))).code == Code.CONSENT_MISSING


def test_revocation_after_now_has_not_happened_yet() -> None:
    evidence = consent(revoked_at=NOON + timedelta(hours=1))
    assert evaluate(EU, req(purpose="marketing", consents=(evidence,))).allowed


def test_country_override_can_lift_the_requirement() -> None:
    policy = parse_policy(doc())
    assert evaluate(policy, req(purpose="marketing", country="FR")).allowed
    assert evaluate(policy, req(purpose="marketing", country="DE")).code == Code.CONSENT_MISSING


def test_us_transactional_sms_needs_recorded_consent() -> None:
    us = req(country="US", timezone="America/New_York", recent_sends=_us_caps())
    assert evaluate(US, us).code == Code.CONSENT_MISSING
    assert evaluate(US, dataclasses.replace(us, consents=(consent("transactional"),))).allowed


def _us_caps() -> dict[str, CapUsage]:
    return {"sms-daily": CapUsage(0), "sms-marketing-daily": CapUsage(0)}


# --- send windows ------------------------------------------------------------


def test_quiet_window_is_retryable_until_the_next_local_morning() -> None:
    night = datetime(2026, 6, 1, 20, 30, tzinfo=UTC)  # 22:30 in Berlin
    decision = evaluate(EU, req(now=night))
    assert decision.code == Code.QUIET_WINDOW and decision.retryable
    assert decision.not_before == datetime(2026, 6, 2, 8, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert decision.retry_after_seconds == 9.5 * 3600


def test_us_security_codes_ignore_quiet_hours() -> None:
    night = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)  # 03:00 in New York
    code = req(purpose="security", country="US", timezone="America/New_York", now=night)
    assert evaluate(US, dataclasses.replace(code, recent_sends=_us_caps())).allowed


def test_unknown_timezone_falls_back_to_the_number_zones() -> None:
    night = datetime(2026, 6, 1, 20, 30, tzinfo=UTC)
    guessed = req(timezone=None, fallback_timezones=("Europe/Berlin",), now=night)
    assert evaluate(EU, guessed).code == Code.QUIET_WINDOW


def test_no_known_zone_is_a_final_denial() -> None:
    unknown = req(timezone="Mars/Olympus", fallback_timezones=())
    assert evaluate(EU, unknown).code == Code.NO_SEND_WINDOW
    assert evaluate(EU, unknown).final


# --- frequency caps ----------------------------------------------------------


def test_cap_reached_waits_for_the_oldest_send_to_age_out() -> None:
    oldest = NOON - timedelta(hours=20)
    sends = NO_CAPS | {"sms-daily": CapUsage(10, oldest)}
    decision = evaluate(EU, req(recent_sends=sends))
    assert (decision.code, decision.detail) == (Code.RECIPIENT_LIMIT, "sms-daily")
    assert decision.not_before == oldest + timedelta(days=1)


def test_cap_without_oldest_waits_a_whole_window() -> None:
    sends = NO_CAPS | {"sms-daily": CapUsage(10)}
    assert evaluate(EU, req(recent_sends=sends)).not_before == NOON + timedelta(days=1)


def test_the_latest_clearing_cap_wins() -> None:
    sends = {"sms-daily": CapUsage(10), "sms-marketing-weekly": CapUsage(2)}
    decision = evaluate(EU, req(purpose="marketing", consents=(consent(),), recent_sends=sends))
    assert decision.detail == "sms-marketing-weekly"


def test_missing_cap_count_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="sms-daily"):
        evaluate(EU, req(recent_sends={}))


def test_cap_windows_say_what_to_count() -> None:
    windows = cap_windows(EU, "sms", "marketing", NOON)
    assert [(w.cap_id, w.since) for w in windows] == [
        ("sms-daily", NOON - timedelta(days=1)),
        ("sms-marketing-weekly", NOON - timedelta(days=7)),
    ]
    assert [w.cap_id for w in cap_windows(EU, "sms", "security", NOON)] == ["sms-daily"]


# --- limits, actions ----------------------------------------------------------


def test_limit_decisions() -> None:
    rate = LimitKey("tenant", "tenant:sms:1s:t", 1, 1, 1)
    spend = LimitKey(SPEND_SCOPE, "country_spend:sms:86400s:DE", 1, 86400, 3)
    later = NOON + timedelta(seconds=1)
    assert limit_decision(EU, LimitCheck(True), NOON).allowed
    assert limit_decision(EU, LimitCheck(False, later, rate), NOON).code == Code.RATE_LIMITED
    assert limit_decision(EU, LimitCheck(False, later, rate), NOON).retry_after_seconds == 1
    assert limit_decision(EU, LimitCheck(False, None, spend), NOON).final


@pytest.mark.parametrize(
    ("decision", "expires_at", "action"),
    [
        (Decision(True, Code.ALLOWED, "v"), None, "send"),
        (Decision(False, Code.CONSENT_MISSING, "v"), None, "suppress"),
        (Decision(False, Code.EXPIRED, "v"), NOON, "expire"),
        (Decision(False, Code.QUIET_WINDOW, "v", 60, NOON), None, "reschedule"),
        (
            Decision(False, Code.QUIET_WINDOW, "v", 60, NOON),
            NOON + timedelta(seconds=1),
            "reschedule",
        ),
        (Decision(False, Code.QUIET_WINDOW, "v", 60, NOON), NOON, "expire"),
    ],
)
def test_dispatch_action(decision: Decision, expires_at: datetime | None, action: str) -> None:
    assert dispatch_action(decision, expires_at) == action


# --- properties ----------------------------------------------------------------

instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
)
zone_names = st.sampled_from(
    ["Europe/Berlin", "Europe/Lisbon", "Europe/Helsinki", "America/New_York", "Pacific/Honolulu"]
)
evidence = st.builds(
    ConsentEvidence,
    channel=st.sampled_from(["sms", "email"]),
    purpose=st.sampled_from(["marketing", "transactional", "security"]),
    captured_at=instants,
    revoked_at=st.none() | instants,
)
requests = st.builds(
    PolicyRequest,
    channel=st.sampled_from(["sms", "email"]),
    purpose=st.sampled_from(["marketing", "transactional", "security", "operational"]),
    event_class=st.just("e"),
    country=st.sampled_from([None, "DE", "FR", "US", "PR", "GB"]),
    timezone=st.none() | zone_names,
    consents=st.lists(evidence, max_size=3).map(tuple),
    opted_out=st.booleans(),
    suppressed=st.booleans(),
    now=instants,
    recent_sends=st.just(
        {
            c: CapUsage(0)
            for c in (
                "sms-daily",
                "sms-marketing-daily",
                "sms-marketing-weekly",
                "email-marketing-daily",
            )
        }
    ),
    fallback_timezones=st.lists(zone_names, max_size=2).map(tuple),
)


@given(st.sampled_from([EU, US]), requests)
def test_consent_required_without_valid_evidence_is_never_allowed(
    policy: Policy, request: PolicyRequest
) -> None:
    rule = policy.purposes[request.purpose].consent.get(request.channel)
    needs = rule is not None and rule.requires_consent(request.country)
    if needs and not p.has_consent(request):
        assert not evaluate(policy, request).allowed
    stripped = dataclasses.replace(request, consents=())
    if needs:
        assert not evaluate(policy, stripped).allowed


@given(st.sampled_from([EU, US]), requests)
def test_quiet_window_denial_points_inside_the_next_window(
    policy: Policy, request: PolicyRequest
) -> None:
    decision = evaluate(policy, request)
    if decision.code != Code.QUIET_WINDOW:
        return
    window = policy.send_windows[request.channel]
    assert decision.not_before is not None and decision.not_before > request.now
    zones = p.recipient_zones(request)
    assert zones and all(is_open(window, z, decision.not_before) for z in zones)
    assert decision.retry_after_seconds is not None and decision.retry_after_seconds > 0


@given(st.sampled_from([EU, US]), requests)
def test_codes_and_retryability_agree(policy: Policy, request: PolicyRequest) -> None:
    decision = evaluate(policy, request)
    assert decision.policy_version == policy.version
    assert decision.allowed == (decision.code == Code.ALLOWED)
    assert decision.retryable == (decision.code in RETRYABLE_CODES)
    assert decision.final == (not decision.allowed and not decision.retryable)
