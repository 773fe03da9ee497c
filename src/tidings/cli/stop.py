"""How a long-running command stops: on SIGTERM or SIGINT, within a bound."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time

from tidings.store.embedded import release as release_embedded

STOP_OVERRUN_EXIT = 70  # EX_SOFTWARE
# Stopping the embedded PostgreSQL on the way out of an overrun stop.
RELEASE_SECONDS = 15.0


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
        # os._exit runs no exit handler; the release is bounded too, so
        # this backstop cannot hang on it.
        releasing = threading.Thread(target=release_embedded, daemon=True)
        releasing.start()
        releasing.join(RELEASE_SECONDS)
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


def exit_on_sigterm() -> None:
    """Until a command installs its own stop, SIGTERM ends it as Ctrl-C
    does: by an exception in the main thread, so `finally` blocks and exit
    handlers run, the embedded PostgreSQL's release among them. Python's
    default for SIGTERM ends the process with none of them. The exit status
    is the shell's for a signal, 128 + 15."""
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)
