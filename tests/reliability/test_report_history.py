"""The report's history of an offending intent: its own provider requests,
read in one pass. The hour's soak (issue #43) left a report unwritten for
good: each of the ledger's 164,000 sends was matched against every one of
213,000 attempts, for each suspect."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.reliability.run import _history

from .test_invariants import ID, KEY1, KEY2, attempt, delivered_once, send


class CountedRows(list[dict[str, Any]]):
    """A table of the snapshot that counts how often it is read whole."""

    reads = 0

    def __iter__(self) -> Any:
        CountedRows.reads += 1
        return super().__iter__()


def test_an_intents_history_has_its_own_requests_and_reads_the_attempts_once() -> None:
    other = [attempt(1, f"other:{n}", "delivered") | {"intent_id": None} for n in range(50)]
    s = delivered_once()
    s = dataclasses.replace(
        s,
        attempts=CountedRows([*s.attempts, attempt(2, KEY2, "failed"), *other]),
        ledger_after=[
            send(KEY1, 1.5),
            send(KEY2, 3.0),
            *(send(a["attempt_key"], 4) for a in other),
        ],
    )
    CountedRows.reads = 0
    history = _history(s, ID)
    assert [e["idempotency_key"] for e in history["provider_requests"]] == [KEY1, KEY2]
    assert [a["attempt_key"] for a in history["attempts"]] == [KEY1, KEY2]
    assert CountedRows.reads == 1
