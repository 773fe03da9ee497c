"""How long a provider account that said "back off" is paused."""

from __future__ import annotations

import random

from tidings.domain.breaker import (
    MAX_SECONDS,
    RESTRICTED_BASE_SECONDS,
    RESTRICTED_MAX_SECONDS,
    SHARED_MAX_SECONDS,
    STORM,
    backoff_seconds,
    pause_for,
)


class Top(random.Random):
    """random() at its largest: the pause shortened the most by jitter."""

    def random(self) -> float:
        return 1.0


class Bottom(random.Random):
    def random(self) -> float:
        return 0.0


def test_a_429_with_retry_after_pauses_exactly_that_long() -> None:
    pause = pause_for("RATE_LIMITED", 42.0, 0, Bottom())
    assert pause is not None and (pause.failures, pause.seconds) == (1, 42.0)


def test_a_429_without_retry_after_backs_off_exponentially_with_jitter() -> None:
    longest = [backoff_seconds(n, Bottom()) for n in range(1, 12)]
    assert longest[:4] == [1.0, 2.0, 4.0, 8.0] and max(longest) == MAX_SECONDS
    assert backoff_seconds(3, Top()) == 2.0  # jitter takes at most half
    pause = pause_for("RATE_LIMITED", None, 2, Bottom())
    assert pause is not None and (pause.failures, pause.seconds) == (3, 4.0)


def test_5xx_and_timeouts_pause_only_as_a_storm() -> None:
    for before in range(STORM - 1):
        pause = pause_for("PROVIDER_ERROR", None, before, Bottom())
        assert pause is not None and pause.seconds is None
    storm = pause_for("TIMEOUT", None, STORM - 1, Bottom())
    assert storm is not None and storm.seconds == 1.0


def test_other_answers_are_no_back_off() -> None:
    assert pause_for("INVALID_DESTINATION", None, 5, Bottom()) is None


def test_the_shared_pause_is_capped_but_never_a_retry_after() -> None:
    """The account's pause for every tenant stops growing at the shared cap;
    only the tenant whose traffic drew the answers keeps doubling."""
    shared = pause_for("RATE_LIMITED", None, 20, Bottom(), cap=SHARED_MAX_SECONDS)
    own = pause_for("RATE_LIMITED", None, 20, Bottom())
    assert shared is not None and shared.seconds == SHARED_MAX_SECONDS
    assert own is not None and own.seconds == MAX_SECONDS
    jittered = pause_for("RATE_LIMITED", None, 20, Top(), cap=SHARED_MAX_SECONDS)
    assert jittered is not None and jittered.seconds == SHARED_MAX_SECONDS / 2
    storm = pause_for("TIMEOUT", None, 20, Bottom(), cap=SHARED_MAX_SECONDS)
    assert storm is not None and storm.seconds == SHARED_MAX_SECONDS
    told = pause_for("RATE_LIMITED", 60.0, 20, Bottom(), cap=SHARED_MAX_SECONDS)
    assert told is not None and told.seconds == 60.0  # the provider's word holds


def test_an_account_restriction_pauses_for_minutes_doubling_to_a_cap() -> None:
    # The account's own state, not one tenant's pace: the shared cap does
    # not apply, and no jitter shortens it.
    pauses = [pause_for("ACCOUNT_RESTRICTED", None, n, Top(), cap=SHARED_MAX_SECONDS)
              for n in range(6)]  # fmt: skip
    assert [p.seconds for p in pauses if p] == [
        RESTRICTED_BASE_SECONDS * f for f in (1, 2, 4, 8, 16, 16)
    ]
    assert RESTRICTED_BASE_SECONDS * 16 == RESTRICTED_MAX_SECONDS
    assert pause_for("SENDER_REJECTED", None, 0, Top()) is None  # per sender: no pause
    assert pause_for("REQUEST_INVALID", None, 0, Top()) is None
