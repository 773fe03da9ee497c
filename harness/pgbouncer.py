"""PgBouncer in transaction pooling mode, in front of a test database.

Debian's `pgbouncer` (scripts/install-pgbouncer; a missing binary fails the
tests that need it, never skips them), run as `nobody` (it refuses root)
from a configuration written here, on a port of its own. Few server
connections for many clients, so transactions of different clients share
server connections all the time: a prepared statement, a session lock or a
LISTEN that assumed a connection of its own breaks at once.

PgBouncer has one server per database and cannot tell a primary from a
standby; in front of a cluster that fails over, `Bouncer.repoint` moves it
to the new primary (harness/failover/follow.py does, as a Patroni
callback would in production).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tidings.cli.devstack import free_port

BINARY = "/usr/sbin/pgbouncer"


@dataclass
class Bouncer:
    """A running PgBouncer; `repoint` sends its pools to another server."""

    port: int
    folder: Path
    listen: str
    pool_size: int
    target: tuple[str, int]
    # Databases named in the file: their pools are the ones a move closes
    # and reopens on the new server. Any other goes through `*`.
    databases: tuple[str, ...] = ()
    # Seconds a client may sit in a transaction doing nothing before
    # PgBouncer drops it and frees its server connection (0: never). A host
    # cut off mid-transaction sends nothing more, not even a reset; without
    # it the server connection, and every row lock of that transaction,
    # stay taken until the kernel's keepalive gives up, hours later.
    idle_transaction_timeout: int = 0
    proc: subprocess.Popen[bytes] | None = None
    repoints: int = 0

    @property
    def ini(self) -> Path:
        return self.folder / "pgbouncer.ini"

    def write(self) -> None:
        host, port = self.target
        self.ini.write_text(
            "\n".join(
                [
                    "[databases]",
                    *(f"{db} = host={host} port={port} dbname={db}" for db in self.databases),
                    f"* = host={host} port={port}",
                    "[pgbouncer]",
                    f"listen_addr = {self.listen}",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.folder / 'users.txt'}",
                    "pool_mode = transaction",
                    "max_client_conn = 500",
                    f"default_pool_size = {self.pool_size}",
                    # After a failed server login PgBouncer refuses clients for
                    # this long (15 s by default): a restarted or failed-over
                    # server would stay unreachable long after it is back.
                    "server_login_retry = 1",
                    f"idle_transaction_timeout = {self.idle_transaction_timeout}",
                    "ignore_startup_parameters = extra_float_digits,options",
                    "",
                ]
            )
        )
        os.chmod(self.ini, 0o644)

    def repoint(self, host: str, port: int) -> None:
        """Send new server connections to `host:port` (a new primary), as a
        Patroni `on_role_change` callback or a moved virtual IP would:
        PgBouncer rereads its file on SIGHUP and closes each server
        connection to the old target when its client releases it."""
        if (host, port) == self.target:
            return
        self.target = (host, port)
        self.write()
        assert self.proc is not None, "repoint a running PgBouncer"
        self.proc.send_signal(signal.SIGHUP)
        self.repoints += 1


@contextmanager
def pgbouncer(server_url: str, *, listen: str = "127.0.0.1", pool_size: int = 4) -> Iterator[int]:
    """Run PgBouncer for every database of `server_url`'s server; its port."""
    with bouncer(server_url, listen=listen, pool_size=pool_size) as running:
        yield running.port


@contextmanager
def bouncer(
    server_url: str,
    *,
    listen: str = "127.0.0.1",
    pool_size: int = 4,
    target: tuple[str, int] | None = None,
    databases: tuple[str, ...] = (),
    idle_transaction_timeout: int = 0,
) -> Iterator[Bouncer]:
    """PgBouncer in front of `target` (default: `server_url`'s host and port),
    with `server_url`'s user; it can be re-pointed while it runs. Name the
    `databases` it will be moved with: a named one's server connections
    follow a move at once (each closed when its client lets it go)."""
    assert Path(BINARY).exists(), "pgbouncer is missing: run scripts/install-pgbouncer"
    server = conninfo_to_dict(server_url)
    folder = Path(tempfile.mkdtemp(prefix="tidings-pgbouncer-"))
    (folder / "users.txt").write_text(f'"{server.get("user", "postgres")}" ""\n')
    os.chmod(folder, 0o755)
    os.chmod(folder / "users.txt", 0o644)
    host = target or (str(server.get("host", "127.0.0.1")), int(server.get("port", 5432)))
    user = _user_for(str(server.get("host") or ""))
    log = (folder / "pgbouncer.log").open("wb")
    running = Bouncer(
        free_port(), folder, listen, pool_size, host, databases, idle_transaction_timeout
    )
    running.write()
    proc = subprocess.Popen([BINARY, "-u", user, str(running.ini)], stdout=log, stderr=log)
    running.proc = proc
    try:
        url = make_conninfo(server_url, host=listen, port=running.port)
        _wait_for(url, proc, folder, through_to_server=target is None)
        yield running
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def _user_for(host: str | None) -> str:
    """Who PgBouncer runs as: `nobody`, or for a server on a Unix socket (the
    embedded one) the socket directory's owner, the only one let in."""
    if host and host.startswith("/"):
        owner = pwd.getpwuid(os.stat(host).st_uid).pw_name
        if owner != "root":
            return owner
    return "nobody"


def through(url: str, port: int, host: str = "127.0.0.1") -> str:
    """The same database, reached through PgBouncer, without
    `target_session_attrs`: PgBouncer answers every new client with the
    startup parameters of its pool's first server connection, so after a
    switchover that connection's `in_hot_standby=on` is replayed forever
    and libpq refuses every connection as read-only, to a primary too (the
    first 3-minute soak stalled 14 minutes on it). A write that reaches a
    standby fails with 25006 instead, which tidings waits out."""
    params = {k: v for k, v in conninfo_to_dict(url).items() if k != "target_session_attrs"}
    return make_conninfo("", **{**params, "host": host, "port": port})


def _wait_for(
    url: str, proc: subprocess.Popen[bytes], folder: Path, *, through_to_server: bool = True
) -> None:
    """Until PgBouncer serves `url` (or, without `through_to_server`, only
    listens: its server may be down on purpose)."""
    deadline = time.monotonic() + 20
    params = conninfo_to_dict(url)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = (folder / "pgbouncer.log").read_text(errors="replace")
            raise RuntimeError(f"pgbouncer exited with {proc.returncode}:\n{text}")
        try:
            if not through_to_server:
                socket.create_connection((str(params["host"]), int(params["port"])), 2).close()
                return
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return
        except (OSError, psycopg.OperationalError):
            time.sleep(0.1)  # it is starting to listen
    text = (folder / "pgbouncer.log").read_text(errors="replace")
    raise RuntimeError(f"pgbouncer never answered:\n{text[-2000:]}")
