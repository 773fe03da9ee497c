"""A PostgreSQL cluster a test owns: on a loopback TCP port, started and
stopped when the test says, so processes can be shown a database that is
not there yet, or goes away. Built from the pgserver wheel's binaries (a
dependency of tidings), so it needs nothing installed on the machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TIMEOUT_S = 60.0
# How a server notices a client host that vanished (cable pulled, host
# dead): unanswered keepalives after 5 s idle, or 10 s of unacknowledged
# data (docs/scaling.md, "A host that vanishes").
VANISHED_CLIENTS = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "10000",
}


class LocalPostgres:
    def __init__(
        self,
        root: Path,
        port: int,
        host: str = "127.0.0.1",
        trusted_network: str | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        """`host`: the address to listen on (127.0.0.1, or another one a
        test's network namespaces reach); `trusted_network`: a CIDR whose
        clients may connect too; `settings`: more `-c name=value`."""
        self.data = root / "pgdata"
        self.sockets = root / "pgsock"
        self.port = port
        self.host = host
        self.trusted_network = trusted_network
        self.settings = settings or {}
        # PostgreSQL refuses to run as root; pgserver runs it as its own user.
        self.user = "pgserver" if os.geteuid() == 0 else None

    def url(self, password: str | None = None) -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://postgres{secret}@{self.host}:{self.port}/postgres"

    def init(self) -> LocalPostgres:
        self.data.mkdir(parents=True)
        self.sockets.mkdir(parents=True)
        if self.user is not None:
            self._grant()
        # Trust: the password a test puts in its DSN is never checked, only
        # looked for in the logs.
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "utf8")
        if self.trusted_network is not None:
            with (self.data / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {self.trusted_network} trust\n")
        return self

    def postmaster_pid(self) -> int:
        """The server's main process (its backends are its children)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def start(self) -> None:
        extra = "".join(f" -c {name}={value}" for name, value in self.settings.items())
        options = f"-h {self.host} -p {self.port} -k {self.sockets} -c fsync=off{extra}"
        self._pg_ctl("-o", options, "-l", str(self.data / "log"), "start")

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "stop")

    def running(self) -> bool:
        status = subprocess.run(
            [str(_bin() / "pg_ctl"), "-D", str(self.data), "status"],
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
        )
        return status.returncode == 0

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(int(TIMEOUT_S)), *args)

    def _run(self, program: str, *args: str) -> None:
        # Files, not pipes: the postmaster pg_ctl starts inherits them and
        # would hold a pipe open past pg_ctl's own exit.
        subprocess.run(
            [str(_bin() / program), *args],
            check=True,
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TIMEOUT_S,
        )

    def _grant(self) -> None:
        import pwd
        import stat

        from pgserver.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        assert self.user is not None
        ensure_user_exists(self.user)
        entry = pwd.getpwnam(self.user)
        for path in (self.data, self.sockets):
            ensure_prefix_permissions(path)
            os.chown(path, entry.pw_uid, entry.pw_gid)
        readable = stat.S_IRGRP | stat.S_IROTH
        ensure_prefix_permissions(_bin())
        ensure_folder_permissions(_bin(), readable | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(_bin().parent / "lib", readable)


def _bin() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)
