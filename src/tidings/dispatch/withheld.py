"""A call the read before it withheld (dispatch/call_start.py): what is
recorded instead, and when the intent is due again.

Killed, stopped, expired and paused claims are handed back (`released`):
killed ones wait for the switch, stopped ones are due at once for the gate
to decide on the opt-out or suppression, expired ones are due at once for
policy to expire them, and paused ones are due when their provider
account's pause ends. A claim whose intent moved on is withdrawn.
"""

from __future__ import annotations

import logging
from datetime import datetime

from tidings.dispatch.call_start import Verdict
from tidings.dispatch.claim import Claimed
from tidings.dispatch.record import IntentOutcome, record_released, record_withdrawn
from tidings.observability.process_metrics import record_call_withheld
from tidings.store.database import Database

log = logging.getLogger("tidings.dispatch")

_RELEASED = {
    Verdict.KILLED: "KILL_SWITCH",
    # Due again at once: the gate reads the opt-out or suppression and
    # decides, with its own code.
    Verdict.STOPPED: "RECIPIENT_STOPPED",
    # Due again at once: the gate expires it, as any claim would.
    Verdict.EXPIRED: "EXPIRED",
    Verdict.PAUSED: "PROVIDER_PAUSED",
}


def record_withheld(
    db: Database, claimed: Claimed, verdict: Verdict, now: datetime, due_at: datetime | None
) -> IntentOutcome:
    """Record a call the read before it withheld; `due_at` is when a paused
    one is due again (the end of its account's pause)."""
    code = _RELEASED.get(verdict)
    with db.transaction() as conn:
        if code is None:
            outcome = record_withdrawn(conn, claimed, now)
        else:
            outcome = record_released(conn, claimed, now, code=code, due_at=due_at)
    record_call_withheld(claimed.intent.channel, verdict.value)
    log.info("provider call withheld", extra={"verdict": verdict.value})
    return outcome
