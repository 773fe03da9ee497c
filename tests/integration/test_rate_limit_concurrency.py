"""Seed 003: "increasing concurrency in response to rate limiting is
backwards" (R003.13, docs/requirements.md).

A 429 comes back fast, and a window paced by call times (dispatch/window.py)
would read fast answers as room for more claims. Instead a rate-limited
channel's loop claims no more than it did before the answers, and then
nothing at all, on any worker, until the provider's Retry-After has passed
(dispatch/backoff.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.runner import Worker

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

PACE_SECONDS = 0.25  # a measured call time: 2 threads x 4 calls fill a second


def loop_turns(w: Worker, clock: ManualClock) -> None:
    """The channel loop's turns (`_pump`, as `run` drives it) until every
    call claimed in them is answered and recorded."""
    pending: dict[Future[Any], Any] = {}
    window = w._windows["sms"]
    with ThreadPoolExecutor(window.threads) as pool:
        for _ in range(50):
            w._pump("sms", pool, pending, window.size(clock.now()), threading.Event())
            if not pending and not w._queues["sms"]:
                return
    raise AssertionError("the loop did not settle")


def test_rate_limit_answers_never_widen_the_window_and_pause_every_worker(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, rate_429=1.0, retry_after_seconds=5)
    first, second = (
        worker(tidings, core, batch_size=50, concurrency={"sms": 2}, idle_wait=0.05)
        for _ in range(2)
    )
    window = first._windows["sms"]  # the claim size of the channel's next turn
    window.observe(PACE_SECONDS)
    before = window.size(clock.now())
    assert before == 8
    for n in range(30):
        offer(tidings, n, expires_at=clock.now() + timedelta(hours=1))

    loop_turns(first, clock)
    # At most the window's claims are called; those still waiting for a
    # thread when the first 429 is recorded go back unsent.
    called = len(sends(core))
    assert 0 < called <= before
    assert {e["outcome"] for e in sends(core)} == {"rate_limited"}
    # The fast answers later the window is no wider: its pace is unchanged.
    assert window.size(clock.now()) == before and window.per_call == PACE_SECONDS
    # Nobody claims for the account until its Retry-After has passed.
    clock.advance(4)
    loop_turns(first, clock)
    assert second.dispatch_once("sms") == 0
    assert len(sends(core)) == called
    clock.advance(1)
    loop_turns(first, clock)
    assert called < len(sends(core)) <= called + before
    assert window.size(clock.now()) == before
    with tidings.db.transaction() as conn:
        rows = conn.execute("SELECT state, count(*) AS n FROM intents GROUP BY 1").fetchall()
    assert {r["state"]: r["n"] for r in rows} == {IntentState.PENDING.value: 30}
