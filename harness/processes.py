"""Starting the real processes a deployment runs: simulator and workers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

from harness import http
from tidings.cli.devstack import free_port

WAIT = 60.0
# How faulthandler heads each thread's stack.
STACKS = "most recent call first"


@contextmanager
def simulator(output: IO[bytes] | None = None, **config: Any) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tidings.cli", "simulator", "--port", str(port)],
        stdout=output or subprocess.DEVNULL,
        stderr=subprocess.STDOUT if output else subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        if config:
            http.request("PUT", f"{url}/_config", json=config, timeout=5).raise_for_status()
        yield url
    finally:
        proc.terminate()
        try:
            # Nine profiles' processes stopping at once on two shared cores
            # (tests/long/test_crash_profiles.py) took longer than 10 s.
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # its work is done and read: a slow exit loses nothing
            proc.wait(timeout=10)


def start_worker(
    db_url: str,
    home: Path,
    simulator_url: str,
    *args: str,
    faults: str = "",
    output: IO[bytes] | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "TIDINGS_HOME": str(home),
        "TIDINGS_SIMULATOR_URL": simulator_url,
        "TIDINGS_FAULTS": faults,
        "TIDINGS_SECRET_KEY": "test-secret-key-0123456789abcdef",
        # The local simulator records a request before it answers, so a
        # lookup that finds nothing a few seconds on is proof enough; the
        # 60 s default is for real providers' slower books.
        "TIDINGS_NOT_RECEIVED_AFTER_SECONDS": "5",
        **(extra_env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tidings.cli", "worker", *args],
        env=env,
        stdout=output or subprocess.DEVNULL,
        stderr=subprocess.STDOUT if output else subprocess.DEVNULL,
    )


def start_api(
    db_url: str,
    home: Path,
    port: int,
    *args: str,
    output: IO[bytes] | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "TIDINGS_HOME": str(home),
        "TIDINGS_SECRET_KEY": "test-secret-key-0123456789abcdef",
        **(extra_env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tidings.cli", "serve", "--port", str(port), *args],
        env=env,
        stdout=output or subprocess.DEVNULL,
        stderr=subprocess.STDOUT if output else subprocess.DEVNULL,
    )


def await_exit(proc: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> int:
    """The exit status of a process already told to stop. One that outlives
    `timeout` is asked for its threads' stacks (SIGUSR1) and killed, and the
    failure carries the end of its log, so a hang shows where it waits."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        with contextlib.suppress(AssertionError):  # a process past writing them: killed anyway
            wait_until(lambda: STACKS in log.read_text(errors="replace"), 5, "its stacks")
        proc.kill()
        proc.wait()
        tail = log.read_text(errors="replace")[-12_000:]
        said = f"{log.name}: running {timeout:.0f} s after SIGTERM"
        raise AssertionError(f"{said}:\n{tail}") from None


def wait_http(url: str, proc: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {proc.returncode}")
        try:
            if http.request("GET", url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # a real process is starting to listen
    raise RuntimeError(f"{url} never answered")


def wait_until(check: Any, timeout: float = WAIT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)  # real processes are working; poll their results
    raise AssertionError(f"timed out waiting for {what}")


def ledger(url: str) -> list[dict[str, Any]]:
    return list(http.request("GET", f"{url}/_ledger", timeout=30).json())


def offers(t: Any, prefix: str, count: int) -> list[Any]:
    """Publish the plain offer template and create `count` SMS offers; their ids."""
    t.publish_template("offer", channel="sms", body="A spot opened.")
    return [
        t.notify(
            idempotency_key=f"offer:{prefix}-{n}",
            channel="sms",
            recipient={"ref": f"m{n}", "phone": "+14155550123"},
            template="offer",
            purpose="transactional",
            event_class="waitlist_offer",
        ).id
        for n in range(count)
    ]
