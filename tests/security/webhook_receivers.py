"""Real HTTP endpoints on loopback for the event-push attacks: a receiver
that records what reaches it, and a tarpit that trickles its answer."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import publish_example_policy
from tidings import ManualClock, Tidings
from tidings.dispatch.runner import Worker

from ..integration.dispatch_helpers import offer, publish_offer_template

ALLOW_PRIVATE = "TIDINGS_ALLOW_PRIVATE_WEBHOOKS"
SECRET = "event-secret-0123456789"


class Received:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.hosts: list[str] = []
        self.arrived = threading.Event()


@contextmanager
def receiver() -> Iterator[tuple[Received, int]]:
    """A webhook receiver on 127.0.0.1: (what reached it, its port)."""
    state = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            state.bodies.append(json.loads(body))
            state.hosts.append(self.headers["host"])
            state.arrived.set()
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def tarpit(every: float = 0.2) -> Iterator[tuple[int, threading.Event]]:
    """A server that answers one byte every `every` seconds and never
    finishes: each read gets its byte long before any per-read timeout.
    Yields its port and an event set once a request has come in."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    hit = threading.Event()
    done = threading.Event()

    def trickle(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            hit.set()
            answer = b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n" + b"x" * 100000
            for byte in answer:
                if done.wait(every):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1], hit
    finally:
        done.set()
        time.sleep(0.25)
        listener.close()


def push_until(w: Worker, clock: ManualClock, done: Callable[[], bool]) -> int:
    """Push rounds until `done()`: a new event shows only once no older
    transaction runs anywhere on the server, which on a busy test server
    can take a moment. Returns the events delivered."""
    delivered = 0
    give_up = time.monotonic() + 10
    while not done() and time.monotonic() < give_up:
        delivered += w.push_events_once()
        clock.advance(2)  # past the idle poll and the first back-off
        time.sleep(0.05)
    return delivered


def canceled_offers(t: Tidings, count: int, start: int = 0) -> None:
    """Events for the tenant to push: each canceled offer is one. Not due
    for an hour, so a running worker never claims them first."""
    later = t.clock.now() + timedelta(hours=1)
    for n in range(start, start + count):
        t.cancel(offer(t, n, not_before=later).id, reason="class_canceled")


def ready_tenant(t: Tidings) -> Tidings:
    publish_example_policy(t)
    publish_offer_template(t)
    return t
