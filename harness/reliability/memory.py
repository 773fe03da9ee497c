"""Peak memory of each process of a run (issue #43's soak report).

The kernel keeps each process's high-water mark of resident memory
(`VmHWM` in /proc/<pid>/status), so a sample every few seconds misses no
peak of a process still alive at that sample; a worker killed between two
samples reports its mark as of the last one. Processes are named as the
run names them (`worker-7`, `api`, `simulator`, `pgbouncer`); each
role's largest mark is reported too, so a soak's dozens of worker
replacements read as one figure.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

EVERY_S = 5.0
# `worker-12` and `worker-3` are one role.
_ROLE = re.compile(r"-\d+$")


def high_water_kib(pid: int) -> int | None:
    """The process's peak resident set in KiB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class PeakMemory:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.peaks_kib: dict[str, int] = {}

    def sample(self, pids: Mapping[str, int]) -> None:
        for name, pid in pids.items():
            found = high_water_kib(pid)
            if found is None:
                continue
            with self._lock:
                self.peaks_kib[name] = max(found, self.peaks_kib.get(name, 0))

    def summary(self) -> dict[str, Any]:
        with self._lock:
            peaks = dict(self.peaks_kib)
        roles: dict[str, int] = {}
        for name, kib in peaks.items():
            role = _ROLE.sub("", name)
            roles[role] = max(kib, roles.get(role, 0))
        return {
            "by_role_mib": {r: round(k / 1024, 1) for r, k in sorted(roles.items())},
            "by_process_mib": {n: round(k / 1024, 1) for n, k in sorted(peaks.items())},
        }


@contextmanager
def watching(pids: Callable[[], Mapping[str, int]]) -> Iterator[PeakMemory]:
    """Sample `pids()` (name -> pid, read afresh each time) until the block ends."""
    peaks = PeakMemory()
    stop = threading.Event()

    def loop() -> None:
        while True:
            peaks.sample({**pids(), "harness": os.getpid()})
            if stop.wait(EVERY_S):
                return

    thread = threading.Thread(target=loop, name="peak-memory", daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        stop.set()
        thread.join(10)
        peaks.sample({**pids(), "harness": os.getpid()})
