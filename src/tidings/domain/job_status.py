"""A job's status, derived from its counts, and when to ask again.

One function for every reader (the API's GET /v1/jobs/{id} and the
console's pages): the stored `jobs.status` only says whether preparation
finished; whether the job is done is read from its recipients' states.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from tidings.domain.states import TERMINAL_INTENT, IntentState

# Terminal outcomes that mean a recipient did not get the message it was
# meant to get; exclusions decided by policy are reported, not failures.
FAILURES = frozenset({IntentState.FAILED, IntentState.EXPIRED, IntentState.UNKNOWN})

# Poll hints, in seconds: soon while a job moves, rarely once it is final.
POLL_MIN = 1
POLL_MAX = 30
POLL_FINAL = 300


def derived_status(stored: str, counts: Mapping[str, int]) -> str:
    if stored == "preparing":
        return "preparing"
    present = [IntentState(s) for s, n in counts.items() if n]
    if any(s not in TERMINAL_INTENT for s in present):
        return "dispatching"
    if any(s in FAILURES for s in present):
        return "complete_with_failures"
    return "complete"


def poll_after_seconds(status: str, updated_at: datetime, now: datetime) -> int:
    """A final job will not move: poll rarely. Otherwise back off as the job
    stays still (half the time since it last moved, between 1 and 30 s), as
    seed 003 puts it: clients back off when updated_at does not move."""
    if status in ("complete", "complete_with_failures"):
        return POLL_FINAL
    still = max(0.0, (now - updated_at).total_seconds())
    return int(min(POLL_MAX, max(POLL_MIN, still / 2)))
