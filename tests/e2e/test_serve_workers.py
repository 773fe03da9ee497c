"""`tidings serve --workers N`: N API processes share one port, each with
its own engine; nothing one holds matters to another, one that dies is
replaced, and a stop stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import psycopg
import pytest
from harness.processes import start_api, wait_http, wait_until

from tests.conftest import TEST_SECRET, with_example_policy
from tidings import Tidings
from tidings.cli.devstack import free_port
from tidings.store import api_keys

WORKERS = 2


def children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in found]


def api_processes(supervisor: int) -> list[int]:
    # uvicorn's supervisor spawns one process per worker (and a resource
    # tracker of multiprocessing's, which serves nothing).
    return [c for c in children(supervisor) if b"multiprocessing.resource_tracker"
            not in Path(f"/proc/{c}/cmdline").read_bytes()]  # fmt: skip


# The README's `pytest` runs this one too (tests/lanes.py).
@pytest.mark.smoke
def test_several_api_processes_share_the_port_and_stop_together(
    db_url: str, tmp_path: Path
) -> None:
    t = with_example_policy(Tidings(db_url, secret_key=TEST_SECRET))
    t.publish_template("notice", channel="sms", body="Notice {{ n }}", required_variables=["n"])
    with t.db.transaction() as conn:
        _, key = api_keys.create_key(conn, t.tenant, ["send", "read"], "test", vault=t.vault)
    t.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.log").open("wb")
    api = start_api(db_url, tmp_path, port, "--workers", str(WORKERS), output=log)
    try:
        wait_http(f"{base}/healthz", api)
        wait_until(lambda: len(api_processes(api.pid)) == WORKERS, what="both API processes")
        # Fresh connections, so the kernel spreads them over both processes;
        # a replayed key must answer the first intent whichever one answers.
        answers = []
        for i in range(40):
            body = {
                "idempotency_key": f"notice:{i % 20}",
                "channel": "sms",
                "recipient": {"ref": f"m{i % 20}", "phone": "+14155550123"},
                "template": "notice",
                "variables": {"n": str(i % 20)},
                "purpose": "transactional",
                "event_class": "notice",
            }
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
                answers.append(http.post("/v1/intents", json=body))
        assert [a.status_code for a in answers] == [201] * 20 + [200] * 20
        assert [a.json()["id"] for a in answers[:20]] == [a.json()["id"] for a in answers[20:]]
        with psycopg.connect(db_url) as conn:
            row = conn.execute("SELECT count(*) FROM intents").fetchone()
        assert row is not None and row[0] == 20
        # One API process killed outright is replaced; the others go on.
        victim = api_processes(api.pid)[0]
        os.kill(victim, signal.SIGKILL)
        wait_until(
            lambda: len(api_processes(api.pid)) == WORKERS and victim not in api_processes(api.pid),
            what="a replacement API process",
        )
        wait_http(f"{base}/healthz", api)
        workers = api_processes(api.pid)
    finally:
        api.send_signal(signal.SIGTERM)
        try:
            code = api.wait(timeout=30)
        except subprocess.TimeoutExpired:
            api.kill()
            raise
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()], (
        "a worker outlived the stop"
    )
