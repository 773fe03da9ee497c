"""A provider's pause holds every worker, including the calls another worker
claimed before the pause began: its read before the call (the call-started
mark) finds the pause and hands them back unsent, due when it ends."""

from __future__ import annotations

from typing import Any

from tidings import IntentState, ManualClock, Tidings

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker

THROTTLED = "+14155550429"  # the simulator's magic number: always a 429


def sms(t: Tidings, n: int, phone: str) -> Any:
    return offer(t, n, recipient={"ref": f"m{n}", "phone": phone}, expires_at=None)


def test_calls_claimed_before_another_workers_429_wait_out_the_pause(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, retry_after_seconds=30)
    here, there = worker(tidings, core), worker(tidings, core)
    waiting = [sms(tidings, n, "+14155550123") for n in range(3)]
    claimed = here.claim("sms", 10)  # claimed before the pause: calls not yet made
    assert len(claimed) == 3
    sms(tidings, 9, THROTTLED)
    assert there.dispatch_once("sms") == 1  # the 429: the account pauses for 30 s
    assert len(sends(core)) == 1

    here.record([here.send(c) for c in claimed])
    assert len(sends(core)) == 1, "a call went out while the account was paused"
    for intent in waiting:
        now = tidings.get(intent.id)
        assert now.state is IntentState.PENDING, now.state
        assert now.next_due_at is not None and now.next_due_at >= clock.now()

    clock.advance(31)  # the pause is over: they go
    here.dispatch_once("sms")
    assert {tidings.get(i.id).state for i in waiting} == {IntentState.ACCEPTED}


def test_a_429_pauses_every_worker_as_soon_as_it_is_answered_not_when_its_group_is_recorded(
    tidings: Tidings, clock: ManualClock
) -> None:
    publish_offer_template(tidings)
    core = simulator(clock, retry_after_seconds=30)
    here, there = worker(tidings, core), worker(tidings, core)
    waiting = [sms(tidings, n, "+14155550123") for n in range(3)]
    claimed = here.claim("sms", 10)
    sms(tidings, 9, THROTTLED)
    [throttled] = there.claim("sms", 10)
    answered = there.send(throttled)  # the 429, its group not recorded yet
    assert len(sends(core)) == 1

    here.record([here.send(c) for c in claimed])
    assert len(sends(core)) == 1, "a call went out before the 429's group was recorded"
    assert {tidings.get(i.id).state for i in waiting} == {IntentState.PENDING}
    there.record([answered])  # counted once: the pause is not doubled by its record
    clock.advance(31)
    here.dispatch_once("sms")
    assert {tidings.get(i.id).state for i in waiting} == {IntentState.ACCEPTED}
