"""Issue #20 item 10: `/metrics` names every tenant and their free-text
event classes, so it must not be reachable where tenants' keys are.

Through a real `tidings serve`: the API port has no /metrics (with or
without a key), and the ledger metrics are served on `--metrics-port`,
where Prometheus scrapes them.
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
from harness.processes import start_api, wait_http

from tests.integration.api_support import ALL_SCOPES
from tidings import Tidings
from tidings.cli.devstack import free_port
from tidings.store.api_keys import create_key


def _plant_other_tenant(db_url: str) -> str:
    """Another tenant with a secret-sounding event class, and a key of a third."""
    with Tidings(db_url, tenant="acme-secret-client") as acme:
        acme.publish_template("offer", channel="sms", body="A spot opened.")
        acme.notify(
            idempotency_key="k1",
            channel="sms",
            recipient={"ref": "m1", "phone": "+14155550123"},
            template="offer",
            purpose="transactional",
            event_class="merger-announcement",
        )
        with acme.db.transaction() as conn:
            _, key = create_key(conn, "hostile", ALL_SCOPES, "hostile tenant", vault=acme.vault)
    return key


def test_metrics_are_not_on_the_api_port_but_on_their_own(
    db_url: str, tmp_path: Path, spawns: None
) -> None:
    key = _plant_other_tenant(db_url)
    port, metrics_port = free_port(), free_port()
    proc = start_api(db_url, tmp_path, port, "--metrics-port", str(metrics_port))
    api = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{api}/healthz", proc)
        for headers in ({}, {"Authorization": f"Bearer {key}"}):
            answer = httpx.get(f"{api}/metrics", headers=headers, timeout=10)
            assert answer.status_code == 404, answer.text
            assert "acme-secret-client" not in answer.text
            assert "merger-announcement" not in answer.text
        scrape = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
        assert scrape.status_code == 200
        assert 'tidings_intents{state="pending",tenant="acme-secret-client"} 1.0' in scrape.text
        assert "tidings_ledger_up 1.0" in scrape.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def test_without_a_metrics_port_nothing_serves_the_ledger_metrics(
    db_url: str, tmp_path: Path, spawns: None
) -> None:
    _plant_other_tenant(db_url)
    port = free_port()
    proc = start_api(db_url, tmp_path, port)
    api = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{api}/healthz", proc)
        answer = httpx.get(f"{api}/metrics", timeout=10)
        assert answer.status_code == 404
        assert "acme-secret-client" not in answer.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
