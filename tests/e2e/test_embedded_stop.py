"""The embedded PostgreSQL stops when the last `tidings` process using it
exits, however it exits: SIGTERM, Ctrl-C, a crash, or a SIGKILL that the
next command in the same home makes up for (issue #40, point 1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from harness.processes import simulator, wait_http, wait_until

from tidings.cli.devstack import free_port
from tidings.store import embedded

# Bounds, not sleeps: starting or stopping PostgreSQL on a loaded 2-core box.
STOP_WAIT = 30.0


def embedded_env(home: Path) -> dict[str, str]:
    """No DATABASE_URL: the embedded server in `home`, and pgserver's lock
    file beside it (XDG_RUNTIME_DIR unset: tidings puts it under `home`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "XDG_RUNTIME_DIR")}
    env.pop("TIDINGS_DATABASE_URL", None)
    return {**env, "TIDINGS_HOME": str(home), "TIDINGS_SECRET_KEY": "test-secret-key-0123456789ab"}


def tidings(
    home: Path, *args: str, log: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    out = log.open("ab") if log else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "tidings.cli", *args],
        env={**embedded_env(home), **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def postmasters(home: Path) -> list[psutil.Process]:
    """The server processes started on this home's data directory."""
    pgdata = str((home / "pgdata").resolve())
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and pgdata in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def running(home: Path) -> bool:
    return bool(postmasters(home)) and (home / "pgdata" / "postmaster.pid").exists()


def stopped(home: Path) -> bool:
    return not postmasters(home) and not (home / "pgdata" / "postmaster.pid").exists()


def alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def assert_stops(home: Path) -> None:
    wait_until(lambda: stopped(home), STOP_WAIT, "the embedded PostgreSQL to stop")


def finish(proc: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()
        raise AssertionError(log.read_text(errors="replace")[-4000:]) from None


def serve(home: Path, log: Path, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = tidings(home, "serve", "--port", str(port), *args, log=log)
    wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    return proc, port


@contextmanager
def scratch() -> Iterator[Path]:
    """A directory outside pytest's: run as root, pgserver runs PostgreSQL
    as its own user, who must reach the data directory, and another pytest
    run narrows /tmp/pytest-of-root to 0700 when it starts."""
    path = Path(tempfile.mkdtemp(prefix="tidings-embedded-stop-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def seeded() -> Iterator[Path]:
    """A home whose data directory is initialised and migrated, by a short
    command that must itself stop the server it started; each test gets a
    copy, so each pays for a start, not for initdb."""
    with scratch() as scratch_dir:
        home = scratch_dir / "home"
        log = scratch_dir / "migrate.log"
        try:
            code = finish(tidings(home, "migrate", log=log), log)
            assert code == 0, log.read_text()
            assert_stops(home)
        finally:
            for proc in postmasters(home):
                proc.kill()
        yield home


@pytest.fixture
def home(seeded: Path) -> Iterator[Path]:
    with scratch() as scratch_dir:
        copy = scratch_dir / "home"
        # cp -a keeps the owner: as root, pgserver runs PostgreSQL as its own user.
        subprocess.run(["cp", "-a", str(seeded), str(copy)], check=True)
        try:
            yield copy
        finally:
            # Whatever a failed test left: only this test's processes and server.
            for proc in [*using(copy), *postmasters(copy)]:
                proc.kill()


def using(home: Path) -> list[psutil.Process]:
    """The processes started with this home, orphans included."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TIDINGS_HOME") == str(home):
                found.append(proc)
        except psutil.Error:  # gone, or not ours to read
            continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_serve_stops_the_server(home: Path, tmp_path: Path, sig: int) -> None:
    log = tmp_path / "serve.log"
    proc, _ = serve(home, log)
    assert running(home)
    proc.send_signal(sig)
    assert finish(proc, log) in (0, -sig), log.read_text()
    assert_stops(home)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_up_stops_the_server_and_the_simulator(
    home: Path, tmp_path: Path, sig: int
) -> None:
    log = tmp_path / "up.log"
    ports = [str(free_port()) for _ in range(3)]
    args = ("up", "--port", ports[0], "--simulator-port", ports[1], "--metrics-port", ports[2])
    proc = tidings(home, *args, log=log)
    wait_until(lambda: "development API key:" in log.read_text(), 60, "tidings up's key")
    children = psutil.Process(proc.pid).children()
    simulator = [c for c in children if "tidings.providers.simulator" in c.cmdline()]
    assert simulator, log.read_text()
    proc.send_signal(sig)
    assert finish(proc, log) == 0, log.read_text()
    assert_stops(home)
    wait_until(lambda: not any(map(alive, simulator)), STOP_WAIT, "the simulator to exit")


@pytest.mark.parametrize("command", ["serve", "up"])
def test_a_stop_while_the_server_starts_stops_it(home: Path, tmp_path: Path, command: str) -> None:
    """SIGTERM as the server starts: whatever the moment, nothing is left
    (and `serve` does not go on to serve)."""
    log = tmp_path / f"{command}.log"
    ports = [str(free_port()) for _ in range(3)]
    args = {
        "serve": ("serve", "--port", ports[0]),
        "up": ("up", "--port", ports[0], "--simulator-port", ports[1], "--metrics-port", ports[2]),
    }[command]
    proc = tidings(home, *args, log=log)
    deadline = time.monotonic() + 60
    while not (home / "pgdata" / "postmaster.pid").exists():
        assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
        time.sleep(0.005)  # the window is short: while pg_ctl waits for the server
    proc.send_signal(signal.SIGTERM)
    assert finish(proc, log) in (0, 128 + signal.SIGTERM), log.read_text()
    assert_stops(home)


def test_a_stopped_worker_stops_the_server(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with simulator() as url:
        proc = tidings(home, "worker", log=log, env={"TIDINGS_SIMULATOR_URL": url})
        wait_until(lambda: "running; channels" in log.read_text(), 60, "the worker running")
        proc.send_signal(signal.SIGTERM)
        assert finish(proc, log) == 0, log.read_text()
    assert_stops(home)


def test_the_server_outlives_the_first_of_two_processes_and_stops_with_the_second(
    home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    first, _ = serve(home, log)
    second, port = serve(home, log)
    first.send_signal(signal.SIGTERM)
    assert finish(first, log) in (0, -signal.SIGTERM), log.read_text()
    wait_http(f"http://127.0.0.1:{port}/healthz", second)  # still served by the same server
    assert running(home)
    second.send_signal(signal.SIGTERM)
    assert finish(second, log) in (0, -signal.SIGTERM), log.read_text()
    assert_stops(home)


def test_a_killed_process_does_not_keep_the_server_from_stopping(
    home: Path, tmp_path: Path
) -> None:
    """SIGKILL leaves its pid in the handle list; the survivor, last alive,
    still stops the server."""
    log = tmp_path / "serve.log"
    first, _ = serve(home, log)
    second, _ = serve(home, log)
    first.kill()
    first.wait()
    second.send_signal(signal.SIGTERM)
    assert finish(second, log) in (0, -signal.SIGTERM), log.read_text()
    assert_stops(home)


def test_after_a_sigkill_the_next_command_takes_the_server_over_and_stops_it(
    home: Path, tmp_path: Path
) -> None:
    """The process killed could run nothing: the server runs on, ownerless,
    until the next command in the home adopts it and, last to exit, stops it."""
    log = tmp_path / "serve.log"
    proc, _ = serve(home, log)
    proc.kill()
    proc.wait()
    assert running(home)
    code = finish(tidings(home, "migrate", log=log), log)
    assert code == 0, log.read_text()
    assert_stops(home)


def api_process(proc: psutil.Process) -> bool:
    return "resource_tracker" not in " ".join(proc.cmdline())


def test_a_killed_api_process_of_serve_workers_holds_nothing(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    proc, port = serve(home, log, "--workers", "2")
    children = wait_until(
        lambda: [c for c in psutil.Process(proc.pid).children() if api_process(c)][:2],
        what="the API processes",
    )
    children[0].kill()
    # The death seen and the process replaced before the stop: a death the
    # stop itself meets is the next test's interleaving.
    wait_until(
        lambda: f"API process {children[0].pid} exited" in log.read_text() or None,
        what="the supervisor to see the death",
    )
    replaced = wait_until(
        lambda: [c for c in psutil.Process(proc.pid).children() if api_process(c)][1:] or None,
        what="another API process",
    )
    assert children[0].pid not in {c.pid for c in replaced}
    wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    proc.send_signal(signal.SIGTERM)
    assert finish(proc, log) == 0, log.read_text()
    assert "before the stop" not in log.read_text()
    assert_stops(home)


def test_an_api_process_killed_just_before_the_stop_fails_nothing(
    home: Path, tmp_path: Path
) -> None:
    """The interleaving CI met: the parent had not reaped its killed child
    when the stop came. Held still (SIGSTOP) while the child dies and the
    stop is sent, it then meets both at once."""
    log = tmp_path / "serve.log"
    proc, port = serve(home, log, "--workers", "2")
    parent = psutil.Process(proc.pid)
    children = wait_until(
        lambda: [c for c in parent.children() if api_process(c)][:2], what="the API processes"
    )
    wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    parent.suspend()
    children[0].kill()
    wait_until(
        lambda: children[0].status() == psutil.STATUS_ZOMBIE or None, what="the child's death"
    )
    proc.send_signal(signal.SIGTERM)
    parent.resume()
    assert finish(proc, log) == 0, log.read_text()
    assert "before the stop" in log.read_text()
    assert "starting another" not in log.read_text()
    assert_stops(home)


def test_a_crash_lets_go_of_the_server(home: Path, tmp_path: Path) -> None:
    """An exception nobody catches, in a program using the library."""
    log = tmp_path / "crash.log"
    crash = "from tidings import Tidings; Tidings().migrate(); raise RuntimeError('crash')"
    proc = subprocess.Popen(
        [sys.executable, "-c", crash],
        env=embedded_env(home),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    assert finish(proc, log) == 1
    assert "RuntimeError: crash" in log.read_text()
    assert_stops(home)


def exited_unreaped() -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.05)  # a real process exiting
    return proc


def test_prune_keeps_live_pids_and_drops_dead_and_zombie_ones(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    zombie = exited_unreaped()
    try:
        handles = tmp_path / embedded.HANDLES
        handles.write_text(json.dumps([dead.pid, os.getpid(), zombie.pid]))
        embedded._prune(tmp_path)
        assert json.loads(handles.read_text()) == [os.getpid()]
    finally:
        zombie.wait()
