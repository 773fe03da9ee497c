"""Issue #20 item 8: `tidings serve` wrote `GET /console/?key=tdg_…` with the
full key into its access log. Runs the real process, sends a key in the
query string of several paths, and greps everything it logged.

Also checks, through uvicorn's trusted-proxy handling, that a request
that reached the proxy over TLS gets Secure cookies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from harness.processes import start_api, wait_http

from tests.security.key_support import new_key
from tidings import Tidings
from tidings.cli.devstack import free_port


def test_the_access_log_never_holds_a_query_string(
    tidings: Tidings, db_url: str, tmp_path: Path, spawns: None
) -> None:
    key = new_key(tidings, "acme", ["read"])
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        proc = start_api(db_url, tmp_path, port, output=output)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_http(f"{base}/healthz", proc)
            with httpx.Client(base_url=base, timeout=10) as http:
                for path in ("/console/", "/console/jobs", "/v1/events", "/healthz", "/nowhere"):
                    http.get(path, params={"key": key, "tenant": "acme"})
                page = http.get("/console/", headers={"X-Forwarded-Proto": "https"})
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    text = log.read_text(errors="replace")
    assert key not in text and key.split("_", 2)[2] not in text
    # uvicorn's lines go through our JSON logging: one object per line.
    access = [
        line["event"]
        for line in map(json.loads, text.splitlines())
        if line.get("logger") == "uvicorn.access"
    ]
    requests = [re.search(r'"GET (\S*) HTTP/1.1" (\d+)', event) for event in access]
    assert ("/console/jobs", "303") in [m.groups() for m in requests if m]  # the log is on
    assert all(m and "?" not in m.group(1) for m in requests), access
    # uvicorn trusts X-Forwarded-Proto from 127.0.0.1 (FORWARDED_ALLOW_IPS).
    assert page.status_code == 401 and "secure" in page.headers["set-cookie"].lower()
