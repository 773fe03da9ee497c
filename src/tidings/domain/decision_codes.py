"""The policy's decision codes: the one list, read by the policy, the replay
and the docs (docs/policy.md, "Codes", is checked against it; the codes
reference is generated from it).

A code's value is stored with every decision and returned by the API:
once published it never changes. Adding one: docs/policy.md, "Adding a
rule".
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class DecisionCode(StrEnum):
    ALLOWED = "ALLOWED"
    DESTINATION_INVALID = "DESTINATION_INVALID"
    PURPOSE_UNKNOWN = "PURPOSE_UNKNOWN"
    CHANNEL_DISABLED = "CHANNEL_DISABLED"
    COUNTRY_DISABLED = "COUNTRY_DISABLED"
    SUPPRESSED = "SUPPRESSED"
    # A destination suppressed by a provider's complaint or hard-bounce receipt.
    COMPLAINED = "COMPLAINED"
    BOUNCED = "BOUNCED"
    OPTED_OUT = "OPTED_OUT"
    CONSENT_MISSING = "CONSENT_MISSING"
    EXPIRED = "EXPIRED"
    QUIET_WINDOW = "QUIET_WINDOW"
    NO_SEND_WINDOW = "NO_SEND_WINDOW"
    RECIPIENT_LIMIT = "RECIPIENT_LIMIT"
    RATE_LIMITED = "RATE_LIMITED"
    SPEND_LIMIT = "SPEND_LIMIT"
    POLICY_MISSING = "POLICY_MISSING"


# Denials that reschedule the intent (a `not_before`) rather than suppress it.
RETRYABLE_CODES: Final = frozenset(
    {
        DecisionCode.QUIET_WINDOW,
        DecisionCode.RECIPIENT_LIMIT,
        DecisionCode.RATE_LIMITED,
        DecisionCode.SPEND_LIMIT,
    }
)
