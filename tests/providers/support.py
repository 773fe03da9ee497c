"""Real sockets for provider tests: a webhook receiver and a simulator subprocess."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Receiver:
    """A tiny HTTP server in a thread that records every POST it gets."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self._arrived = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}/hook"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver._record(dict(self.headers.items()), body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

        return Handler

    def _record(self, headers: dict[str, str], body: bytes) -> None:
        with self._arrived:
            self.requests.append((headers, body))
            self._arrived.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[tuple[dict[str, str], bytes]]:
        with self._arrived:
            self._arrived.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def simulator_process(log_dir: Path, deadline_s: float = 20.0) -> Iterator[str]:
    """`python -m tidings.providers.simulator` on a free port; yields its base URL."""
    port = free_port()
    log = (log_dir / "simulator.log").open("wb")
    command = [sys.executable, "-m", "tidings.providers.simulator", "--port", str(port)]
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(proc, url, log_dir / "simulator.log", deadline_s)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def _wait_until_up(proc: subprocess.Popen[bytes], url: str, log: Path, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"simulator exited early:\n{log.read_text()}")
        try:
            if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)  # waiting on a real process, bounded by the deadline
    raise RuntimeError(f"simulator not up within {deadline_s}s:\n{log.read_text()}")
