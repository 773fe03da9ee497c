"""The README's main job, `tidings demo`, as a user runs it: real processes
(the API, a worker, the simulator), a real database, and a scan of its logs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
PHONE = re.compile(r"\+\d{7,15}")


def run_demo(db_url: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": db_url, "TIDINGS_HOME": str(home), "COLUMNS": "160"}
    return subprocess.run(
        [sys.executable, "-m", "tidings.cli", "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# The README's `pytest` runs this one too (tests/lanes.py).
@pytest.mark.smoke
def test_the_demo_completes_and_its_logs_hold_no_destination(db_url: str, tmp_path: Path) -> None:
    done = run_demo(db_url, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "canceled 1, delivered 1, expired 1" in out
    assert "delivered 14, failed 1" in out
    assert "ALLOWED 14, BOUNCED 1" in out  # the hard bounce, reported by its receipt
    assert "suppressions caused by receipts: hard_bounce 1 (simulator)" in out
    assert "delivered 28, no_permitted_channel 2" in out
    assert "found in the database or logs: 0" in out
    assert "sending -> canceled" in out
    log = (tmp_path / "demo.log").read_text()
    assert log.strip(), "the demo wrote no log"
    assert EMAIL.findall(log) == [] and PHONE.findall(log) == []


def test_the_demo_runs_again_in_the_same_home(db_url: str, tmp_path: Path) -> None:
    assert run_demo(db_url, tmp_path).returncode == 0
    second = run_demo(db_url, tmp_path)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    # The first run's hard-bounce receipt suppressed that address: the next
    # report job excludes it (BOUNCED) instead of mailing it again.
    assert "delivered 14, no_permitted_channel 1" in second.stdout
    assert "ALLOWED 14, BOUNCED 1" in second.stdout
