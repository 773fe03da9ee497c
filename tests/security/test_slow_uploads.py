"""Slow uploads cannot starve the API (issue #20, item 6; invariant 11).

The attack, as reproduced: tenant A opens more `POST /v1/audiences` than
the API process has pooled connections, and trickles each body a few bytes
at a time. Before the fix every upload held a connection and an open
transaction while it waited on the client, so tenant B's `GET /v1/events`
waited for a connection and answered 503 for the whole window.

Here against a real `tidings serve` process with a pool of 3: B keeps
answering 200 quickly while A's uploads trickle, A's uploads beyond its
concurrency bound are refused with 429 and `Retry-After`, and a trickled
or stalled upload is cut off with 408.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from harness.processes import start_api, wait_http

from tests.integration.api_support import auth, count, new_key
from tests.lanes import starts_processes
from tidings import Tidings
from tidings.cli.devstack import free_port

POOL = 3
# More uploads may run at once than the pool has connections: only holding
# none while waiting on the client keeps tenant B answered.
CONCURRENT_UPLOADS = POOL + 1
UPLOADS = CONCURRENT_UPLOADS + 2
IDLE_SECONDS = 1.0
DEADLINE_SECONDS = 4.0
LINE = json.dumps({"ref": "reader-1", "email": "reader1@example.com"}).encode() + b"\n"


@pytest.fixture
@starts_processes
def api(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("TIDINGS_POOL_SIZE", str(POOL))
    monkeypatch.setenv("TIDINGS_UPLOAD_IDLE_SECONDS", str(IDLE_SECONDS))
    monkeypatch.setenv("TIDINGS_UPLOAD_DEADLINE_SECONDS", str(DEADLINE_SECONDS))
    monkeypatch.setenv("TIDINGS_UPLOADS_PER_TENANT", str(CONCURRENT_UPLOADS))
    port = free_port()
    proc = start_api(db_url, tmp_path, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # still serving a hung upload
            proc.kill()
            proc.wait()


def open_upload(url: str, key: str) -> socket.socket:
    """A raw socket that has sent an upload's headers and its first line."""
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (
        "POST /v1/audiences HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {key}\r\n"
        "Content-Type: application/x-ndjson\r\n"
        "Content-Length: 1000000\r\n"
        "\r\n"
    )
    sock.sendall(head.encode() + LINE)
    return sock


def trickle(sockets: list[socket.socket], stop: threading.Event, every: float = 0.3) -> None:
    """One byte at a time on every socket still open, under the idle timeout."""
    while not stop.wait(every):
        for sock in sockets:
            # Once the server has answered and closed it, that is the point.
            with contextlib.suppress(OSError):
                sock.sendall(b" ")


def status_of(sock: socket.socket) -> tuple[int, str]:
    """The status and raw head of the answer the server sent on `sock`."""
    sock.settimeout(DEADLINE_SECONDS + 10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    sock.close()
    head = data.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
    return (int(head.split()[1]) if head else 0), head


def test_trickled_uploads_leave_another_tenant_answered(api: str, db_url: str) -> None:
    with Tidings(db_url, secret_key="test-secret-key-0123456789abcdef") as t:
        key_a, key_b = new_key(t, "tenant-a"), new_key(t, "tenant-b")
    sockets = [open_upload(api, key_a) for _ in range(UPLOADS)]
    stop = threading.Event()
    trickler = threading.Thread(target=trickle, args=(sockets, stop), daemon=True)
    trickler.start()
    try:
        time.sleep(0.5)  # every upload has reached its handler
        slowest = 0.0
        with httpx.Client(base_url=api, headers=auth(key_b), timeout=15) as b:
            until = time.monotonic() + DEADLINE_SECONDS - 1
            while time.monotonic() < until:
                started = time.monotonic()
                reply = b.get("/v1/events")
                slowest = max(slowest, time.monotonic() - started)
                assert reply.status_code == 200, reply.text
                time.sleep(0.1)
        assert slowest < 1.0, f"tenant B waited {slowest:.1f} s behind tenant A's uploads"
        answers = [status_of(sock) for sock in sockets]
    finally:
        stop.set()
        trickler.join()
    statuses = sorted(status for status, _ in answers)
    # Those admitted trickle on until the overall deadline cuts them off; the
    # rest were refused at once, each telling the client when to come back.
    assert statuses == [408] * CONCURRENT_UPLOADS + [429] * (UPLOADS - CONCURRENT_UPLOADS)
    for status, head in answers:
        assert "content-type: application/problem+json" in head.lower()
        if status == 429:
            assert "retry-after:" in head.lower()
    assert count(db_url, "audience_upload_members") == 0
    assert count(db_url, "audience_uploads") == 0


def test_a_stalled_upload_is_cut_off_by_the_idle_timeout(api: str, db_url: str) -> None:
    with Tidings(db_url, secret_key="test-secret-key-0123456789abcdef") as t:
        key = new_key(t, "tenant-a")
    started = time.monotonic()
    status, head = status_of(open_upload(api, key))  # sends nothing after its first line
    assert status == 408, head
    assert time.monotonic() - started < IDLE_SECONDS + 2
    # The slot is given back: a whole upload goes through afterwards.
    reply = httpx.post(
        f"{api}/v1/audiences",
        content=LINE,
        headers={**auth(key), "Content-Type": "application/x-ndjson"},
        timeout=15,
    )
    assert reply.status_code == 201, reply.text
