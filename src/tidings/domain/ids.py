"""Time-ordered identifiers (UUID version 7, RFC 9562).

Intent and attempt ids are primary-key suffixes; ordering them by creation
time keeps B-tree inserts at the right edge instead of scattered pages.
"""

from __future__ import annotations

import os
import threading
import uuid
from datetime import datetime

_lock = threading.Lock()
_last = [0, 0]  # last millisecond, counter within it
# A clock set back by more than this (an injected one, a corrected host) is
# followed: an id's time is its intent's creation time, which decides the
# month its evidence is kept in (domain/evidence_months.py). Smaller steps
# back (threads reading the clock a moment apart) keep ids in order.
SET_BACK_MS = 1000


def uuid7(at: datetime | None = None) -> uuid.UUID:
    millis = int((at.timestamp() if at else _wall()) * 1000)
    with _lock:
        if _last[0] - SET_BACK_MS <= millis <= _last[0]:
            millis = _last[0]
            _last[1] += 1
        else:
            _last[0], _last[1] = millis, int.from_bytes(os.urandom(2), "big") & 0x3FF
        counter = _last[1] & 0xFFF
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (millis & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand
    return uuid.UUID(int=value)


def _wall() -> float:
    import time

    return time.time()
