"""The largest number a tenant may write in a policy document (issue #39).

A policy is tenant input (an `admin` key publishes it) and its numbers
reach shared arithmetic: `now + timedelta(seconds=...)` in recording and
lease recovery, `factor ** n` in the poll schedule, int4 columns when a
job's intents are written, `make_interval` in alert queries and
`now - timedelta(days=...)` in the purge. One tenant's 1e12 there once
stopped those loops for every tenant. Each limit below is far beyond any
real deployment's need and keeps every one of those sums inside what
Python's datetime (year 9999), PostgreSQL's interval and int4 can hold,
from any `now` before the 9000-01-01 bound of `domain/moments.py`.

These are constants, not settings: `policy_out_of_bounds` in migration
0027 spells the same numbers for documents already stored (a test pins
that both agree), and docs/security.md states them.
"""

from __future__ import annotations

import math
from typing import Final

# Durations (poll intervals and give-up, retry delays and pending age,
# frequency-cap, rate-limit and spend windows): a leap year.
MAX_SECONDS: Final = 31_622_400
# How fast poll intervals may grow, and how many checks one attempt may have.
MAX_POLL_FACTOR: Final = 10
MAX_CHECKS: Final = 1_000
# Retryable failures before an intent ends `failed`.
MAX_FAILURES: Final = 1_000
# Attempts after the first: the same cap the API puts on an intent's own
# `resend_budget` (api/schemas/intents.py), so a policy default never
# exceeds what a caller may ask for.
MAX_RESEND_BUDGET: Final = 10
# Retention clocks: a century (legal holds are counted in years, not ages).
MAX_RETENTION_DAYS: Final = 36_525
# Counts in a window (frequency caps, rate limits, SMS segments): inside int4.
MAX_COUNT: Final = 1_000_000_000


def within(value: int | float, minimum: float, maximum: float) -> bool:
    """True for a finite number in [minimum, maximum]. Compared before any
    conversion: `float(10**400)` itself raises, and NaN fails every test."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return minimum <= value <= maximum
