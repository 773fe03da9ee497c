"""A group of spawned processes that start their measured work together.

Each process builds what it needs (engine, connections, app), reports
ready, and waits for the go; the parent starts the clock only then, so
interpreter start-up is never measured (as `procs.WorkerGroup` does for
workers). The go carries a shared moment on the monotonic clock, which on
Linux is one clock for every process: producers plan their creations from
it and report their end on it.

A target is called as `target(*args, link)` and sends its result with
`link.done(value)`; one that runs until told reads `link.stopping()`.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
_spawn = mp.get_context("spawn")


@dataclass(frozen=True)
class Link:
    """A process's end of the group: its ready flag, the go, the stop, the results."""

    ready: Any
    go: Any
    stop: Any
    start: Any  # a shared double: the moment of the go, on time.monotonic()
    results: Any

    def wait_go(self) -> float:
        """Report ready, wait for the go: the shared start moment."""
        self.ready.set()
        if not self.go.wait(READY_TIMEOUT_S):
            raise RuntimeError("no go from the parent")
        return float(self.start.value)

    def stopping(self, timeout: float | None = None) -> bool:
        return bool(self.stop.wait(timeout))

    def done(self, value: Any) -> None:
        self.results.put(value)


class Spawned:
    """`with Spawned(target, [args, ...]) as group: start = group.go(); group.results()`."""

    def __init__(self, target: Callable[..., None], arguments: Sequence[tuple[Any, ...]]) -> None:
        go, stop, results = _spawn.Event(), _spawn.Event(), _spawn.Queue()
        start = _spawn.Value("d", 0.0)
        self._links = [Link(_spawn.Event(), go, stop, start, results) for _ in arguments]
        self.processes = [
            _spawn.Process(target=target, args=(*args, link), daemon=True)
            for args, link in zip(arguments, self._links, strict=True)
        ]

    def __enter__(self) -> Spawned:
        for process in self.processes:
            process.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        for link, process in zip(self._links, self.processes, strict=True):
            while not link.ready.wait(0.2):
                if not process.is_alive() or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError("a spawned process did not start")
        return self

    def go(self) -> float:
        """Start them all; the shared start moment (time.monotonic())."""
        link = self._links[0]
        link.start.value = time.monotonic()
        link.go.set()
        return float(link.start.value)

    def stop(self) -> None:
        self._links[0].stop.set()

    def results(self, timeout: float) -> list[Any]:
        """One result from each process, or an error if one did not answer in time."""
        deadline, found = time.monotonic() + timeout, list[Any]()
        while len(found) < len(self.processes):
            try:
                found.append(self._links[0].results.get(timeout=0.5))
            except queue.Empty:
                if time.monotonic() > deadline or not any(p.is_alive() for p in self.processes):
                    raise RuntimeError(
                        f"{len(self.processes) - len(found)} spawned process(es) gave no result"
                    ) from None
        return found

    def __exit__(self, *exc: object) -> None:
        self.stop()
        for process in self.processes:
            process.join(STOP_TIMEOUT_S)
            if process.is_alive():
                process.terminate()
                process.join(5)
