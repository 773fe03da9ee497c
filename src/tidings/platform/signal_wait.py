"""Waiting in the main thread for a stop that a signal handler sets."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

# How often the main thread returns to the interpreter to run a handler it
# may owe.
SIGNAL_CHECK_SECONDS = 0.5


def wait_for_signal(stop: threading.Event) -> None:
    """Wait until `stop` is set, by a signal handler or anyone else.

    Python runs signal handlers in the main thread only, and a signal the
    kernel hands to another thread (it does when the main thread already
    has one pending) does not wake a wait with no timeout, so the handler
    would never run. A timed wait returns to the interpreter, which runs it.
    """
    while not stop.wait(SIGNAL_CHECK_SECONDS):
        pass


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """uvicorn ends a stop by raising the signal it caught again, under the
    handler it found. For SIGTERM, Python's default would end the process
    with no exit handler run (the embedded PostgreSQL would stay up, and
    the status would be 143, a failure to a service manager); as
    SIGINT's, it raises KeyboardInterrupt and a SIGTERM stop is clean."""
    if threading.current_thread() is not threading.main_thread():
        yield  # uvicorn handles no signal there either
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
