"""What a claim does with a policy decision: the verdict and its transition.

The claim transaction (dispatch/claim.py, through dispatch/gate.py) and the
shadow replay (tidings/replay) both decide with these functions, so a
replayed fixture takes the same path as a worker's claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Final

from tidings.domain.policy import Action, Decision, dispatch_action
from tidings.domain.transitions import Event


class ClaimVerdict(StrEnum):
    """What the claim does with one due intent (recorded in its audit)."""

    SEND = "send"
    DEFER = "defer"
    SUPPRESS = "suppress"
    EXPIRE = "expire"
    SHADOW = "shadow"  # record what would have happened; never call a provider


_BY_ACTION: Final[Mapping[Action, ClaimVerdict]] = {
    "send": ClaimVerdict.SEND,
    "reschedule": ClaimVerdict.DEFER,
    "suppress": ClaimVerdict.SUPPRESS,
    "expire": ClaimVerdict.EXPIRE,
}

# The one transition the claim applies for each verdict. A shadowed intent
# leaves the queue as denied, with the SHADOW_MODE code saying why.
_EVENTS: Final[Mapping[ClaimVerdict, Event]] = {
    ClaimVerdict.SEND: Event.CLAIM,
    ClaimVerdict.DEFER: Event.DEFER,
    ClaimVerdict.SUPPRESS: Event.POLICY_DENIED,
    ClaimVerdict.EXPIRE: Event.DEADLINE_PASSED,
    ClaimVerdict.SHADOW: Event.POLICY_DENIED,
}


def deadline_passed(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and expires_at <= now


def claim_action(decision: Decision, *, now: datetime, expires_at: datetime | None) -> Action:
    """What the worker does with a decision at claim time: a passed deadline
    expires the intent before any other rule is consulted."""
    if deadline_passed(expires_at, now):
        return "expire"
    return dispatch_action(decision, expires_at)


def verdict_of(action: Action) -> ClaimVerdict:
    return _BY_ACTION[action]


def claim_verdict(
    decision: Decision, *, now: datetime, expires_at: datetime | None, shadow: bool = False
) -> ClaimVerdict:
    """The claim's verdict: a passed deadline wins over shadow mode, and
    shadow mode over the decision."""
    if deadline_passed(expires_at, now):
        return ClaimVerdict.EXPIRE
    if shadow:
        return ClaimVerdict.SHADOW
    return verdict_of(dispatch_action(decision, expires_at))


def claim_event(verdict: ClaimVerdict) -> Event:
    """The transition the claim applies to the intent for `verdict`."""
    return _EVENTS[verdict]
