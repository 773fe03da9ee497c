"""Everything in one process tree, for trying tidings: the embedded
database, the API (with the console), a worker, and the provider simulator
as its own process wired as the provider for both channels.

Used by `tidings up` and `tidings demo`. Stopping is orderly: the worker
finishes and records in-flight sends, the API drains, the simulator exits,
and the embedded database stops when its last user lets go. Everything is
durable, so the next start carries on where this one stopped.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from wsgiref.simple_server import WSGIServer

import httpx
import uvicorn

from tidings.client import Tidings
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.observability.metrics import serve_ledger_metrics
from tidings.platform.settings import Settings
from tidings.policies import builtin_document
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.store import policies as policy_store
from tidings.store.api_keys import create_key

ALL_SCOPES = ("send", "read", "admin", "webhook")
DEV_KEY_LIFETIME = timedelta(days=1)
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DevStack:
    settings: Settings = field(default_factory=Settings)
    api_port: int = 0
    simulator_port: int = 0
    metrics_port: int = 0
    simulator_config: dict[str, Any] = field(default_factory=dict)
    worker_config: WorkerConfig = field(default_factory=WorkerConfig)

    def __post_init__(self) -> None:
        self.api_port = self.api_port or free_port()
        self.simulator_port = self.simulator_port or free_port()
        self.metrics_port = self.metrics_port or free_port()
        configured = self.settings.simulator_webhook_secret
        # Unset, a fresh secret per run: never the simulator's well-known one.
        self.secret = configured.get_secret_value() if configured else secrets.token_urlsafe(32)
        # Names this run's keys, so a second demo in the same home is new work.
        self.run_id = time.strftime("%Y%m%dT%H%M%S")
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: uvicorn.Server | None = None
        self._metrics: WSGIServer | None = None
        self._simulator: subprocess.Popen[bytes] | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def simulator_url(self) -> str:
        return f"http://127.0.0.1:{self.simulator_port}"

    def start(self, *, with_worker: bool = True) -> DevStack:
        self.tidings = Tidings(settings=self.settings)
        self.tidings.migrate()
        self._start_simulator()
        self.adapter = SimulatorAdapter(
            self.simulator_url, self.secret, profile=self.settings.simulator_profile
        )
        self._start_api()
        self._metrics = serve_ledger_metrics(self.tidings.runtime, self.metrics_port)
        self.worker = Worker(
            self.tidings.runtime,
            {"sms": self.adapter, "email": self.adapter},
            config=self.worker_config,
        )
        if with_worker:
            self.start_worker()
        return self

    def start_worker(self) -> None:
        """The background worker; the demo stages its race before starting it."""
        self._spawn(self.worker.run, self._stop, name="worker")

    def example_policy(self) -> str:
        """The tenant's current policy version, publishing the shipped
        example first when it has none: a tenant without a policy is denied
        everything, and `tidings up` is for trying things out. A policy the
        user published is never replaced."""
        with self.tidings.db.transaction() as conn:
            existing = policy_store.current(conn, self.tidings.tenant)
        if existing is not None:
            return existing.version
        return self.tidings.publish_policy(builtin_document("default"), actor="tidings up")

    def dev_key(self) -> str:
        return create_dev_key(self.tidings)

    def _start_simulator(self) -> None:
        config = {
            "webhook_url": f"{self.api_url}/v1/webhooks/simulator",
            "profile": self.settings.simulator_profile or "ideal",
            **self.simulator_config,
        }
        self._simulator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tidings.providers.simulator",
                "--port",
                str(self.simulator_port),
                "--webhook-url",
                config.pop("webhook_url"),
                # One word: a random secret may start with "-", which a
                # separate argument would pass off as an option.
                f"--webhook-secret={self.secret}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ},
        )
        _wait_healthy(f"{self.simulator_url}/healthz", self._simulator)
        if config:
            httpx.put(f"{self.simulator_url}/_config", json=config, timeout=5).raise_for_status()

    def _start_api(self) -> None:
        from tidings.api.app import create_app
        from tidings.api.settings import ApiSettings

        app = create_app(
            self.tidings,
            adapters={"simulator": self.adapter},
            settings=ApiSettings.from_settings(self.tidings.settings),
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.api_port, log_level="warning", log_config=None
        )
        self._server = uvicorn.Server(config)
        self._spawn(self._server.run, name="api")
        _wait_healthy(f"{self.api_url}/healthz", None)

    def _spawn(self, target: Any, *args: Any, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._metrics is not None:
            self._metrics.shutdown()
            self._metrics.server_close()
        for thread in self._threads:
            thread.join(timeout=35)
        if self._simulator is not None:
            self._simulator.terminate()
            self._simulator.wait(timeout=10)
        self.tidings.close()

    def __enter__(self) -> DevStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_healthy(url: str, process: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # waiting on a real process to listen, with a deadline
    raise RuntimeError(f"{url} did not answer within {START_TIMEOUT} s")


def create_dev_key(t: Tidings) -> str:
    """`tidings up`'s admin key for this run. It expires after a day: each
    run prints a new one, and the ones before must not pile up as
    never-expiring admin keys in a home that outlives the trial."""
    now = t.now()
    with t.db.transaction() as conn:
        _, plaintext = create_key(
            conn,
            t.tenant,
            ALL_SCOPES,
            "tidings up",
            now=now,
            expires_at=now + DEV_KEY_LIFETIME,
            vault=t.vault,
        )
    return plaintext
