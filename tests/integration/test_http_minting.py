"""Tokens minted by the application over a signed HTTP request, at dispatch,
used to render, and never stored."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import psycopg
import pytest

from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.minting import HttpMinter, MintScope
from tidings.platform.signing import SIGNATURE_HEADER, verify_signature
from tidings.providers.messages import OutboundMessage
from tidings.providers.outcomes import SendResult
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter

from .dispatch_helpers import simulator, worker
from .test_jobs import reset_job

SECRET = "mint-secret-0123456789ab"


class RecordingAdapter(InProcessSimulatorAdapter):
    """The real in-process adapter, keeping what it was asked to send."""

    bodies: list[str]

    def send(self, message: OutboundMessage, idempotency_key: str) -> SendResult:
        self.bodies.append(message.body)
        return super().send(message, idempotency_key)


@pytest.fixture
def minting_app() -> Iterator[tuple[str, list[str], list[bool], list[int]]]:
    tokens: list[str] = []
    verified: list[bool] = []
    outages = [1]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            if outages[0]:
                outages[0] -= 1
                self.send_response(503)
                self.end_headers()
                return
            verified.append(verify_signature(SECRET, self.headers[SIGNATURE_HEADER], body))
            token = secrets.token_urlsafe(16)
            tokens.append(token)
            answer = json.dumps({"variables": {"reset_link": f"https://x.example/r?t={token}"}})
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(answer.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mint", tokens, verified, outages
    server.shutdown()


def test_tokens_are_minted_over_http_and_forgotten(
    tidings: Tidings, clock: ManualClock, db_url: str, minting_app: Any
) -> None:
    url, tokens, verified, _ = minting_app
    reset_job(tidings, 2)
    tidings.prepare_jobs()
    core = simulator(clock)
    adapter = RecordingAdapter(core)
    adapter.bodies = []
    w = worker(tidings, core)
    w.adapters = {"sms": adapter, "email": adapter}
    w.minters["password_reset"] = HttpMinter(url, SECRET, MintScope.parse(tidings.tenant))
    w.dispatch_once()  # the first mint meets an outage: that one waits, unsent
    assert len(adapter.bodies) == len(tokens) == 1
    with tidings.db.transaction() as conn:
        waiting = conn.execute(
            "SELECT count(*) AS n FROM intents WHERE state = 'pending'"
        ).fetchone()
    assert waiting is not None and waiting["n"] == 1
    clock.advance(31)
    while w.dispatch_once():
        pass
    assert len(tokens) == 2 and verified == [True, True]
    assert sorted(tokens) == sorted(b.rsplit("t=", 1)[1] for b in adapter.bodies)
    with psycopg.connect(db_url) as conn:
        dump = " ".join(
            str(r)
            for t in ("intents", "attempts", "transitions", "events")
            for r in conn.execute(f"SELECT * FROM {t}").fetchall()
        )
    assert not any(token in dump for token in tokens)
    with tidings.db.transaction() as conn:
        states = {r["state"] for r in conn.execute("SELECT state FROM intents")}
    assert states == {IntentState.ACCEPTED.value}
