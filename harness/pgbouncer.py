"""PgBouncer in transaction pooling mode, in front of a test database.

Debian's `pgbouncer` (scripts/install-pgbouncer; a missing binary fails the
tests that need it, never skips them), run as `nobody` (it refuses root)
from a configuration written here, on a port of its own. Few server
connections for many clients, so transactions of different clients share
server connections all the time: a prepared statement, a session lock or a
LISTEN that assumed a connection of its own breaks at once.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tidings.cli.devstack import free_port

BINARY = "/usr/sbin/pgbouncer"


@contextmanager
def pgbouncer(server_url: str, *, listen: str = "127.0.0.1", pool_size: int = 4) -> Iterator[int]:
    """Run PgBouncer for every database of `server_url`'s server; its port."""
    assert Path(BINARY).exists(), "pgbouncer is missing: run scripts/install-pgbouncer"
    server = conninfo_to_dict(server_url)
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="tidings-pgbouncer-"))
    target = f"host={server.get('host', '127.0.0.1')} port={server.get('port', 5432)}"
    (folder / "users.txt").write_text(f'"{server.get("user", "postgres")}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"* = {target}",
                "[pgbouncer]",
                f"listen_addr = {listen}",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {folder / 'users.txt'}",
                "pool_mode = transaction",
                "max_client_conn = 500",
                f"default_pool_size = {pool_size}",
                "ignore_startup_parameters = extra_float_digits,options",
                "",
            ]
        )
    )
    os.chmod(folder, 0o755)
    for item in folder.iterdir():
        os.chmod(item, 0o644)
    log = (folder / "pgbouncer.log").open("wb")
    proc = subprocess.Popen(
        [BINARY, "-u", _user_for(server.get("host")), str(folder / "pgbouncer.ini")],
        stdout=log,
        stderr=log,
    )
    try:
        _wait_for(make_conninfo(server_url, host=listen, port=port), proc, folder)
        yield port
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
    """The same database, reached through PgBouncer."""
    return make_conninfo(url, host=host, port=port)


def _wait_for(url: str, proc: subprocess.Popen[bytes], folder: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = (folder / "pgbouncer.log").read_text(errors="replace")
            raise RuntimeError(f"pgbouncer exited with {proc.returncode}:\n{text}")
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            time.sleep(0.1)  # it is starting to listen
    text = (folder / "pgbouncer.log").read_text(errors="replace")
    raise RuntimeError(f"pgbouncer never answered:\n{text[-2000:]}")
