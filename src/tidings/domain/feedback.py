"""What a provider's answer or receipt teaches about its destination.

The rule (DESIGN invariant 12): only a fact about the recipient blocks the
recipient. An unsubscribe (or a STOP the provider saw), a spam complaint, a
permanent bounce of that address and a number that does not exist each
block the next send to that channel and destination; a soft bounce does
not, since a later resend may pass. A fact about the request, the sender,
the account or its configuration (`REQUEST_INVALID`, `SENDER_REJECTED`,
`ACCOUNT_RESTRICTED`) blocks nobody: one bad `From` would otherwise
suppress every address it touched. It fails the intent with a code that
says whose fault it is, and alerts (`refusal_alert_key`); an account
restriction also pauses the account (domain/breaker.py).

Pure: the caller writes the block in the transaction that stores the
answer or the observation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

# Suppression reasons, as the suppressions table names them.
COMPLAINT: Final = "complaint"
HARD_BOUNCE: Final = "hard_bounce"
INVALID: Final = "invalid"

# Whose fault a provider's refusal is: only "recipient" ever blocks.
Fault = Literal["recipient", "request", "sender", "account", "provider"]

# `RejectCode` values (providers/outcomes.py), spelled here so domain/
# stays free of the adapters.
_FAULTS: Final[dict[str, Fault]] = {
    "INVALID_DESTINATION": "recipient",
    "OPTED_OUT": "recipient",
    "NOT_SMS_CAPABLE": "recipient",
    "UNREACHABLE": "recipient",
    "BOUNCED": "recipient",
    "COMPLAINT": "recipient",
    "REQUEST_INVALID": "request",
    "CONTENT_REJECTED": "request",
    "ATTACHMENT_TOO_LARGE": "request",
    "SENDER_REJECTED": "sender",
    "ACCOUNT_RESTRICTED": "account",
    "AUTH_FAILED": "account",
}

# Refusals that say our side (request, sender, account) is wrong: the
# operator must hear of them, since no resend and no suppression fixes them.
REFUSALS: Final = frozenset({"REQUEST_INVALID", "SENDER_REJECTED", "ACCOUNT_RESTRICTED"})


@dataclass(frozen=True)
class Lesson:
    kind: Literal["opt_out", "suppression"]
    reason: str | None = None  # a suppression's reason


OPT_OUT: Final = Lesson("opt_out")


def fault(code: str | None) -> Fault:
    """Whose fault a reject code says a refusal is; unknown codes are the
    provider's, so that nothing unrecognised ever blocks a recipient."""
    return _FAULTS.get(code or "", "provider")


def lesson(status: str, code: str | None) -> Lesson | None:
    """`status` and `code` are an observation's normalized status and reject
    code (`ObservedStatus`, `RejectCode` values); None: nothing to learn."""
    if fault(code) != "recipient":
        return None
    if code == "OPTED_OUT":
        return OPT_OUT
    if code == "COMPLAINT":
        return Lesson("suppression", COMPLAINT)
    # Adapters map soft bounces to undelivered; `unknown` is a report about
    # the address and no message (Postmark's SubscriptionChange, HardBounce).
    if code == "BOUNCED" and status in ("failed", "unknown"):
        return Lesson("suppression", HARD_BOUNCE)
    return None


def send_lesson(code: str) -> Lesson | None:
    """What a send's permanent rejection teaches: an opt-out the provider
    holds, or an address or number that does not exist. Nothing else."""
    if code == "OPTED_OUT":
        return OPT_OUT
    if code == "INVALID_DESTINATION":
        return Lesson("suppression", INVALID)
    return None


def refusal_alert_key(channel: str, account: str, code: str) -> str | None:
    """The alert a refusal of ours raises (per tenant, channel, provider
    account and code), or None when it is not one."""
    return f"provider_refused:{channel}:{account}:{code}" if code in REFUSALS else None
