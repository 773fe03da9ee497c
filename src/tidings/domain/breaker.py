"""When a provider account says "back off": how long every worker waits.

A 429 pauses the account until its Retry-After, or, without one, for an
exponential backoff with jitter over the back-off answers in a row. A storm
of 5xx answers and timeouts opens the same pause once `STORM` of them come
in a row; a single one is the intent's business (it is reconciled), not
the account's. Any acceptance closes the count. Pure: the caller stores the
pause (store/provider_pauses.py) and claims read it.

The answers are counted twice: per account, for the pause every tenant's
claims wait on, and per (account, tenant), for a hold on the tenant whose
traffic drew them. Without a Retry-After the pause is our own guess, and
one tenant's traffic drawing 429 after 429 must not grow it for everyone
(issue #39): the account's pause is capped at SHARED_MAX_SECONDS, the
tenant's own hold grows to MAX_SECONDS. A Retry-After is the provider's
word about the account and holds for everyone as given.

An account restriction (`ACCOUNT_RESTRICTED`: a sandbox, a whitelist, a
suspended or blocked account) is the account's own state, not anyone's
pace: every send would be refused the same way, so the account pauses for
everyone, RESTRICTED_BASE_SECONDS doubling on each restriction in a row up
to RESTRICTED_MAX_SECONDS, without jitter and without the shared cap (issue
#37). An acceptance starts the count again, as for a 429.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

RATE_LIMITED: Final = "RATE_LIMITED"
# Answers that say the provider is struggling rather than this message is wrong.
STORM_CODES: Final = frozenset({"PROVIDER_ERROR", "TIMEOUT"})
STORM: Final = 3  # 5xx/timeouts in a row before the account pauses
BASE_SECONDS: Final = 1.0
MAX_SECONDS: Final = 300.0
# The longest our own backoff pauses an account for every tenant: the rest
# of a longer backoff holds only the tenant whose traffic drew the answers.
SHARED_MAX_SECONDS: Final = 10.0
# An account restriction: a minute, doubling to 16 minutes (issue #37).
ACCOUNT_RESTRICTED: Final = "ACCOUNT_RESTRICTED"
RESTRICTED_BASE_SECONDS: Final = 60.0
RESTRICTED_MAX_SECONDS: Final = 960.0
JITTER: Final = 0.5  # the pause is shortened by up to half, so workers do not return at once


@dataclass(frozen=True)
class Pause:
    failures: int  # back-off answers in a row, this one included
    seconds: float | None  # how long to pause the account; None: not (yet)


def backoff_seconds(failures: int, rng: random.Random, cap: float = MAX_SECONDS) -> float:
    # Capped before the jitter, so workers return spread out even at the cap.
    delay = min(cap, BASE_SECONDS * 2.0 ** max(0, failures - 1))
    return delay * (1.0 - JITTER * rng.random())


def pause_for(
    code: str,
    retry_after: float | None,
    failures_before: int,
    rng: random.Random,
    cap: float = MAX_SECONDS,
) -> Pause | None:
    """The pause one answer calls for; None when the answer is no back-off.
    `cap` bounds our own backoff (SHARED_MAX_SECONDS for the account's
    pause), never the provider's Retry-After nor a restriction's pause."""
    failures = failures_before + 1
    if code == RATE_LIMITED:
        if retry_after is not None and retry_after > 0:
            return Pause(failures, min(float(retry_after), MAX_SECONDS * 12))
        return Pause(failures, backoff_seconds(failures, rng, cap))
    if code == ACCOUNT_RESTRICTED:
        return Pause(failures, restricted_seconds(failures))
    if code in STORM_CODES:
        seconds = backoff_seconds(failures - STORM + 1, rng, cap) if failures >= STORM else None
        return Pause(failures, seconds)
    return None


def restricted_seconds(failures: int) -> float:
    """How long restrictions in a row pause an account: long enough for an
    operator to look, short enough that a lifted restriction costs little."""
    return min(RESTRICTED_MAX_SECONDS, RESTRICTED_BASE_SECONDS * 2.0 ** max(0, failures - 1))


def answers_before(code: str, previous_code: str | None, failures: int) -> int:
    """The back-off answers in a row before this one that count for it: a
    restriction doubles only on restrictions, not on the 429s before it."""
    if code == ACCOUNT_RESTRICTED and previous_code != ACCOUNT_RESTRICTED:
        return 0
    return failures
