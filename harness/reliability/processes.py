"""The real processes a run drives, each a `tidings` subprocess: the
provider simulator, the API (`tidings serve`, which receives the
simulator's webhooks), and N workers (`tidings worker`). On loopback, or
(the soak) the APIs and workers on hosts in network namespaces
(placement.py), the simulator on the bridge's address.

Workers are supervised: one that died (killed by us, or by its own
TIDINGS_FAULTS plan) is started again, as a process manager would, and
every exit is recorded with its cause.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from harness import http
from harness.wires import channels_env, every_wire_env
from tidings.cli.devstack import free_port

if TYPE_CHECKING:
    from harness.netns import Host

    from .placement import Placement

START_TIMEOUT_S = 60.0
READY_LINE = "running; channels"  # what `tidings worker` prints once it runs
READY_WITHIN_BYTES = 65536  # of a start's output: the line comes before any send's
STOP_TIMEOUT_S = 45.0
# Variables a child must not inherit from whoever started the run.
_SCRUBBED = ("TIDINGS_FAULTS", "DATABASE_URL", "TIDINGS_DATABASE_URL", "TIDINGS_SIMULATOR_URL")


@dataclass
class Proc:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    faults: str = ""  # the TIDINGS_FAULTS plan it runs with
    host: str = ""  # the host (network namespace) it runs on; "": this one
    popen: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    _log: IO[bytes] | None = None
    _start_offset: int = 0  # where this start's own output begins in the log
    _seen_ready: bool = False

    def start(self) -> Proc:
        env = dict(self.env)
        if self.faults:
            env["TIDINGS_FAULTS"] = self.faults
        self._log = self.log_path.open("ab")
        self._log.write(f"--- start {self.name} faults={self.faults!r}\n".encode())
        self._log.flush()
        self._start_offset, self._seen_ready = self._log.tell(), False
        self.popen = subprocess.Popen(
            self.argv, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=os.getcwd()
        )
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def reaped(self, within: float) -> bool:
        """Wait up to `within` seconds for it to exit; whether it did."""
        if self.popen is None:
            return True
        try:
            self.popen.wait(within)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL if it does not finish in time; returns the exit code."""
        if self.popen is None:
            return None
        if self.alive():
            self.signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.popen.returncode

    def ready(self) -> bool:
        """Whether it said it is running (its signal handlers are installed).

        Read from the head of this start's output: a busy worker writes
        hundreds of kilobytes after its ready line."""
        return self.said_ready() and self.alive()

    def said_ready(self) -> bool:
        """Whether this start printed its ready line, alive or not since."""
        if not self._seen_ready:
            with self.log_path.open("rb") as log:
                log.seek(self._start_offset)
                self._seen_ready = READY_LINE.encode() in log.read(READY_WITHIN_BYTES)
        return self._seen_ready

    def reap(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


@dataclass
class WorkerExit:
    name: str
    pid: int
    returncode: int
    faults: str
    uptime_s: float
    log_path: Path
    said_ready: bool = False  # printed its ready line before it went


@dataclass
class Fleet:
    db_url: str
    home: Path
    secret: str
    log_dir: Path
    workers_wanted: int = 2
    lease_seconds: float = 8.0
    concurrency: int = 4
    simulator_seed: int = 0
    profile: str = "ideal"  # the provider the simulator plays (profiles.py)
    # Each channel's provider's real adapter over the simulator's wire of
    # that provider, where it has one (harness/wires.py); the simulator's
    # own protocol for the others.
    wire: bool = False
    # Where the simulator posts receipts (the relay): Twilio signs this URL.
    webhook_url: str = ""
    # Where API and workers reach the database when not directly: PgBouncer
    # in transaction pooling mode; workers then listen on db_url.
    pooled_url: str | None = None
    # Every wired provider's settings in every process, so that a channel can
    # be switched to another provider (switching.py) and the old one's
    # attempts still reconciled.
    switching: bool = False
    # APIs and workers on hosts of their own (placement.py); None: loopback.
    placement: Placement | None = None
    simulator: Proc | None = None
    apis: list[Proc] = field(default_factory=list)
    workers: list[Proc] = field(default_factory=list)
    exits: list[WorkerExit] = field(default_factory=list)
    sim_port: int = 0
    api_port: int = 0
    metrics_port: int = 0
    _serial: int = 0

    def __post_init__(self) -> None:
        self.sim_port = self.sim_port or free_port()
        self.api_port = self.api_port or free_port()
        self.metrics_port = self.metrics_port or free_port()

    @property
    def address(self) -> str:
        """Where the simulator listens: loopback, or the hosts' bridge."""
        return self.placement.address if self.placement is not None else "127.0.0.1"

    @property
    def sim_url(self) -> str:
        return f"http://{self.address}:{self.sim_port}"

    @property
    def api(self) -> Proc | None:
        return self.apis[0] if self.apis else None

    @property
    def api_urls(self) -> list[str]:
        return [f"http://{address}:{self.api_port}" for address, _ in self._api_places()]

    @property
    def api_url(self) -> str:
        return self.api_urls[0]

    @property
    def metrics_url(self) -> str:
        address = self._api_places()[0][0]
        return f"http://{address}:{self.metrics_port}/metrics"

    def _api_places(self) -> list[tuple[str, Host | None]]:
        if self.placement is None:
            return [("127.0.0.1", None)]
        return [(host.address, host) for host in self.placement.apis]

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        env.update(
            DATABASE_URL=self.db_url,
            TIDINGS_HOME=str(self.home),
            TIDINGS_SECRET_KEY=self.secret,
            TIDINGS_SIMULATOR_URL=self.sim_url,
            TIDINGS_SIMULATOR_PROFILE=self.profile,
            # The invariants compare each process's timestamps with the
            # simulator's own to the millisecond (a send after its claim's
            # commit). All run on this host's clock; the database clock,
            # anchored within half a round trip, would blur that comparison
            # on a loaded machine. Skewed clocks have their own test
            # (tests/e2e/test_skewed_clocks.py).
            TIDINGS_CLOCK="system",
            # The simulator signs its receipts with it, the APIs check them:
            # off loopback the development default is refused.
            TIDINGS_SIMULATOR_WEBHOOK_SECRET=f"receipts-{self.secret[:16]}",
            PYTHONUNBUFFERED="1",
            COLUMNS="200",
        )
        if self.wire:
            env.update(self._wire_env())
        direct = self.db_url
        if self.placement is not None:
            direct = self.placement.from_hosts(direct)
            env.update(DATABASE_URL=direct)
        if self.pooled_url is not None:
            env.update(
                DATABASE_URL=self.pooled_url,
                TIDINGS_TRANSACTION_POOLING="1",
                TIDINGS_LISTEN_URL=direct,
            )
        return env

    def _wire_env(self) -> dict[str, str]:
        """Each channel whose profile has a wire on its provider's real
        adapter, the other on the simulator adapter (harness/wires.py), and
        the relay's address as the API's public one, since Twilio signs the
        URL it posts to."""
        relay = urlsplit(self.webhook_url)
        every = every_wire_env(self.sim_url, self.secret, self.webhook_url)
        return {
            **(every if self.switching else {}),
            **channels_env(self.profile, self.sim_url, self.secret, self.webhook_url),
            "TIDINGS_PUBLIC_BASE_URL": f"{relay.scheme}://{relay.netloc}",
        }

    def start(self, webhook_url: str) -> Fleet:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.webhook_url = webhook_url
        self.simulator = self._proc(
            "simulator",
            "simulator",
            "--host",
            self.address,
            "--port",
            str(self.sim_port),
            "--seed",
            str(self.simulator_seed),
            "--webhook-url",
            webhook_url,
            "--profile",
            self.profile,
        ).start()
        _wait_healthy(f"{self.sim_url}/healthz", self.simulator)
        if self.wire and call("PUT", f"{self.sim_url}/_config", json={"wire": True}) is None:
            raise RuntimeError("the simulator refused to speak its provider's wire")
        places = self._api_places()
        for (address, host), url in zip(places, self.api_urls, strict=True):
            api = self._proc(
                host.name if host is not None else "api",
                "serve",
                "--host",
                address,
                "--port",
                str(self.api_port),
                "--metrics-host",
                address,
                "--metrics-port",
                str(self.metrics_port),
                host=host,
            )
            self.apis.append(api.start())
            _wait_healthy(f"{url}/healthz", api)
        for _ in range(self.workers_wanted):
            self.start_worker()
        return self

    def start_worker(self, faults: str = "", env: dict[str, str] | None = None) -> Proc:
        """A worker; `env` adds to the fleet's environment (a skewed clock).
        With hosts, on the next one that is up."""
        self._serial += 1
        host = self.placement.worker_host() if self.placement is not None else None
        worker = self._proc(
            f"worker-{self._serial}",
            "worker",
            "--lease-seconds",
            str(self.lease_seconds),
            "--sms-concurrency",
            str(self.concurrency),
            "--email-concurrency",
            str(self.concurrency),
            "--batch-size",
            "20",
            host=host,
        )
        worker.faults = faults
        worker.env.update(env or {})
        self.workers.append(worker.start())
        return worker

    def switch_profile(self, spec: str) -> None:
        """The simulator plays `spec` from now on; workers started from now
        on send through its providers (the running ones are the caller's to
        replace)."""
        answer = call("PUT", f"{self.sim_url}/_config", json={"profile": spec})
        if answer is None or answer.status_code != 200:
            raise RuntimeError(f"the simulator refused the profile {spec}")
        self.profile = spec

    def live_workers(self) -> list[Proc]:
        return [w for w in self.workers if w.alive()]

    def supervise(self) -> list[WorkerExit]:
        """Record workers that exited and start replacements (without fault plans)."""
        gone = []
        for worker in [w for w in self.workers if not w.alive()]:
            code = worker.returncode()
            worker.reap()
            self.workers.remove(worker)
            exit_ = WorkerExit(
                worker.name,
                worker.pid,
                code if code is not None else 0,
                worker.faults,
                time.monotonic() - worker.started_at,
                worker.log_path,
                worker.said_ready(),
            )
            self.exits.append(exit_)
            gone.append(exit_)
        while len(self.workers) < self.workers_wanted:
            self.start_worker()
        return gone

    def stop(self) -> dict[str, int | None]:
        codes = {w.name: w.stop() for w in self.workers}
        for proc in (*self.apis, self.simulator):
            if proc is not None:
                codes[proc.name] = proc.stop(10)
        return codes

    def _proc(self, name: str, *args: str, host: Host | None = None) -> Proc:
        argv = [sys.executable, "-m", "tidings.cli", *args]
        if host is None:
            return Proc(name, argv, self.env(), self.log_dir / f"{name}.log")
        # `ip netns exec` execs the command: its pid is the process's own.
        log = self.log_dir / f"{name}.log"
        return Proc(name, host.command(*argv), self.env(), log, host=host.name)


def _wait_healthy(url: str, proc: Proc) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.returncode()}; see {proc.log_path}")
        try:
            if http.request("GET", url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # a real process is starting to listen; bounded by the deadline
    raise RuntimeError(f"{proc.name} did not answer {url} within {START_TIMEOUT_S} s")


def call(method: str, url: str, **kwargs: Any) -> httpx.Response | None:
    """One loopback HTTP call that never raises: None when it could not be made."""
    try:
        return http.request(method, url, timeout=kwargs.pop("timeout", 10.0), **kwargs)
    except httpx.HTTPError:
        return None
