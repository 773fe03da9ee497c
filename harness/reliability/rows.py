"""What the invariants read: rows as dicts, their times, the ledger's outcomes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

Row = dict[str, Any]
# The simulator's outcomes after which the provider holds the message.
ACCEPTED_OUTCOMES = ("accepted", "timeout_after_accept", "error_5xx_after_accept")


def when(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)
