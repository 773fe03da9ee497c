"""`tidings worker` and `tidings serve` log through the redacting structured
logging, in the format and at the level asked for (`--log-format`,
`--log-level`), as a user runs them: real processes, a database that never
answers, and what they print on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from harness.processes import start_api, wait_http

from tidings.cli.devstack import free_port

NOWHERE = "postgresql://tidings:s3cret-password@127.0.0.1:1/tidings"


def run(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    # A provider configured, so the worker goes on to wait for the database
    # (with none, it stops first and says which setting is missing).
    env = {**os.environ, "DATABASE_URL": NOWHERE, "TIDINGS_SIMULATOR_URL": "http://127.0.0.1:1"}
    env.pop("TIDINGS_LOG_FORMAT", None)
    env.pop("TIDINGS_LOG_LEVEL", None)
    return subprocess.run(
        [sys.executable, "-m", "tidings.cli", command, "--database-wait-seconds", "1", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("command", ["worker", "serve"])
def test_json_lines_with_levels_and_no_secret(command: str) -> None:
    done = run(command, "--log-format", "json")
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    events = {(line["level"], line["event"]) for line in lines}
    assert ("warning", "database unavailable; retrying") in events
    assert ("error", "database unavailable; giving up") in events
    assert all("timestamp" in line for line in lines)
    assert "s3cret-password" not in done.stderr


def test_console_format_and_a_level_filter() -> None:
    done = run("worker", "--log-format", "console", "--log-level", "error")
    assert done.returncode == 1
    assert "database unavailable; giving up" in done.stderr
    assert "retrying" not in done.stderr  # below the level asked for
    assert not any(line.startswith("{") for line in done.stderr.splitlines())


def test_an_unknown_format_is_refused() -> None:
    done = run("worker", "--log-format", "xml")
    assert done.returncode == 2 and "json or console" in done.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_writes_every_line_as_ours(db_url: str, tmp_path: Path, workers: str) -> None:
    """uvicorn's own lines (start-up, each request's access line) go through
    the same redacting JSON logging as ours, query strings stripped: it must
    not install its own handlers over ours."""
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        api = start_api(
            db_url, tmp_path, port, "--log-format", "json", "--workers", workers, output=out
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", api)
            httpx.get(f"http://127.0.0.1:{port}/healthz?key=s3cret-query", timeout=10)
        finally:
            api.terminate()
            api.wait(30)
    text = log.read_text()
    assert "s3cret-query" not in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "serve wrote nothing"
    parsed = [json.loads(line) for line in lines]  # every line, none in uvicorn's format
    access = [p for p in parsed if p.get("logger") == "uvicorn.access"]
    assert access and all("/healthz" in p["event"] for p in access)
    assert any(p.get("logger") == "uvicorn.error" for p in parsed)  # its start-up lines
