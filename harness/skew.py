"""A process whose wall clock is minutes off: libfaketime (Debian's
`faketime`, scripts/install-faketime) preloaded, the monotonic clock left
true (faketime_shim/sitecustomize.py says why).

Used by tests/e2e/test_skewed_clocks.py and by the reliability run's
`clock_skew` fault (harness/reliability/faults.py).
"""

from __future__ import annotations

from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SHIM = Path(__file__).parent / "faketime_shim"
# What the runs use: five minutes either way, far past any lease.
SKEW = {"ahead": "+5m", "behind": "-5m"}


class FaketimeMissing(RuntimeError):
    pass


def skewed(offset: str, clock: str) -> dict[str, str]:
    """The environment of a process whose wall clock is `offset` off
    (libfaketime's syntax: "+5m"), reading time from `clock` (TIDINGS_CLOCK)."""
    if not LIBFAKETIME.exists():
        raise FaketimeMissing("libfaketime is missing: run scripts/install-faketime")
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME": offset,
        # Threads read the clock at once; without this each call may be cached.
        "FAKETIME_NO_CACHE": "1",
        # The monotonic clock stays true: see faketime_shim/sitecustomize.py.
        "DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": str(SHIM),
        "TIDINGS_CLOCK": clock,
    }
