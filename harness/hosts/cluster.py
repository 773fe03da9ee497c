"""A deployment spread over hosts (`netns.py`): PostgreSQL and the provider
simulator in the root namespace on the bridge address, `tidings serve` on
API hosts, `tidings worker` on worker hosts, each host with its own
TIDINGS_HOME, so nothing one host keeps on disk or in memory can reach
another except through the database.

The cluster is private (`LocalPostgres` on the bridge address, trusting
the hosts' subnet): the test owns it, and it is never the system server.
Its settings for vanishing clients are the ones an operator of many hosts
needs (docs/scaling.md): a host cut off mid-transaction would otherwise
keep its row locks until the kernel's two-hour keepalive gave up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from harness import http
from harness.netns import Host, Topology
from harness.postgres import VANISHED_CLIENTS, LocalPostgres
from tidings.cli.devstack import free_port

SECRET = "test-secret-key-0123456789abcdef"
WEBHOOK_SECRET = "many-hosts-webhook-secret"
API_PORT = 8000  # each API host has its own address: the same port on each
START_TIMEOUT_S = 90.0
READY_LINE = b"running; channels"  # what `tidings worker` prints once it runs
_SCRUBBED = ("TIDINGS_FAULTS", "DATABASE_URL", "TIDINGS_DATABASE_URL", "TIDINGS_SIMULATOR_URL")


@dataclass
class HostProcess:
    host: Host
    kind: str  # "api" or "worker"
    popen: subprocess.Popen[bytes]
    log_path: Path
    started_at: float  # time.time(), to compare with the simulator's stamps
    _log: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then SIGKILL if it does not finish in time."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self.close_log()
        return self.popen.returncode

    def close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass
class Cluster:
    topo: Topology
    root: Path
    profile: str = "twilio"
    worker_args: tuple[str, ...] = ()
    pg_settings: dict[str, str] = field(default_factory=dict)
    pg: LocalPostgres | None = None
    sim_port: int = 0
    simulator: subprocess.Popen[bytes] | None = None
    processes: list[HostProcess] = field(default_factory=list)

    @property
    def db_url(self) -> str:
        assert self.pg is not None
        return self.pg.url()

    @property
    def sim_url(self) -> str:
        return f"http://{self.topo.gateway}:{self.sim_port}"

    def api_url(self, name: str) -> str:
        return f"http://{self.topo.hosts[name].address}:{API_PORT}"

    def start_database(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        settings = {**VANISHED_CLIENTS, "max_connections": "300", **self.pg_settings}
        self.pg = LocalPostgres(
            self.root / "pg",
            free_port(),
            host=self.topo.gateway,
            trusted_network=str(self.topo.subnet),
            settings=settings,
        ).init()
        self.pg.start()
        return self.db_url

    def start_simulator(self, webhook_host: str, seed: int = 26) -> str:
        self.sim_port = free_port()
        webhook = f"{self.api_url(webhook_host)}/v1/webhooks/simulator"
        argv = [
            sys.executable, "-m", "tidings.cli", "simulator", "--host", self.topo.gateway,
            "--port", str(self.sim_port), "--seed", str(seed), "--webhook-url", webhook,
            "--profile", self.profile,
        ]  # fmt: skip
        log = (self.root / "simulator.log").open("wb")
        self.simulator = subprocess.Popen(argv, env=self._env(), stdout=log, stderr=log)
        log.close()  # the child holds its own descriptor
        _wait_http(f"{self.sim_url}/healthz", self.simulator)
        return self.sim_url

    def start_api(self, name: str, octet: int) -> HostProcess:
        host = self.topo.hosts.get(name) or self.topo.add_host(name, octet)
        argv = ["serve", "--host", host.address, "--port", str(API_PORT)]
        proc = self._start(host, "api", argv)
        _wait_http(f"{self.api_url(name)}/healthz", proc.popen)
        return proc

    def start_worker(self, name: str, octet: int) -> HostProcess:
        host = self.topo.hosts.get(name) or self.topo.add_host(name, octet)
        proc = self._start(host, "worker", ["worker", *self.worker_args])
        deadline = time.monotonic() + START_TIMEOUT_S
        while READY_LINE not in proc.log_path.read_bytes():
            if not proc.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"worker on {name} did not start: see {proc.log_path}")
            time.sleep(0.1)  # a real process is starting up
        return proc

    def on(self, name: str) -> list[HostProcess]:
        return [p for p in self.processes if p.host.name == name]

    def kill_host(self, name: str) -> None:
        """SIGKILL every process on the host: no goodbye to anyone."""
        for proc in self.on(name):
            if proc.alive():
                proc.popen.kill()
            proc.popen.wait(10)
            proc.close_log()

    def host_of_pid(self) -> dict[int, str]:
        return {p.pid: p.host.name for p in self.processes}

    def database_cpu_seconds(self) -> float:
        """CPU the server has used so far: its processes' user and system
        time, and (through the postmaster's children's totals) the backends
        that have already exited."""
        assert self.pg is not None
        postmaster = self.pg.postmaster_pid()
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid, fields in _proc_stats():
            if pid == postmaster:
                total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
            elif int(fields[1]) == postmaster:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def stop(self) -> None:
        """Everything this cluster started, by its own pids, then the server."""
        for proc in self.processes:
            proc.stop()
        if self.simulator is not None and self.simulator.poll() is None:
            self.simulator.terminate()
            try:
                self.simulator.wait(10)
            except subprocess.TimeoutExpired:
                self.simulator.kill()
                self.simulator.wait(10)
        if self.pg is not None and self.pg.running():
            self.pg.stop()

    def _start(self, host: Host, kind: str, args: list[str]) -> HostProcess:
        home = self.root / host.name
        home.mkdir(parents=True, exist_ok=True)  # this host's own TIDINGS_HOME
        log_path = self.root / f"{host.name}-{kind}.log"
        log = log_path.open("ab")
        argv = host.command(sys.executable, "-m", "tidings.cli", *args)
        env = {**self._env(), "TIDINGS_HOME": str(home)}
        popen = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        proc = HostProcess(host, kind, popen, log_path, time.time(), log)
        self.processes.append(proc)
        return proc

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        env.update(
            DATABASE_URL=self.db_url,
            TIDINGS_SECRET_KEY=SECRET,
            TIDINGS_SIMULATOR_URL=self.sim_url if self.simulator else "",
            TIDINGS_SIMULATOR_PROFILE=self.profile,
            TIDINGS_SIMULATOR_WEBHOOK_SECRET=WEBHOOK_SECRET,
            # A lookup that finds nothing a few seconds on is proof enough
            # with the local simulator (it records before it answers).
            TIDINGS_NOT_RECEIVED_AFTER_SECONDS="5",
            PYTHONUNBUFFERED="1",
        )
        return env


def _proc_stats() -> list[tuple[int, list[str]]]:
    """(pid, the fields of /proc/pid/stat after the command name) for every process."""
    stats = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # it exited meanwhile
        # The command name may hold spaces: the fields start after its ')'.
        stats.append((int(entry), raw[raw.rindex(")") + 2 :].split()))
    return stats


def _wait_http(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process for {url} exited with {proc.returncode}")
        try:
            if http.request("GET", url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # a real process is starting to listen
    raise RuntimeError(f"{url} never answered")
