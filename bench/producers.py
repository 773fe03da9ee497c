"""Creating intents at a planned rate from several processes (scenario 4).

One Python thread calling `notify` reaches a few hundred creations per
second, and threads of one process share its interpreter lock: two of them
reached 438/s of the 1,106/s asked. So the load comes from spawned
processes, each with its own engine, open loop: creation i of the whole
load has its planned moment, start + i / rate, and producer p makes those
with i ≡ p (mod producers), sleeping until each moment and never waiting
for an answer to plan the next (a slow dispatch cannot slow the load).
"""

from __future__ import annotations

import logging
import math
import time

from bench.seed import engine, request
from bench.spawned import Link, Spawned

# What one producer process is asked for at most: well under what one
# `notify` loop reaches alone, since the workers and PostgreSQL share the
# machine's cores with it; more processes keep the plan when one falls behind.
PER_PRODUCER = 200.0
MOST_PRODUCERS = 8
TAG = "latency"  # the intents' keys: bench:latency:<i>


def producers_for(rate: float) -> int:
    return max(2, min(MOST_PRODUCERS, math.ceil(rate / PER_PRODUCER)))


def produce(dsn: str, rate: float, count: int) -> float:
    """Create `count` intents at `rate` per second; returns the rate achieved."""
    processes = producers_for(rate)
    arguments = [(dsn, rate, count, index, processes) for index in range(processes)]
    with Spawned(_producer, arguments) as group:
        started = group.go()
        ends = group.results(count / rate + 120)
    return count / (float(max(ends)) - started)


def _producer(dsn: str, rate: float, count: int, index: int, processes: int, link: Link) -> None:
    logging.basicConfig(level=logging.WARNING)
    with engine(dsn, 2) as t:
        # The tenant row, the pool and the caches warm before the clock.
        t.notify(**request(t, f"warm{index}", 0))
        started = link.wait_go()
        for i in range(index, count, processes):
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t.notify(**request(t, TAG, i))
        link.done(time.monotonic())
