"""A channel's window: whole batches for a fast provider, about a second of
calls for a slow one, so a claim never waits long for its call."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidings.dispatch.window import FIRST_PER_THREAD, QUEUE_SECONDS, Window


def test_before_any_call_is_timed_each_thread_gets_a_few() -> None:
    assert Window(threads=8, most=256).size() == 8 * FIRST_PER_THREAD
    assert Window(threads=8, most=50).size() == 50


def test_a_fast_provider_gets_the_whole_batch() -> None:
    window = Window(threads=8, most=256)
    window.observe(0.0002)  # an in-process simulator's call
    assert window.size() == 256


def test_a_slow_provider_gets_about_a_second_of_calls() -> None:
    window = Window(threads=8, most=256)
    for _ in range(50):
        window.observe(0.2)
    assert window.size() == 8 * 5  # 5 calls of 0.2 s per thread in a second


def test_a_stalled_provider_gets_one_claim_per_thread() -> None:
    window = Window(threads=8, most=256)
    window.observe(0.001)
    for _ in range(30):
        window.observe(5.0)  # timeouts
    assert window.size() == 8


def test_the_average_moves_toward_recent_calls() -> None:
    window = Window(threads=1, most=1000)
    window.observe(1.0)
    window.observe(0.0)
    assert window.per_call is not None and 0.0 < window.per_call < 1.0


@given(
    threads=st.integers(1, 64),
    most=st.integers(1, 1000),
    calls=st.lists(st.floats(0, 60, allow_nan=False), max_size=20),
)
def test_the_window_is_bounded_by_batch_threads_and_time(
    threads: int, most: int, calls: list[float]
) -> None:
    window = Window(threads, most)
    for seconds in calls:
        window.observe(seconds)
    size = window.size()
    assert 1 <= size <= most
    if window.per_call and size > threads:  # beyond one per thread, time bounds it
        assert (size / threads) * window.per_call <= QUEUE_SECONDS + 1e-9
