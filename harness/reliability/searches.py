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

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tidings.dispatch.lookup import CLOCK_SKEW

from .rows import ACCEPTED_OUTCOMES, Row, when


class ListSearches:
    """The simulator's ledger indexed once, by key and by number, for every
    unknown attempt's question (a scan per attempt is hours at a soak's
    size: docs/reliability.md, the second hour's report)."""

    def __init__(self, ledger: Iterable[Row], attempts: Iterable[Row]) -> None:
        self._by_key: dict[str, list[Row]] = defaultdict(list)
        self._by_number: dict[tuple[Any, Any], list[Row]] = defaultdict(list)
        for entry in ledger:
            self._by_key[entry["idempotency_key"]].append(entry)
            if entry["outcome"] in ACCEPTED_OUTCOMES:
                self._by_number[_number(entry)].append(entry)
        self._claimed = {a.get("provider_message_id") for a in attempts} - {None}

    def in_vain(self, attempt: Row, until: datetime) -> bool:
        """Whether every list search for `attempt` (from its call to `until`,
        when it ended unknown) met a message to its number that another
        attempt's call left there and no attempt of ours claimed."""
        key, started = attempt["attempt_key"], attempt.get("call_started_at")
        numbers = {_number(e) for e in self._by_key.get(key, [])} - {(None, None)}
        if not numbers or started is None:
            return False
        since = when(started) - CLOCK_SKEW
        return any(
            entry["idempotency_key"] != key
            and entry.get("provider_message_id") not in self._claimed
            and since <= when(entry["received_at"]) <= until + CLOCK_SKEW
            for number in numbers
            for entry in self._by_number.get(number, [])
        )


def _number(entry: Row) -> tuple[Any, Any]:
    return entry.get("destination_hash"), entry.get("profile")


def unknown_since(transitions: Iterable[Row]) -> dict[Any, datetime]:
    """When each intent became unknown: its last list search came before."""
    ends: dict[Any, datetime] = {}
    for t in transitions:
        if t["to_state"] == "unknown":
            at = when(t["at"])
            ends[t["intent_id"]] = max(at, ends.get(t["intent_id"], at))
    return ends
