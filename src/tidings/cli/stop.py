"""How a long-running command stops: on SIGTERM or SIGINT, within a bound."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time

STOP_OVERRUN_EXIT = 70  # EX_SOFTWARE


def bound_the_stop(stop: threading.Event, seconds: float) -> None:
    """A stop that overruns its drain prints every thread's stack and exits.

    The drain is bounded by design (one lease); this is the backstop for a
    wait nobody foresaw, so a supervisor sees where it hung instead of
    having to SIGKILL a silent process.
    """

    def watch() -> None:
        stop.wait()
        time.sleep(seconds)
        sys.stderr.write(f"stop overran {seconds:.0f} s; threads:\n")
        faulthandler.dump_traceback(all_threads=True)
        sys.stderr.flush()
        os._exit(STOP_OVERRUN_EXIT)

    threading.Thread(target=watch, name="stop-watch", daemon=True).start()


def stop_on_signals() -> threading.Event:
    """SIGTERM or SIGINT sets the returned event; SIGUSR1 prints every
    thread's stack to stderr and carries on, so an operator (or a test)
    can see where a live process waits without stopping it."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop
