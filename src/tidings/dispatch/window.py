"""How many claims a channel's dispatch loop may hold at once.

Large enough that claims and records go in large batches: their statements
cost mostly per batch, not per row (with 2 workers and a zero-latency
provider, 3,300 intents/s with a window of 100 and 4,000/s with 256). But
a claimed intent waits in the window for a send thread, holding its lease
and its share of the rate allowance, and its state is read again by the
call-started mark before its call (call_start.py), so the window is also
bounded by time: no more claims than the channel's send threads clear in
QUEUE_SECONDS at the calls' recent pace. A fast provider gets the whole
batch size; a slow one (or a stalled one) a few claims per thread.

Seed 003 adds the token's expiry (R003.9): "a page of 500 may look
efficient but still be wrong if queue age pushes its tail beyond a
five-minute validity window". So the window also remembers the earliest
expiry of the batch it last claimed and claims no more than the threads
finish before it, and a claim whose turn would end after its own expiry
is handed back (`fit`) rather than sent late; it is due again, and expires
by policy if no turn comes in time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

# The longest a claim should wait in the window for its call.
QUEUE_SECONDS = 1.0
# Claims per send thread before any call has been timed.
FIRST_PER_THREAD = 16
# The code a claim handed back by `fit` is released with.
EXPIRES_BEFORE_TURN = "EXPIRES_BEFORE_TURN"
# Weight of the newest call in the moving average of call times.
SMOOTHING = 0.2


@dataclass
class Window:
    threads: int  # the channel's send threads
    most: int  # the batch size: never more claims than this
    per_call: float | None = None  # moving average of a call's seconds
    # The earliest expiry of the batch last claimed: it paces the next one.
    earliest: datetime | None = None

    def observe(self, seconds: float) -> None:
        """A call took `seconds` (called from the send threads; a lost
        update between two of them only delays the average)."""
        last = self.per_call
        self.per_call = seconds if last is None else last + SMOOTHING * (seconds - last)

    def size(self, now: datetime | None = None) -> int:
        if self.per_call is None:
            per_thread = FIRST_PER_THREAD
        else:
            per_call = max(self.per_call, 1e-6)
            seconds = QUEUE_SECONDS
            if now is not None and self.earliest is not None and self.earliest > now:
                seconds = min(seconds, (self.earliest - now).total_seconds())
            per_thread = int(seconds / per_call)
        return max(1, min(self.most, self.threads * max(1, per_thread)))

    def fit(
        self, expiries: Sequence[datetime | None], now: datetime, *, ahead: int = 0
    ) -> list[int]:
        """The positions in a claimed batch (in sending order, behind `ahead`
        claims already waiting or in flight) whose call would end after
        their expiry at the calls' recent pace. Remembers the batch's
        earliest expiry to pace the next claim."""
        known = [e for e in expiries if e is not None]
        if known:
            self.earliest = min(known)
        if self.per_call is None:
            return []  # no pace measured yet: nothing to judge a turn by
        late = []
        for i, expiry in enumerate(expiries):
            turn_ends = ((ahead + i) // self.threads + 1) * self.per_call
            if expiry is not None and (expiry - now).total_seconds() < turn_ends:
                late.append(i)
        return late
