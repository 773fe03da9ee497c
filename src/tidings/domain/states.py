"""The states an intent and an attempt can be in."""

from __future__ import annotations

from enum import StrEnum


class IntentState(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    ACCEPTED = "accepted"
    RESEND_DUE = "resend_due"
    RECONCILING = "reconciling"
    DELIVERED = "delivered"
    CANCELED = "canceled"
    SUPPRESSED = "suppressed"
    NO_PERMITTED_CHANNEL = "no_permitted_channel"
    FAILED = "failed"
    EXPIRED = "expired"
    UNKNOWN = "unknown"


class AttemptState(StrEnum):
    SENDING = "sending"
    ACCEPTED = "accepted"
    DELIVERED = "delivered"
    UNDELIVERED = "undelivered"
    FAILED = "failed"
    UNKNOWN = "unknown"


TERMINAL_INTENT: frozenset[IntentState] = frozenset(
    {
        IntentState.DELIVERED,
        IntentState.CANCELED,
        IntentState.SUPPRESSED,
        IntentState.NO_PERMITTED_CHANNEL,
        IntentState.FAILED,
        IntentState.EXPIRED,
        IntentState.UNKNOWN,
    }
)

# States a worker may claim: the only ones from which a provider call can start.
CLAIMABLE: frozenset[IntentState] = frozenset({IntentState.PENDING, IntentState.RESEND_DUE})

# Intents whose provider outcome is not settled yet: what "unreconciled" means.
UNRECONCILED: frozenset[IntentState] = frozenset(
    {IntentState.SENDING, IntentState.ACCEPTED, IntentState.RECONCILING}
)

TERMINAL_ATTEMPT: frozenset[AttemptState] = frozenset(
    {AttemptState.DELIVERED, AttemptState.UNDELIVERED, AttemptState.FAILED}
)


def is_terminal(state: IntentState) -> bool:
    return state in TERMINAL_INTENT
