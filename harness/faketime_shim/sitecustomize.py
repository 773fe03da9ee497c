"""Loaded only by processes run under libfaketime (harness/skew.py).

libfaketime 0.9.10 (Debian 12) fakes the monotonic clock by default, and
then every timed wait (`threading.Event.wait`, a lock's timeout) waits
forever; told not to fake it, it breaks `clock_nanosleep` with an absolute
deadline, the call behind `time.sleep`, which fails with EINVAL. So the
skewed processes keep the real monotonic clock and sleep through select(),
whose relative timeout libfaketime passes through unchanged. The wall clock
(`time.time`, `datetime.now`), the one under test, stays faked.
"""

import select
import time


def _sleep(seconds: float) -> None:
    select.select([], [], [], max(float(seconds), 0.0))


time.sleep = _sleep
