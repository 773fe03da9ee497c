"""The embedded default: a real PostgreSQL started from the pgserver wheel.

With no DATABASE_URL, tidings runs its own server in a data directory
(`$TIDINGS_HOME/pgdata`, by default `~/.tidings/pgdata`). The directory is
reused across runs; several processes share one server, and the last one to
let go stops it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tidings.platform.private_files import make_private_dir

_lock = threading.Lock()
_servers: dict[Path, object] = {}


def data_dir(home: Path) -> Path:
    return home / "pgdata"


def embedded_url(home: Path) -> str:
    """Start (or join) the embedded server and return a DSN for it."""
    os.environ.setdefault("XDG_RUNTIME_DIR", str(home / "run"))
    import pgserver  # imported late: only the embedded mode needs it

    pgdata = data_dir(home).resolve()
    with _lock:
        server = _servers.get(pgdata)
        if server is None:
            make_private_dir(pgdata.parent)  # TIDINGS_HOME: the trial secret lives here too
            server = pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
            _servers[pgdata] = server
    return str(server.get_uri())  # type: ignore[attr-defined]
