"""Whether a provider's list search could tell an attempt's fate.

A list search names messages, not attempts (dispatch/lookup.py): where the
provider lists a message to the same number, in the search's window, that
no attempt of ours has claimed, it may be this attempt's or another's, and
the search proves nothing. Two open calls to one number, one that reached
the provider and one that did not, both end `unknown` by design
(`test_two_open_calls_to_one_number_are_never_told_apart_by_a_search`); an
invariant that calls the second one provable judges the rule, not the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tidings.dispatch.lookup import CLOCK_SKEW

Row = dict[str, Any]
# The outcomes after which the provider holds a message it would list.
LISTED_OUTCOMES = ("accepted", "timeout_after_accept", "error_5xx_after_accept")


def _when(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def searched_in_vain(
    ledger: Iterable[Row], attempts: Iterable[Row], attempt: Row, until: datetime
) -> bool:
    """Whether every list search for `attempt` (from its call to `until`, when
    it ended unknown) met a message to its number that another attempt's call
    left there and no attempt of ours claimed."""
    ledger = list(ledger)
    own = [e for e in ledger if e["idempotency_key"] == attempt["attempt_key"]]
    numbers = {(e.get("destination_hash"), e.get("profile")) for e in own}
    numbers.discard((None, None))
    if not numbers or attempt.get("call_started_at") is None:
        return False
    since = _when(attempt["call_started_at"]) - CLOCK_SKEW
    claimed = {a.get("provider_message_id") for a in attempts} - {None}
    for entry in ledger:
        if (
            entry["idempotency_key"] != attempt["attempt_key"]
            and (entry.get("destination_hash"), entry.get("profile")) in numbers
            and entry["outcome"] in LISTED_OUTCOMES
            and entry.get("provider_message_id") not in claimed
            and since <= _when(entry["received_at"]) <= until + CLOCK_SKEW
        ):
            return True
    return False


def ended(transitions: Iterable[Row], intent_id: Any, otherwise: datetime) -> datetime:
    """When the intent became unknown: its last list search came before."""
    ends = [
        _when(t["at"])
        for t in transitions
        if t["intent_id"] == intent_id and t["to_state"] == "unknown"
    ]
    return max(ends, default=otherwise)
