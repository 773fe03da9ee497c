"""The PostgreSQL server under a reliability run: a database of its own on
it, and the two server-side faults (restart, terminated connections).

Which restart is possible depends on the server: the system cluster on
127.0.0.1:5432 restarts through `pg_ctlcluster` (root only); an embedded
pgserver (a Unix-socket URL) restarts through its own `pg_ctl`; a Patroni
cluster of the run's own (`--patroni`) restarts its primary in place
through Patroni. Anything else cannot be restarted from here, and the run
records why instead of failing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from harness.failover.cluster import PatroniCluster
from tidings.store.migrate import migrate

RESTART_TIMEOUT_S = 60.0
# How long to wait for a restarted server to accept connections again.
READY_TIMEOUT_S = 30.0


@dataclass
class Server:
    url: str  # any database on the server; the role may create databases
    kind: str  # "system", "embedded" or "external"
    restart_skip_reason: str | None = None
    data_dir: str | None = None  # embedded only
    restarts: int = 0
    cluster: PatroniCluster | None = None  # a "patroni" server: one that fails over

    @property
    def can_restart(self) -> bool:
        return self.restart_skip_reason is None

    def restart(self) -> float:
        """Restart the server; returns the seconds until it accepted connections."""
        if self.restart_skip_reason is not None:
            raise RuntimeError(self.restart_skip_reason)
        started = time.monotonic()
        if self.cluster is not None:
            self.cluster.restart_primary()
        elif self.kind == "system":
            version = sorted(os.listdir("/etc/postgresql"))[-1]
            command = ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"]
            subprocess.run(command, check=True, capture_output=True, timeout=RESTART_TIMEOUT_S)
        else:
            _pg_ctl_restart(Path(str(self.data_dir)))
        wait_ready(self.url, READY_TIMEOUT_S)
        self.restarts += 1
        return time.monotonic() - started


def describe(url: str) -> Server:
    """What kind of server `url` names, and whether this process may restart it."""
    params = conninfo_to_dict(url)
    host = str(params.get("host") or "")
    port = str(params.get("port") or "5432")
    if host.startswith("/"):
        data_dir = _scalar(url, "SHOW data_directory")
        if not (_pgserver_bin() / "pg_ctl").exists():
            return Server(url, "embedded", "pgserver's pg_ctl is not installed", data_dir)
        return Server(url, "embedded", None, data_dir)
    if host in ("127.0.0.1", "localhost") and port == "5432":
        if os.geteuid() != 0:
            return Server(url, "system", "restarting the system cluster needs root")
        if not os.path.isdir("/etc/postgresql") or shutil.which("pg_ctlcluster") is None:
            return Server(url, "system", "no pg_ctlcluster / /etc/postgresql on this machine")
        return Server(url, "system")
    return Server(url, "external", f"cannot restart a server at {host}:{port} from here")


@contextmanager
def server(
    url: str | None, patroni: bool = False, bridge: tuple[str, str] | None = None
) -> Iterator[Server]:
    """The run's server: a Patroni cluster (also on `bridge`'s address), the
    one at `url`, or a private one."""
    if patroni:
        with patroni_server(bridge) as cluster:
            yield cluster
    elif url is None:
        with private_server() as private:
            yield private
    else:
        yield describe(url)


@contextmanager
def private_server() -> Iterator[Server]:
    """A PostgreSQL of the run's own (pgserver), deleted afterwards: restarting
    it disturbs nobody else using the machine's shared server."""
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    import pgserver

    pgdata = Path(tempfile.mkdtemp(prefix="tidings-reliability-pg-"))
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield describe(server.get_uri())
    finally:
        server.cleanup()


@contextmanager
def patroni_server(bridge: tuple[str, str] | None = None) -> Iterator[Server]:
    """A three-member Patroni cluster of the run's own, reached through its
    multi-host DSN; its faults are failovers and switchovers. `bridge`: see
    PatroniCluster."""
    with PatroniCluster(bridge=bridge) as cluster:
        yield Server(cluster.url(), "patroni", cluster=cluster)


def create_database(server_url: str) -> str:
    name = f"tidings_rel_{uuid.uuid4().hex[:10]}"
    _admin(server_url, f"CREATE DATABASE {name}")
    url = make_conninfo(server_url, dbname=name)
    migrate(url)
    return url


def drop_database(server_url: str, db_url: str) -> None:
    name = conninfo_to_dict(db_url)["dbname"]
    _admin(server_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def terminate_backends(db_url: str) -> int:
    """Kill every other session on the run's database, server-side."""
    with psycopg.connect(db_url, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return sum(1 for (ok,) in rows if ok)


def wait_ready(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # the server is starting; bounded by the deadline


def _pg_ctl_restart(data_dir: Path) -> None:
    # pgserver runs PostgreSQL as the `pgserver` user when we are root.
    user = "pgserver" if os.geteuid() == 0 else None
    command = [str(_pgserver_bin() / "pg_ctl"), "-D", str(data_dir), "-w", "-m", "fast", "restart"]
    subprocess.run(
        command,
        check=True,
        user=user,
        timeout=RESTART_TIMEOUT_S,
        # pg_ctl's postmaster keeps inherited pipes open: use files, never PIPE.
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _pgserver_bin() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _scalar(url: str, sql: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return str(row[0])


def _admin(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]
