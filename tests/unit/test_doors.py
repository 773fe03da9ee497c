"""One door per table: only store/attempts.py names a query that writes attempts.

A query is named by its string in Python (`fetch_one(conn, "attempt_settled",
...)`), so every string constant in src/ is checked against the queries
whose SQL inserts, updates or deletes attempt rows.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tidings
from tidings.store.queries import all_queries

SRC = Path(tidings.__file__).parent
ATTEMPTS_DOOR = SRC / "store" / "attempts.py"
# Retention deletes expired evidence, attempts included, in one statement
# per clock: a purge, not a change to any attempt.
PURGES = {SRC / "dispatch" / "retention.py": {"purge_intents", "purge_attempt_evidence"}}


def _writers(table: str) -> set[str]:
    writes = re.compile(rf"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+{table}\b", re.IGNORECASE)
    return {name for name, sql in all_queries().items() if writes.search(sql)}


def _named(path: Path, names: set[str]) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    }


def test_attempt_writing_queries_exist() -> None:
    # Guards the test itself: a rename of the table or the queries would
    # otherwise make the check below pass vacuously.
    assert {"open_attempts", "attempt_settled", "attempts_accepted"} <= _writers("attempts")


def test_only_the_attempts_store_writes_attempts() -> None:
    writers = _writers("attempts")
    trespassers = {
        f"{path.relative_to(SRC)}: {sorted(found)}"
        for path in SRC.rglob("*.py")
        if path != ATTEMPTS_DOOR and (found := _named(path, writers) - PURGES.get(path, set()))
    }
    assert not trespassers, "write attempts through tidings.store.attempts"
