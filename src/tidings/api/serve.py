"""Run the API under uvicorn (`tidings serve`)."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping

import uvicorn

from tidings.api.access_log import strip_query_strings
from tidings.api.app import create_app
from tidings.api.settings import ApiSettings
from tidings.client import Tidings
from tidings.platform.signal_wait import sigterm_interrupts
from tidings.providers.base import ProviderAdapter

log = logging.getLogger("tidings.serve")

STARTUP_FAILURE = 3  # uvicorn's exit status for a server that never started
# A process that dies is replaced after this pause, so one that cannot
# start (a bad setting) does not spin the supervisor.
RESTART_PAUSE_S = 1.0


def serve(
    host: str,
    port: int,
    tidings: Tidings,
    adapters: Mapping[str, ProviderAdapter] | None = None,
    *,
    settings: ApiSettings | None = None,
    log_level: str = "info",
) -> None:
    """Serve until interrupted. Handlers are synchronous and run in uvicorn's
    thread pool, each taking a connection from the shared pool."""
    config = settings or ApiSettings.from_settings(tidings.settings)
    app = create_app(tidings, adapters=adapters or {}, settings=config)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            proxy_headers=True,
            log_config=None,  # its lines go through ours, redacted, in our format
        )
    )
    strip_query_strings()  # after uvicorn configured its loggers
    with contextlib.suppress(KeyboardInterrupt), sigterm_interrupts():
        server.run()
    if not server.started:  # as uvicorn.run: a port in use is a failed start
        sys.exit(STARTUP_FAILURE)


def serve_processes(
    host: str,
    port: int,
    workers: int,
    database_url: str,
    *,
    log_level: str = "info",
    then: Callable[[], object] | None = None,
) -> int:
    """`tidings serve --workers N`: N API processes sharing one listening
    socket, each with its own engine and pool; their exit status.

    The socket is bound here and the processes forked from this one before
    it opens any database connection, so none inherits another's. A process
    that dies is replaced; SIGTERM or SIGINT stops them all, each draining
    as a single `tidings serve` does. Nothing an API process holds matters
    to another: rate limits, pauses, controls and console sessions all live
    in the database.

    uvloop is required: it sets TCP_NODELAY on every connection; without
    it a response on a shared socket can wait on Nagle's algorithm and the
    client's delayed ACK, about 40 ms each (docs/benchmarks.md).
    """
    if importlib.util.find_spec("uvloop") is None:
        raise SystemExit("tidings serve --workers needs uvloop (pip install uvloop)")
    # Signals are taken one at a time by `sigwaitinfo`, never by a handler:
    # a handler runs at whatever point the wait loop has reached, and a child
    # killed just before a stop, reaped after it, was once counted as the
    # stop's failure. Blocked here, before any fork or thread, so no other
    # thread takes them; each API process unblocks them for itself.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, SUPERVISOR_SIGNALS)
    listener = socket.create_server((host, port), reuse_port=False, backlog=2048)
    children: dict[int, int] = {}  # pid -> slot

    def start(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the API process
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
            os._exit(_run_one(listener, database_url, host, log_level))
        children[pid] = slot

    try:
        for slot in range(workers):
            start(slot)
        if then is not None:  # once forked: what this process opens stays its own
            then()
        status = _supervise(children, start)
    finally:
        listener.close()
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    return status


SUPERVISOR_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def _supervise(children: dict[int, int], start: Callable[[int], None]) -> int:
    """Replace each API process that dies until a stop comes, then stop them
    all; the stop's exit status. A child already dead when the stop is taken
    died before it, and is no failure of the stop: standard signals are taken
    lowest number first, so a pending SIGTERM or SIGINT comes before the
    SIGCHLD of a child that died meanwhile."""
    while True:
        taken = signal.sigwaitinfo(SUPERVISOR_SIGNALS)
        if taken.si_signo in STOP_SIGNALS:
            break
        for pid, code in _reap(children):
            log.warning("API process %s exited (%s); starting another", pid, code)
            slot = children.pop(pid)
            time.sleep(RESTART_PAUSE_S)
            if not STOP_SIGNALS & signal.sigpending():
                start(slot)
    dead = {pid for pid in children if _exiting(pid)}  # reapable or not yet
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    status = 0
    while children:
        for pid, code in _reap(children):
            children.pop(pid)
            if pid in dead:
                log.warning("API process %s had exited (%s) before the stop", pid, code)
                continue
            # uvicorn ends a drained stop by re-raising the signal it caught
            exited = os.waitstatus_to_exitcode(code)
            clean = exited in (0, -signal.SIGTERM, -signal.SIGINT)
            status = status or (0 if clean else exited)
        if children:
            signal.sigwaitinfo(SUPERVISOR_SIGNALS)  # a second stop changes nothing
    while signal.sigtimedwait(STOP_SIGNALS, 0) is not None:
        pass  # taken here, not by the default action once they are unblocked
    return status


def _exiting(pid: int) -> bool:
    """Dead, whether `waitpid` can return it yet or not: a killed process's
    main thread shows as a zombie while its other threads are still
    exiting, and only after them is it reapable (Linux; elsewhere no process
    is taken as exiting)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


def _reap(children: dict[int, int]) -> list[tuple[int, int]]:
    """The children that have exited, reaped without waiting: (pid, wait status)."""
    gone = []
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            reaped, code = os.waitpid(pid, os.WNOHANG)
            if reaped == pid:
                gone.append((pid, code))
    return gone


def _run_one(listener: socket.socket, database_url: str, host: str, log_level: str) -> int:
    from tidings.platform.settings import Settings
    from tidings.providers.routing import webhook_adapters

    settings = Settings()
    with Tidings(database_url) as tidings:
        adapters = webhook_adapters(settings, serving_host=host)
        app = create_app(
            tidings, adapters=adapters, settings=ApiSettings.from_settings(tidings.settings)
        )
        config = uvicorn.Config(
            app,
            loop="uvloop",
            http="httptools",
            log_level=log_level,
            proxy_headers=True,
            log_config=None,  # its lines go through ours, redacted, in our format
        )
        server = uvicorn.Server(config)
        strip_query_strings()
        server.run(sockets=[listener])
    return 0
