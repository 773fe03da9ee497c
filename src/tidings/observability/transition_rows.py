"""The transition table as rows, for queries that look for moves it forbids
(the `impossible_transitions` metric and alert)."""

from __future__ import annotations

from tidings.domain.states import TERMINAL_INTENT, IntentState
from tidings.domain.transitions import TABLE

# Creation is audited with no from_state: a direct intent starts pending; a
# bulk job may create it already excluded (a terminal decision).
CREATION: tuple[tuple[str, str, str], ...] = (
    ("", "create", IntentState.PENDING.value),
    *(
        ("", "create_excluded", s.value)
        for s in sorted(TERMINAL_INTENT)
        if s not in (IntentState.DELIVERED, IntentState.UNKNOWN)
    ),
)


def allowed_transitions() -> dict[str, list[str]]:
    """(from, event, to) triples the table allows, as three parallel arrays."""
    triples = [*CREATION, *((s.value, e.value, r.target.value) for (s, e), r in TABLE.items())]
    return {
        "froms": [t[0] for t in triples],
        "events": [t[1] for t in triples],
        "tos": [t[2] for t in triples],
    }
