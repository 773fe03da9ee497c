from __future__ import annotations

from datetime import UTC, datetime

from tidings.domain.channels import ChannelFacts, Mode, resolve
from tidings.domain.policy import Decision

ALLOW = Decision(True, "ALLOWED", "p1")
CONSENT = Decision(False, "CONSENT_MISSING", "p1")
QUIET = Decision(False, "QUIET_WINDOW", "p1", 60, datetime(2026, 1, 1, 8, tzinfo=UTC))


def facts(**decisions: Decision | None) -> dict[str, ChannelFacts]:
    return {c: ChannelFacts(c, d is not None, d) for c, d in decisions.items()}


def test_preferred_mode_takes_the_first_preference_only() -> None:
    [o] = resolve(["email", "sms"], ["sms", "email"], Mode.PREFERRED, facts(sms=ALLOW, email=ALLOW))
    assert (o.channel, o.sendable) == ("sms", True)


def test_preferred_mode_does_not_fall_back_when_the_preference_is_denied() -> None:
    [o] = resolve(
        ["email", "sms"], ["sms", "email"], Mode.PREFERRED, facts(sms=CONSENT, email=ALLOW)
    )
    assert (o.channel, o.sendable, o.code, o.excluded_as) == (
        "sms",
        False,
        "CONSENT_MISSING",
        "no_permitted_channel",
    )


def test_a_preference_outside_the_job_channels_is_no_permitted_channel() -> None:
    [o] = resolve(["email"], ["sms"], Mode.PREFERRED, facts(email=ALLOW))
    assert (o.excluded_as, o.code) == ("no_permitted_channel", "NOT_PREFERRED")


def test_all_mode_excludes_each_channel_on_its_own() -> None:
    out = resolve(["email", "sms"], [], Mode.ALL, facts(email=ALLOW, sms=CONSENT))
    assert [(o.channel, o.sendable, o.excluded_as) for o in out] == [
        ("email", True, None),
        ("sms", False, "suppressed"),
    ]


def test_retryable_denials_still_queue() -> None:
    [o] = resolve(["sms"], [], Mode.PREFERRED, facts(sms=QUIET))
    assert o.sendable


def test_missing_destination_is_named() -> None:
    [o] = resolve(["sms"], [], Mode.PREFERRED, facts(sms=None))
    assert (o.code, o.excluded_as) == ("NO_DESTINATION", "no_permitted_channel")


def test_first_available_sends_on_the_first_channel_with_a_destination() -> None:
    [o] = resolve(["sms", "email"], [], Mode.FIRST_AVAILABLE, facts(sms=None, email=ALLOW))
    assert (o.channel, o.sendable, o.code) == ("email", True, "ALLOWED")
    assert o.passed_over == (("sms", "NO_DESTINATION"),)


def test_first_available_follows_preferences_and_passes_over_a_denial() -> None:
    out = resolve(
        ["sms", "email"], ["email", "sms"], Mode.FIRST_AVAILABLE, facts(sms=ALLOW, email=CONSENT)
    )
    assert [(o.channel, o.sendable, o.passed_over) for o in out] == [
        ("sms", True, (("email", "CONSENT_MISSING"),))
    ]


def test_first_available_takes_the_first_when_it_is_sendable() -> None:
    [o] = resolve(["sms", "email"], [], Mode.FIRST_AVAILABLE, facts(sms=ALLOW, email=ALLOW))
    assert (o.channel, o.sendable, o.passed_over) == ("sms", True, ())


def test_first_available_with_no_channel_left_names_the_first() -> None:
    [o] = resolve(["sms", "email"], [], Mode.FIRST_AVAILABLE, facts(sms=None, email=CONSENT))
    assert (o.channel, o.code, o.excluded_as) == ("sms", "NO_DESTINATION", "no_permitted_channel")
    assert o.passed_over == (("sms", "NO_DESTINATION"), ("email", "CONSENT_MISSING"))
