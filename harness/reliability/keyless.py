"""Sends over a wire that carries no key of ours (SNS Publish:
harness/wires.py `KEYLESS`), for invariants.py: the ledger ties such a send
to its attempt only by the message id the attempt recorded, so one whose
answer was lost is counted against the attempts that lost theirs."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from harness.wires import KEYLESS

if TYPE_CHECKING:
    from .invariants import Snapshot

Row = dict[str, Any]


def keyless(s: Snapshot, entry: Row) -> bool:
    """A send over a wire that carries no key of ours (harness/wires.py
    `KEYLESS`) that no recorded message id ties to its attempt. Judged by
    the provider the send went to (the ledger's `profile`), not by the one
    its channel plays at the end: the soak switches them."""
    if not s.wire:
        return False
    played = entry.get("profile") or s.profiles.get(entry["channel"], {}).get("name")
    return played in KEYLESS


def unaccounted(s: Snapshot, unnamed: Counter[str]) -> list[str]:
    """Each keyless send no message id names must be one of the attempts
    whose call started (after a committed claim) and never learned its id:
    more of them than such attempts is a send without a claim."""
    if not unnamed:
        return []
    lost: Counter[str] = Counter(
        a["channel"]
        for a in s.attempts
        if a["call_started_at"] is not None and a["provider_message_id"] is None
    )
    return [
        f"{n} {channel} sends carry no key of ours and no attempt's message id, "
        f"but only {lost[channel]} started attempts lost their answer"
        for channel, n in sorted(unnamed.items())
        if n > lost[channel]
    ]
