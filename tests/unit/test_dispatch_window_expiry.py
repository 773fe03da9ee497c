"""Seed 003: "batch size comes from measured claim time, downstream limits,
and the reset token's expiry". The window is paced by the earliest token
expiry of the batch it claimed, and a claim whose turn would come after
its token expires is handed back instead of sent late (R003.9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from tidings.dispatch.window import Window

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def timed(threads: int, most: int, per_call: float) -> Window:
    window = Window(threads, most)
    window.observe(per_call)
    return window


def test_a_near_expiry_paces_the_next_claim() -> None:
    window = timed(threads=2, most=500, per_call=0.01)
    assert window.size(NOW) == 200  # a second of calls: 100 per thread
    window.fit([NOW + timedelta(seconds=0.3)], NOW)  # a batch whose token lasts 0.3 s
    # 0.3 s of calls at 0.01 s on two threads: 30 each, so no tail outlives it
    assert window.size(NOW) == 60


def test_an_expiry_already_past_no_longer_paces() -> None:
    window = timed(threads=2, most=500, per_call=0.01)
    window.fit([NOW + timedelta(seconds=0.3)], NOW)
    assert window.size(NOW + timedelta(seconds=1)) == 200


def test_claims_whose_turn_comes_after_their_expiry_are_handed_back() -> None:
    window = timed(threads=2, most=500, per_call=1.0)
    soon = NOW + timedelta(seconds=2.5)
    later = NOW + timedelta(hours=1)
    # two threads, one second a call: turns end at 1, 1, 2, 2, 3, 3 s
    late = window.fit([soon, soon, soon, soon, soon, later], NOW)
    assert late == [4]


def test_claims_already_waiting_push_the_new_ones_back() -> None:
    window = timed(threads=1, most=500, per_call=1.0)
    soon = NOW + timedelta(seconds=2.5)
    assert window.fit([soon, soon], NOW, ahead=2) == [0, 1]


def test_no_expiry_and_no_timing_hand_back_nothing() -> None:
    window = Window(threads=1, most=10)
    assert window.fit([NOW + timedelta(seconds=1)] * 5, NOW) == []
    timed_window = timed(threads=1, most=10, per_call=1.0)
    assert timed_window.fit([None] * 5, NOW) == []


@given(
    threads=st.integers(1, 16),
    per_call=st.floats(0.001, 5.0),
    left=st.floats(0.01, 600.0),
)
def test_a_paced_batch_ends_before_its_earliest_expiry(
    threads: int, per_call: float, left: float
) -> None:
    window = timed(threads, 100_000, per_call)
    expiry = NOW + timedelta(seconds=left)
    window.fit([expiry], NOW)
    size = window.size(NOW)
    if size > threads:  # beyond one per thread, the expiry bounds it
        assert (size / threads) * per_call <= left + 1e-6
    kept = [expiry] * size
    late = window.fit(kept, NOW)
    assert all((i // threads + 1) * per_call > left - 1e-6 for i in late)
