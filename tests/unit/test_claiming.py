"""What a claim does with a decision: one pure function for workers and replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidings.domain.claiming import (
    ClaimVerdict,
    claim_action,
    claim_event,
    claim_verdict,
    verdict_of,
)
from tidings.domain.decision_codes import DecisionCode as Code
from tidings.domain.policy import Decision
from tidings.domain.transitions import Event

NOON = datetime(2026, 6, 1, 12, tzinfo=UTC)
LATER = NOON + timedelta(hours=1)
ALLOWED = Decision(True, Code.ALLOWED, "v")
DENIED = Decision(False, Code.CONSENT_MISSING, "v")
QUIET = Decision(False, Code.QUIET_WINDOW, "v", 60, LATER)


@pytest.mark.parametrize(
    ("decision", "expires_at", "shadow", "verdict"),
    [
        (ALLOWED, None, False, ClaimVerdict.SEND),
        (DENIED, None, False, ClaimVerdict.SUPPRESS),
        (QUIET, None, False, ClaimVerdict.DEFER),
        (QUIET, LATER, False, ClaimVerdict.EXPIRE),  # the retry could only fire too late
        (ALLOWED, NOON, False, ClaimVerdict.EXPIRE),  # a passed deadline wins over all
        (ALLOWED, NOON, True, ClaimVerdict.EXPIRE),  # ... even over shadow mode
        (ALLOWED, None, True, ClaimVerdict.SHADOW),
        (QUIET, LATER, True, ClaimVerdict.SHADOW),
    ],
)
def test_claim_verdict(
    decision: Decision, expires_at: datetime | None, shadow: bool, verdict: ClaimVerdict
) -> None:
    assert claim_verdict(decision, now=NOON, expires_at=expires_at, shadow=shadow) is verdict


@pytest.mark.parametrize("decision", [ALLOWED, DENIED, QUIET])
@pytest.mark.parametrize("expires_at", [None, NOON, LATER])
def test_the_reported_action_is_the_verdict_without_shadow(
    decision: Decision, expires_at: datetime | None
) -> None:
    action = claim_action(decision, now=NOON, expires_at=expires_at)
    assert verdict_of(action) is claim_verdict(decision, now=NOON, expires_at=expires_at)


def test_each_verdict_is_one_transition() -> None:
    assert {v: claim_event(v) for v in ClaimVerdict} == {
        ClaimVerdict.SEND: Event.CLAIM,
        ClaimVerdict.DEFER: Event.DEFER,
        ClaimVerdict.SUPPRESS: Event.POLICY_DENIED,
        ClaimVerdict.EXPIRE: Event.DEADLINE_PASSED,
        ClaimVerdict.SHADOW: Event.POLICY_DENIED,
    }
