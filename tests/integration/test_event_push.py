"""Application events pushed to a real local endpoint, signed, at least once."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from tidings import ManualClock, Tidings
from tidings.platform.signing import SIGNATURE_HEADER, verify_signature

from .dispatch_helpers import offer, publish_offer_template, simulator, worker

SECRET = "event-secret-0123456789"


def events_visible(t: Tidings, timeout: float = 60.0) -> None:
    """Waits until the events committed so far can be read: the cursor shows
    an event once no older transaction runs anywhere on the server
    (store/sql/queries/events.sql), and other tests share the server."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        with t.db.transaction() as conn:
            row = conn.execute(
                "SELECT coalesce(max(txid) < pg_snapshot_xmin(pg_current_snapshot()), true)"
                " AS visible FROM events"
            ).fetchone()
        if row and row["visible"]:
            return
        time.sleep(0.05)
    raise AssertionError(f"events still hidden by an older transaction after {timeout}s")


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.signatures_ok: list[bool] = []
        self.fail_next = 0


@pytest.fixture
def receiver(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Receiver, str]]:
    # The receiver is on loopback: allowed only by the development setting.
    monkeypatch.setenv("TIDINGS_ALLOW_PRIVATE_WEBHOOKS", "1")
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            if state.fail_next:
                state.fail_next -= 1
                self.send_response(503)
                self.end_headers()
                return
            state.signatures_ok.append(
                verify_signature(
                    SECRET, self.headers[SIGNATURE_HEADER], body, now=clock.now().timestamp()
                )
            )
            state.bodies.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}/hooks"
    server.shutdown()


def test_events_are_pushed_signed_once_after_a_failure(
    tidings: Tidings, clock: ManualClock, receiver: tuple[Receiver, str]
) -> None:
    state, url = receiver
    publish_offer_template(tidings)
    before = offer(tidings, 0)
    tidings.cancel(before.id, reason="member_left")  # before the subscription: not pushed
    tidings.set_event_webhook(url, SECRET)
    w = worker(tidings, simulator(clock))
    intents = [offer(tidings, n) for n in range(1, 4)]
    for intent in intents:
        tidings.cancel(intent.id, reason="class_canceled")
    events_visible(tidings)
    state.fail_next = 1
    assert w.push_events_once() == 0  # the endpoint answered 503: nothing moves
    assert w.push_events_once() == 0  # backing off: not due yet
    clock.advance(3)
    assert w.push_events_once() == 3
    clock.advance(3)
    assert w.push_events_once() == 0  # nothing new: nothing sent twice
    [body] = state.bodies
    assert [e["intent_id"] for e in body["events"]] == [str(i.id) for i in intents]
    assert {e["type"] for e in body["events"]} == {"intent.canceled"}
    assert state.signatures_ok == [True]
