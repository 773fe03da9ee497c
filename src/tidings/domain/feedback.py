"""What a provider's receipt teaches about its destination.

An unsubscribe (or a STOP the provider saw), a spam complaint and a hard
bounce each block the next send to that channel and destination; a soft
bounce does not, since a later resend may pass. Pure: the caller writes
the block in the transaction that stores the observation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

# Suppression reasons, as the suppressions table names them.
COMPLAINT: Final = "complaint"
HARD_BOUNCE: Final = "hard_bounce"


@dataclass(frozen=True)
class Lesson:
    kind: Literal["opt_out", "suppression"]
    reason: str | None = None  # a suppression's reason


OPT_OUT: Final = Lesson("opt_out")


def lesson(status: str, code: str | None) -> Lesson | None:
    """`status` and `code` are an observation's normalized status and reject
    code (`ObservedStatus`, `RejectCode` values); None: nothing to learn."""
    if code == "OPTED_OUT":
        return OPT_OUT
    if code == "COMPLAINT":
        return Lesson("suppression", COMPLAINT)
    if code == "BOUNCED" and status == "failed":  # adapters map soft bounces to undelivered
        return Lesson("suppression", HARD_BOUNCE)
    return None
