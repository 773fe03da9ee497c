"""The embedded default: a real PostgreSQL started from the pgserver wheel.

With no DATABASE_URL, tidings runs its own server in a data directory
(`$TIDINGS_HOME/pgdata`, by default `~/.tidings/pgdata`). The directory is
reused across runs; several processes share one server, and the last one to
let go stops it.

pgserver counts the processes using a server by their pids in
`pgdata/.handle_pids.json`, and the one whose exit leaves the list empty
stops the server. It never checks that a pid is alive
(pgserver/postgres_server.py, `_cleanup`: `if pids != [os.getpid()]:
return`), so the pid of a process that exited without running its exit
handlers (SIGKILL, a crash of the interpreter, a SIGTERM Python did not
handle) stays in the list for good, and no process is ever last again. So
tidings drops the pids of dead processes (zombies included) from the list
when it joins a server and again when it lets go.

A process killed outright runs nothing: if it was the last, the server
runs on with nobody holding it until the next tidings process in the same
home, which finds it running, joins it as its only holder (pgserver reuses
a running server rather than starting another), and stops it when it exits
in turn. `tidings migrate` is enough.

A forked child (`tidings serve --workers`) holds nothing: it uses its
parent's server, and only the process that joined lets go.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidings.platform.private_files import PRIVATE_DIR, make_private_dir

HANDLES = ".handle_pids.json"  # pgserver's list of the pids holding a server


@dataclass(frozen=True)
class _Held:
    server: Any  # pgserver.PostgresServer
    pid: int  # the process that joined; only it lets go


_lock = threading.Lock()
_servers: dict[Path, _Held] = {}


def data_dir(home: Path) -> Path:
    return home / "pgdata"


def embedded_url(home: Path) -> str:
    """Start (or join) the embedded server and return a DSN for it."""
    _runtime_dir(home)
    pgdata = data_dir(home).resolve()
    with _lock:
        held = _servers.get(pgdata)
        if held is None:
            make_private_dir(pgdata.parent)  # TIDINGS_HOME: the trial secret lives here too
            with _signals_deferred():
                held = _servers[pgdata] = _Held(_join(pgdata), os.getpid())
    return str(held.server.get_uri())


def release() -> None:
    """Let go of every embedded server this process joined, stopping each
    one nobody else alive holds. Run at exit; call it before `os._exit`,
    which runs no exit handler."""
    with _lock:
        for pgdata in [p for p, held in _servers.items() if held.pid == os.getpid()]:
            _let_go(pgdata, _servers.pop(pgdata).server)


def _runtime_dir(home: Path) -> None:
    """pgserver's inter-process lock lives in XDG_RUNTIME_DIR, read once at
    import. platformdirs ignores one that is not 0700 (falling back to a
    directory under /tmp), and the lock file's creation makes it 0755: two
    processes would then lock different files."""
    if "XDG_RUNTIME_DIR" in os.environ:
        return
    run = home / "run"
    make_private_dir(run)
    with contextlib.suppress(OSError):  # not ours: platformdirs says why it is ignored
        os.chmod(run, PRIVATE_DIR)  # made 0755 by an earlier version, or by pgserver as root
    os.environ["XDG_RUNTIME_DIR"] = str(run)


def _join(pgdata: Path) -> Any:
    import pgserver  # imported late: only the embedded mode needs it
    from pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        _prune(pgdata)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
    atexit.unregister(server._cleanup)  # replaced by release(), which prunes first
    atexit.unregister(release)
    atexit.register(release)
    return server


def _let_go(pgdata: Path, server: Any) -> None:
    from pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        _prune(pgdata)
    # Removes this pid and, if it was the last one, stops the server; under
    # the same lock as a join, so a process joining meanwhile keeps it up.
    server._cleanup()


def _prune(pgdata: Path) -> None:
    """Drop the pids of processes no longer alive from the handle list.
    Called with pgserver's lock held."""
    path = pgdata / HANDLES
    if not path.exists():
        return
    pids = json.loads(path.read_text())
    alive = [pid for pid in pids if _alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _alive(pid: int) -> bool:
    import psutil  # pgserver's dependency

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


@contextmanager
def _signals_deferred() -> Iterator[None]:
    """SIGTERM or SIGINT while the server starts is acted on once this
    process is in the handle list: interrupted in between, it would leave a
    server running that no process holds."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are handled in the main thread only
        return
    caught: list[int] = []
    stops = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.signal(sig, lambda got, _: caught.append(got)) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for first in caught[:1]:
            signal.raise_signal(first)
