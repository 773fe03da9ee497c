"""One read at a time, its answer shared with whoever asks while it runs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedRead(Generic[T]):
    """Calling it runs `read`, unless a call is running it already: then it
    waits for that call and returns its answer, or raises its error. Nothing
    is kept: a call that arrives after a read ended starts a new one."""

    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._running: Future[T] | None = None

    def __call__(self) -> T:
        with self._lock:
            running, mine = self._running, self._running is None
            if running is None:
                running = self._running = Future()
        if not mine:
            return running.result()
        try:
            answer = self._read()
            running.set_result(answer)
            return answer
        except BaseException as exc:
            running.set_exception(exc)
            raise
        finally:
            with self._lock:
                self._running = None
