"""Claims waiting for a send thread, single intents first.

A channel's loop holds up to a second of claimed work (dispatch/window.py)
so claims and records go in large batches. Handed to the thread pool all
at once, that work is a first-in, first-out queue: a single intent claimed
while a job's claims wait for threads would wait behind them, up to that
second, after the claim itself took it first (docs/concepts/lanes.md). So
claims wait here and go to the pool only as threads free up, a couple per
thread so no thread idles while answers are recorded; a single intent
(of no job) goes before every job's claim that has not reached the pool.
"""

from __future__ import annotations

import heapq
import itertools

from tidings.dispatch.claim import Claimed

# Claims handed to the pool per send thread: one running, one ready for
# the moment it finishes.
PER_THREAD = 2


class SendQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Claimed]] = []
        self._order = itertools.count()

    def push(self, claims: list[Claimed]) -> None:
        for claimed in claims:
            lane = 0 if claimed.intent.job_id is None else 1
            heapq.heappush(self._heap, (lane, next(self._order), claimed))

    def ready(self, threads: int, handed: int) -> list[Claimed]:
        """The claims to hand to the pool now, which holds `handed` already."""
        room = max(0, threads * PER_THREAD - handed)
        return [heapq.heappop(self._heap)[2] for _ in range(min(room, len(self._heap)))]

    def take_all(self) -> list[Claimed]:
        """Everything still waiting (a stopping worker hands it back)."""
        items = [entry[2] for entry in sorted(self._heap)]
        self._heap.clear()
        return items

    def __len__(self) -> int:
        return len(self._heap)
