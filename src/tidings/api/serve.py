"""Run the API under uvicorn (`tidings serve`)."""

from __future__ import annotations

import contextlib
import importlib.util
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
    listener = socket.create_server((host, port), reuse_port=False, backlog=2048)
    stopping = False
    children: dict[int, int] = {}  # pid -> slot

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def start(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the API process
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os._exit(_run_one(listener, database_url, host, log_level))
        children[pid] = slot

    for slot in range(workers):
        start(slot)
    if then is not None:  # once forked: what this process opens stays its own
        # Threads it starts never take SIGTERM or SIGINT from this thread,
        # which waits in os.wait() and is the only one that runs handlers.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            then()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = 0
    while children:
        try:
            pid, code = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        slot = children.pop(pid)
        if stopping:
            # uvicorn ends a drained stop by re-raising the signal it caught
            exited = os.waitstatus_to_exitcode(code)
            clean = exited in (0, -signal.SIGTERM, -signal.SIGINT)
            status = status or (0 if clean else exited)
        else:
            sys.stderr.write(f"API process {pid} exited ({code}); starting another\n")
            time.sleep(RESTART_PAUSE_S)
            if not stopping:  # a stop during the pause reached every other process
                start(slot)
    listener.close()
    return status


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
