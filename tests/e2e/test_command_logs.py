"""`tidings worker` and `tidings serve` log through the redacting structured
logging, in the format and at the level asked for (`--log-format`,
`--log-level`), as a user runs them: real processes, a database that never
answers, and what they print on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

NOWHERE = "postgresql://tidings:s3cret-password@127.0.0.1:1/tidings"


def run(command: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": NOWHERE}
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
