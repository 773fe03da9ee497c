"""Separate OS processes: dispatch workers, the simulator and the API.

Workers are started with the spawn method, so each is a clean interpreter
sharing nothing with the parent but the database, as in production. Each
builds its engine and adapter first and reports ready; the clock starts
only when all are ready, so interpreter start-up is never measured.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.pinning import pinned
from bench.spawned import READY_TIMEOUT_S, STOP_TIMEOUT_S
from bench.spawned import _spawn as _spawn
from tidings.dispatch.steps import WorkerConfig


@dataclass(frozen=True)
class WorkerSpec:
    dsn: str
    simulator_url: str | None = None  # None: the in-process simulator, zero latency
    concurrency: int = 8
    batch_size: int = WorkerConfig.batch_size
    pool_size: int = 10
    ledger_dir: str | None = None  # where an in-process simulator leaves its ledger
    # Retention is measured by scenario 7; elsewhere a worker's purge at
    # start would be a cost of the first seconds of a dispatch measurement.
    purge_interval: float = math.inf  # never: a scenario runs its own purge, or none


def adapter(spec: WorkerSpec) -> Any:
    from tidings.providers.simulator import SimulatorCore
    from tidings.providers.simulator.adapter import SimulatorAdapter
    from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

    if spec.simulator_url:
        return SimulatorAdapter(spec.simulator_url)
    return InProcessSimulatorAdapter(SimulatorCore())


def worker_config(spec: WorkerSpec) -> WorkerConfig:
    return WorkerConfig(
        batch_size=spec.batch_size,
        concurrency={"sms": spec.concurrency, "email": 1},
        purge_interval=spec.purge_interval,
    )


def _worker_main(spec: WorkerSpec, ready: Any, go: Any, stop: Any) -> None:
    from bench.seed import engine
    from tidings.dispatch.runner import Worker

    logging.basicConfig(level=logging.WARNING)
    sender = adapter(spec)
    with engine(spec.dsn, spec.pool_size) as t:
        worker = Worker(t.runtime, {"sms": sender, "email": sender}, config=worker_config(spec))
        halt = threading.Event()  # Worker.run takes a thread event; bridge to ours
        runner = threading.Thread(target=worker.run, args=(halt,))
        ready.set()
        go.wait(READY_TIMEOUT_S)
        runner.start()
        stop.wait()
        halt.set()
        runner.join(STOP_TIMEOUT_S)
    if spec.ledger_dir and hasattr(sender, "core"):
        entries = [(e["idempotency_key"], e["received_at"]) for e in sender.core.ledger()]
        Path(spec.ledger_dir, f"{mp.current_process().pid}.json").write_text(json.dumps(entries))


class WorkerGroup:
    """`count` worker processes; `go()` starts them all and returns the start time."""

    def __init__(self, spec: WorkerSpec, count: int) -> None:
        self._go, self._stop = _spawn.Event(), _spawn.Event()
        self._ready = [_spawn.Event() for _ in range(count)]
        self.processes = [
            _spawn.Process(target=_worker_main, args=(spec, r, self._go, self._stop), daemon=True)
            for r in self._ready
        ]

    def __enter__(self) -> WorkerGroup:
        for process in self.processes:
            process.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        for ready in self._ready:
            if not ready.wait(max(0.0, deadline - time.monotonic())):
                self.__exit__()
                raise RuntimeError("a worker process did not start")
        return self

    def go(self) -> float:
        self._go.set()
        return time.perf_counter()

    def peak_rss_mb(self) -> float:
        return max((peak_rss_mb(p.pid) for p in self.processes if p.pid), default=0.0)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for process in self.processes:
            process.join(STOP_TIMEOUT_S)
            if process.is_alive():
                process.terminate()
                process.join(5)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), read while it is alive."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _simulator_main(port: int, latency_ms: float) -> None:
    from tidings.providers.simulator import run

    run("127.0.0.1", port, latency_ms=latency_ms)


def _api_main(port: int, dsn: str, pool_size: int, max_body_bytes: int) -> None:
    import uvicorn

    from bench.seed import engine
    from tidings.api.app import create_app
    from tidings.api.settings import ApiSettings

    app = create_app(engine(dsn, pool_size), settings=ApiSettings(max_body_bytes=max_body_bytes))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@contextmanager
def serving(target: Any, *args: Any, pin: str | None = None) -> Iterator[tuple[str, int]]:
    """Run `target(port, *args)` in a process until the block ends: (base URL, pid).
    `pin`: the role (bench/pinning.py) whose core the process runs on."""
    port = free_port()
    process = _spawn.Process(target=target, args=(port, *args), daemon=True)
    with pinned(pin) if pin else contextlib.nullcontext():
        process.start()
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base_url)
        yield base_url, process.pid or 0
    finally:
        process.terminate()
        process.join(10)


def simulator(latency_ms: float, pin: str | None = None) -> Any:
    """The simulator process; `PUT /_config {"webhook_url": ...}` makes it post receipts."""
    return serving(_simulator_main, latency_ms, pin=pin)


def api(
    dsn: str, pool_size: int = 12, max_body_bytes: int = 256 * 1024 * 1024, pin: str | None = None
) -> Any:
    return serving(_api_main, dsn, pool_size, max_body_bytes, pin=pin)


@contextmanager
def serve_command(
    dsn: str,
    workers: int = 1,
    pool_size: int = 12,
    pin: str | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """`tidings serve [--workers N]` as a user runs it: its base URL. `pin`:
    the role whose core it runs on; `env`: more of its environment."""
    from bench.seed import SECRET

    port = free_port()
    command = [sys.executable, "-m", "tidings.cli", "serve", "--port", str(port)]
    command += ["--log-level", "warning"]
    if workers > 1:
        command += ["--workers", str(workers)]
    environment = {
        **os.environ,
        "DATABASE_URL": dsn,
        "TIDINGS_SECRET_KEY": SECRET,
        "TIDINGS_POOL_SIZE": str(pool_size),
        **(env or {}),
    }
    with pinned(pin) if pin else contextlib.nullcontext():
        process = subprocess.Popen(
            command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base_url)
        if workers > 1:  # forked together: the others are a moment behind the first
            time.sleep(2.0)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_healthy(base_url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{base_url} did not become healthy")
