"""A three-member PostgreSQL cluster managed by Patroni, on loopback.

etcd (Debian's `etcd-server`, scripts/install-etcd) holds the leader lock;
three Patroni agents (the `patroni` package, a dev dependency) each run a
PostgreSQL from Debian's server binaries, because replicas are built with
`pg_basebackup` and rejoined with `pg_rewind`, which the embedded pgserver
wheel lacks. Replication is synchronous (`synchronous_mode: true`): a
commit is acknowledged once the synchronous standby has it, and only that
standby may be promoted, so a failover loses no acknowledged commit.

tidings reaches whichever member is primary through one multi-host DSN
with `target_session_attrs=read-write` (docs/scaling.md says why not
HAProxy). The cluster's timings are short so a test sees a failover in
seconds: the leader key lives 20 s, Patroni looks every second, and a
primary whose postmaster dies is failed over at once rather than restarted
in place (`primary_start_timeout: 0`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg.conninfo import make_conninfo

from harness import http
from harness.failover.config import member_config
from tidings.cli.devstack import free_port

ETCD = "/usr/bin/etcd"
MEMBERS = 3
START_TIMEOUT_S = 120.0
# A new primary is expected well within the leader key's life.
FAILOVER_TIMEOUT_S = 60.0
# Patroni refuses nothing as root, but PostgreSQL does: the agents run as
# this Debian user, keeping only the right to read the (root-owned)
# virtual environment they are started from.
SERVER_USER = "postgres"
Idle = Callable[[], None] | None


@dataclass
class Member:
    name: str
    pg_port: int
    api_port: int
    folder: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def url(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname={dbname}"

    def postmaster_pid(self) -> int:
        return int((self.data_dir / "postmaster.pid").read_text().split()[0])


class PatroniCluster:
    """`with PatroniCluster() as cluster:` etcd and three members, started
    and ready (a primary and a synchronous standby); removed on exit."""

    def __init__(self, root: Path | None = None, bridge: tuple[str, str] | None = None) -> None:
        """`bridge`: (address, network) where hosts in network namespaces
        reach the members too (config.py)."""
        self.root = root or Path(tempfile.mkdtemp(prefix="tidings-patroni-"))
        self.bridge = bridge
        self.scope = f"tidings-{uuid.uuid4().hex[:8]}"
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.members = [
            Member(f"pg{i}", free_port(), free_port(), self.root / f"pg{i}") for i in range(MEMBERS)
        ]
        self._etcd: subprocess.Popen[bytes] | None = None
        self._user = _server_user()
        # Each failover and switchover: when (wall clock, so rows'
        # timestamps compare), which member gave way to which, how long.
        self.events: list[dict[str, Any]] = []
        # Called while a fault waits on the cluster: the reliability run
        # supervises its workers meanwhile, as between faults.
        self.idle: Idle = None

    def __enter__(self) -> PatroniCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, dbname: str = "postgres", *, connect_timeout: int = 3) -> str:
        """The DSN tidings uses: every member, the writable one chosen at connect."""
        return make_conninfo(
            "",
            host=",".join("127.0.0.1" for _ in self.members),
            port=",".join(str(m.pg_port) for m in self.members),
            user="postgres",
            dbname=dbname,
            target_session_attrs="read-write",
            connect_timeout=connect_timeout,
        )

    # --- start and stop ------------------------------------------------------

    def start(self) -> None:
        assert Path(ETCD).exists(), "etcd is missing: run scripts/install-etcd"
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        self._etcd = self._spawn(
            [
                ETCD,
                "--name=etcd0",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-cluster=etcd0=http://127.0.0.1:{self.etcd_peer_port}",
            ],
            self.root / "etcd.log",
            as_server_user=False,
        )
        for member in self.members:
            member.folder.mkdir(mode=0o700)
            config = member.folder / "patroni.yml"
            settings = member_config(self.scope, member, self.etcd_port, server_bin(), self.bridge)
            config.write_text(json.dumps(settings, indent=2))
            self._give(member.folder)
            member.proc = self._spawn(
                [sys.executable, "-m", "patroni", str(config)], member.folder / "patroni.log"
            )
        self.wait_healthy(START_TIMEOUT_S)

    def stop(self) -> None:
        for member in self.members:
            if member.proc is not None and member.proc.poll() is None:
                member.proc.terminate()  # Patroni stops its PostgreSQL first
        for member in self.members:
            if member.proc is not None:
                _wait_or_kill(member.proc, 30)
            _kill_postmaster(member)
        if self._etcd is not None:
            self._etcd.terminate()
            _wait_or_kill(self._etcd, 10)
        shutil.rmtree(self.root, ignore_errors=True)

    # --- what the tests do to it -------------------------------------------

    def state(self) -> dict[str, dict[str, Any]]:
        """Each member's role and state as Patroni's REST API tells them."""
        for member in self.members:
            try:
                answer = http.request("GET", f"{member.api}/cluster", timeout=2)
                if answer.status_code == 200:
                    return {m["name"]: m for m in answer.json()["members"]}
            except httpx.HTTPError:
                continue  # that agent is down: ask another
        return {}

    def primary(self) -> Member | None:
        """The member that is leader and accepts writes, if any."""
        for name, member in self.state().items():
            if member.get("role") == "leader" and member.get("state") == "running":
                found = self._member(name)
                if _writable(found):
                    return found
        return None

    def wait_primary(
        self, timeout: float, *, other_than: str | None = None, idle: Idle = None
    ) -> Member:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.primary()
            if found is not None and found.name != other_than:
                return found
            _pause(0.2, idle)
        raise TimeoutError(f"no writable primary (other than {other_than}): {self.state()}")

    def wait_healthy(self, timeout: float, idle: Idle = None) -> None:
        """A primary, a synchronous standby, and every member streaming."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            members = self.state().values()
            roles = sorted(m.get("role", "") for m in members)
            running = all(m.get("state") in ("running", "streaming") for m in members)
            whole = len(members) == MEMBERS and running and "sync_standby" in roles
            if whole and self.primary() is not None:
                return
            _pause(0.3, idle)
        raise TimeoutError(f"cluster not healthy after {timeout:.0f} s: {self.state()}")

    def kill_primary(self) -> tuple[str, str, float]:
        """SIGKILL the primary's postmaster; (old, new, seconds to a new writable primary)."""
        old = self._ready_to_fail_over()
        os.kill(old.postmaster_pid(), signal.SIGKILL)
        started = time.monotonic()
        new = self.wait_primary(FAILOVER_TIMEOUT_S, other_than=old.name, idle=self.idle)
        return old.name, new.name, time.monotonic() - started

    def switchover(self) -> tuple[str, str, float]:
        """A planned switchover through Patroni's REST API; (old, new, seconds)."""
        old = self._ready_to_fail_over()
        started = time.monotonic()
        answer = http.request(
            "POST", f"{old.api}/switchover", json={"leader": old.name}, timeout=30
        )
        if answer.status_code != 200:
            raise RuntimeError(f"switchover refused: {answer.status_code} {answer.text}")
        new = self.wait_primary(FAILOVER_TIMEOUT_S, other_than=old.name, idle=self.idle)
        return old.name, new.name, time.monotonic() - started

    def restart_primary(self) -> None:
        """Restart the primary's PostgreSQL in place (it keeps the leader lock)."""
        old = self._ready_to_fail_over()  # not while a promotion is still under way
        answer = http.request("POST", f"{old.api}/restart", json={}, timeout=FAILOVER_TIMEOUT_S)
        if answer.status_code != 200:
            raise RuntimeError(f"restart refused: {answer.status_code} {answer.text}")
        self.wait_primary(FAILOVER_TIMEOUT_S, idle=self.idle)

    def fail_over(self) -> str:
        """`kill_primary`, noted in `events`."""
        return self._noted("failover", self.kill_primary)

    def switch_over(self) -> str:
        return self._noted("switchover", self.switchover)

    def _ready_to_fail_over(self) -> Member:
        # In synchronous mode only the synchronous standby may be promoted:
        # with none named yet (a member still rejoining after the last
        # fault, a restart just done) Patroni restarts a crashed primary in
        # place instead, which is right, and not the fault asked for.
        self.wait_healthy(FAILOVER_TIMEOUT_S, self.idle)
        return self.wait_primary(FAILOVER_TIMEOUT_S, idle=self.idle)

    def _noted(self, kind: str, action: Callable[[], tuple[str, str, float]]) -> str:
        at = time.time()
        old, new, seconds = action()
        event: dict[str, Any] = {
            "kind": kind,
            "at": at,
            "old": old,
            "new": new,
            "new_primary_s": round(seconds, 2),
            "healthy_again_s": None,
        }
        self.events.append(event)
        # The old primary rejoining as a standby is timed on the side, so the
        # faults after this one are not held up by it.
        threading.Thread(target=self._time_healthy, args=(event,), daemon=True).start()
        return f"{old} -> {new}: writable after {seconds:.1f} s"

    def _time_healthy(self, event: dict[str, Any]) -> None:
        with contextlib.suppress(TimeoutError, RuntimeError):
            self.wait_healthy(START_TIMEOUT_S)
            event["healthy_again_s"] = round(time.time() - event["at"], 2)

    def logs(self) -> dict[str, str]:
        found = {m.name: m.folder / "patroni.log" for m in self.members}
        return {name: p.read_text(errors="replace") for name, p in found.items() if p.exists()}

    # --- plumbing -------------------------------------------------------------

    def _spawn(
        self, argv: list[str], log: Path, *, as_server_user: bool = True
    ) -> subprocess.Popen[bytes]:
        if as_server_user and self._user is not None:
            argv = [*_drop_to(self._user), *argv]
        with log.open("ab") as out:
            return subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _give(self, path: Path) -> None:
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(path, entry.pw_uid, entry.pw_gid)
            for item in path.iterdir():
                os.chown(item, entry.pw_uid, entry.pw_gid)

    def _member(self, name: str) -> Member:
        return next(m for m in self.members if m.name == name)

    def _check_alive(self) -> None:
        for process, log in [(self._etcd, self.root / "etcd.log")] + [
            (m.proc, m.folder / "patroni.log") for m in self.members
        ]:
            if process is not None and process.poll() is not None:
                text = log.read_text(errors="replace") if log.exists() else ""
                name = log.parent.name if log.parent != self.root else "etcd"
                raise RuntimeError(f"{name} exited {process.returncode}:\n{text[-3000:]}")


def _pause(seconds: float, idle: Idle) -> None:
    if idle is not None:
        idle()
    time.sleep(seconds)


def server_bin() -> Path:
    """Debian's newest PostgreSQL server binaries that include pg_basebackup."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup"), key=lambda p: int(p.parts[-3])
    )
    if not found:
        raise FileNotFoundError("no PostgreSQL server binaries: run scripts/install-etcd")
    return found[-1].parent


def _server_user() -> str | None:
    return SERVER_USER if os.geteuid() == 0 else None


def _drop_to(user: str) -> list[str]:
    # setpriv execs in place (the pid stays the agent's); the ambient
    # capability lets the agent read a virtual environment under /root.
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
            "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", "--"]  # fmt: skip


def _writable(member: Member) -> bool:
    try:
        with psycopg.connect(member.url(), connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            return row is not None and row[0] is False
    except psycopg.Error:
        return False


def _wait_or_kill(process: subprocess.Popen[bytes], timeout: float) -> None:
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def _kill_postmaster(member: Member) -> None:
    """A postmaster its agent left behind (the agent was killed) goes too."""
    with contextlib.suppress(OSError, ValueError):  # none left: the usual case
        os.kill(member.postmaster_pid(), signal.SIGKILL)
