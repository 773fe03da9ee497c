"""`tidings up` as a newcomer uses it: start, call the API with the printed
key, stop with Ctrl-C, start again and find everything still there."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.test_metrics import PINNED
from tidings.cli.devstack import free_port
from tidings.domain.keys import attempt_key


def start(
    db_url: str, home: Path, port: int, sim_port: int, metrics_port: int = 0
) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "DATABASE_URL": db_url, "TIDINGS_HOME": str(home), "COLUMNS": "200"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tidings.cli",
            "up",
            "--port",
            str(port),
            "--simulator-port",
            str(sim_port),
            "--metrics-port",
            str(metrics_port or free_port()),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "development API key:" in line:
            _drain(proc)
            return proc, line.split()[-1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("tidings up did not print a key")


def _drain(proc: subprocess.Popen[str]) -> None:
    """Read what `up` prints from now on (its log lines), so a full pipe
    never blocks it; kept on `proc.printed` for a test to look at."""
    printed: list[str] = []
    proc.printed = printed  # type: ignore[attr-defined]
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: printed.extend(stdout), daemon=True).start()


def wait_for(url: str, key: str, predicate: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=5).json()
        if predicate(body):
            return dict(body)
        time.sleep(0.2)  # polling a real server for a real outcome
    raise AssertionError(f"{url} never reached the expected state: {body}")


# The README's `pytest` runs this one too (tests/lanes.py).
@pytest.mark.smoke
def test_up_serves_sends_stops_and_resumes(db_url: str, tmp_path: Path) -> None:
    port, sim_port, metrics_port = free_port(), free_port(), free_port()
    proc, key = start(db_url, tmp_path, port, sim_port, metrics_port)
    api = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {key}"}
    try:
        template = {
            "name": "hello",
            "channel": "sms",
            "locale": "en",
            "body": "Hello {{ name }}",
            "required_variables": ["name"],
        }
        assert httpx.post(f"{api}/v1/templates", json=template, headers=headers).status_code == 201
        body = {
            "idempotency_key": "hello:1",
            "channel": "sms",
            "recipient": {"ref": "r1", "phone": "+14155550123"},
            "template": {"name": "hello"},
            "variables": {"name": "Ada"},
            "purpose": "transactional",
            "event_class": "hello",
            "expires_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
        }
        created = httpx.post(f"{api}/v1/intents", json=body, headers=headers)
        assert created.status_code == 201, created.text
        intent_id = created.json()["id"]
        wait_for(f"{api}/v1/intents/{intent_id}", key, lambda b: b["state"] == "delivered")
        ledger = httpx.get(f"http://127.0.0.1:{sim_port}/_ledger").json()
        assert [e["idempotency_key"] for e in ledger] == [attempt_key(intent_id, 1)]
        scrape = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        assert set(re.findall(r"^# HELP (\S+)", scrape, re.MULTILINE)) == PINNED
        assert 'tidings_intents{state="delivered",tenant="default"} 1.0' in scrape
        # Its log lines, readable, with the intent they are about.
        logged = [line for line in proc.printed if intent_id in line]  # type: ignore[attr-defined]
        assert any("attempt recorded" in line for line in logged), proc.printed[-20:]  # type: ignore[attr-defined]
        assert not any(line.startswith("{") for line in proc.printed)  # type: ignore[attr-defined]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    proc, key = start(db_url, tmp_path, port, sim_port)
    try:
        got = httpx.get(f"{api}/v1/intents/{intent_id}", headers={"Authorization": f"Bearer {key}"})
        assert got.status_code == 200 and got.json()["state"] == "delivered"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
