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
"""

from __future__ import annotations

from dataclasses import dataclass

# The longest a claim should wait in the window for its call.
QUEUE_SECONDS = 1.0
# Claims per send thread before any call has been timed.
FIRST_PER_THREAD = 16
# Weight of the newest call in the moving average of call times.
SMOOTHING = 0.2


@dataclass
class Window:
    threads: int  # the channel's send threads
    most: int  # the batch size: never more claims than this
    per_call: float | None = None  # moving average of a call's seconds

    def observe(self, seconds: float) -> None:
        """A call took `seconds` (called from the send threads; a lost
        update between two of them only delays the average)."""
        last = self.per_call
        self.per_call = seconds if last is None else last + SMOOTHING * (seconds - last)

    def size(self) -> int:
        if self.per_call is None:
            per_thread = FIRST_PER_THREAD
        else:
            per_thread = int(QUEUE_SECONDS / max(self.per_call, 1e-6))
        return max(1, min(self.most, self.threads * max(1, per_thread)))
