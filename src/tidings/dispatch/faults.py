"""Named fault-injection points in the dispatch path, off in production.

`TIDINGS_FAULTS="after_send_before_record:kill"` makes the process SIGKILL
itself at that point, so a test can interrupt each step of the send path
exactly. Points: after_claim, before_mark (the call-started mark not yet
written), before_send (marked, the request not yet out), after_send_before_record,
after_record. Actions: kill (SIGKILL), raise (FaultInjected), pause (sleep
TIDINGS_FAULT_PAUSE_SECONDS, 3 by default: a window for another process to
commit something between two steps). An optional `@N` fires on the N-th
time the point is reached (default 1).
"""

from __future__ import annotations

import os
import signal
import threading
import time


class FaultInjected(RuntimeError):
    pass


def _parse(spec: str) -> dict[str, tuple[str, int]]:
    plan = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, rest = item.partition(":")
        action, _, nth = rest.partition("@")
        plan[name] = (action or "kill", int(nth or 1))
    return plan


_plan = _parse(os.environ.get("TIDINGS_FAULTS", ""))
_seen: dict[str, int] = {}
_lock = threading.Lock()


def point(name: str) -> None:
    if not _plan or name not in _plan:
        return
    action, nth = _plan[name]
    with _lock:
        _seen[name] = _seen.get(name, 0) + 1
        if _seen[name] != nth:
            return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "pause":
        time.sleep(float(os.environ.get("TIDINGS_FAULT_PAUSE_SECONDS", "3")))
        return
    raise FaultInjected(name)


def configure(spec: str) -> None:
    """For in-process tests: replace the plan."""
    global _plan
    with _lock:
        _plan = _parse(spec)
        _seen.clear()
