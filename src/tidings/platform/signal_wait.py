"""Waiting in the main thread for a stop that a signal handler sets."""

from __future__ import annotations

import threading

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
