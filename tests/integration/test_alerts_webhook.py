"""Alerts are POSTed, signed, to a real HTTP server on open and on resolve."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tidings import ManualClock, Tidings
from tidings.observability.alerts import AlertRound, AlertSweeper
from tidings.observability.alerts.config import AlertConfig, Objective
from tidings.observability.alerts.webhook import AlertWebhook
from tidings.platform.signing import (
    SIGNATURE_HEADER,
    standard_webhooks_secret,
    verify_signature,
)

from .dispatch_helpers import offer, publish_offer_template, simulator, worker

SECRET = "alert-webhook-secret"


@dataclass
class Receiver:
    """A local HTTP server that answers with the scripted statuses, then 204."""

    url: str = ""
    statuses: list[int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.requests.append({"headers": dict(self.headers), "body": body})
            self.send_response(state.statuses.pop(0) if state.statuses else 204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/alerts"
    yield state
    server.shutdown()
    server.server_close()


def sweeper(t: Tidings, url: str, **config: Any) -> AlertSweeper:
    settings = AlertConfig(webhook_url=url, webhook_secret=SECRET, **config)
    hook = AlertWebhook(url, SECRET, timeout=2.0, attempts=3, backoff=0.01)
    return AlertSweeper(t.runtime, settings, hook)


def held_offer(t: Tidings, clock: ManualClock) -> Any:
    """A due backlog: the kill switch holds an offer past the warning age."""
    publish_offer_template(t)
    t.set_control("kill_switch", True, channel="sms")
    intent = offer(t, 1, expires_at=clock.now() + timedelta(hours=2))
    clock.advance(minutes=6)
    return intent


def test_open_and_resolve_are_posted_with_a_valid_signature(
    tidings: Tidings, clock: ManualClock, receiver: Receiver
) -> None:
    intent = held_offer(tidings, clock)
    receiver.statuses = [503]  # the first try fails; the bounded retry succeeds
    round_ = sweeper(tidings, receiver.url).run(clock.now())
    assert round_.delivered == 1
    assert len(receiver.requests) == 2
    opened = receiver.requests[-1]
    header = opened["headers"][SIGNATURE_HEADER]
    assert verify_signature(SECRET, header, opened["body"])
    assert not verify_signature("another-secret", header, opened["body"])
    assert not verify_signature(SECRET, header, opened["body"] + b" ")
    # The Standard Webhooks signature, as its own library verifies it; the
    # id is the delivery's, the same on the retry.
    standard = Webhook(standard_webhooks_secret(SECRET))
    assert standard.verify(opened["body"], opened["headers"]) == json.loads(opened["body"])
    assert opened["headers"]["webhook-id"] == receiver.requests[0]["headers"]["webhook-id"]
    with pytest.raises(WebhookVerificationError):
        standard.verify(opened["body"] + b" ", opened["headers"])
    payload = json.loads(opened["body"])
    assert payload["type"] == "alert.opened"
    alert = payload["alert"]
    assert alert["key"] == "due_backlog:sms" and alert["severity"] == "warning"
    assert alert["details"]["oldest_intent_id"] == str(intent.id)
    assert alert["details"]["affected_recipients"] == 1
    assert opened["headers"]["X-Tidings-Event"] == "alert.opened"
    # Retries of one announcement carry the same delivery id, for dedupe.
    ids = {r["headers"]["X-Tidings-Delivery"] for r in receiver.requests}
    assert ids == {f"{alert['id']}:opened:warning"}

    # Still holding: updated in place, announced once only.
    clock.advance(60)
    assert sweeper(tidings, receiver.url).run(clock.now()).delivered == 0
    assert len(receiver.requests) == 2

    # The condition clears: the alert resolves itself and says so.
    tidings.set_control("kill_switch", False, channel="sms")
    w = worker(tidings, simulator(clock))
    assert w.dispatch_once() == 1
    round_ = sweeper(tidings, receiver.url).run(clock.now())
    assert round_.changes is not None and len(round_.changes.resolved) == 1
    resolved = receiver.requests[-1]
    assert verify_signature(SECRET, resolved["headers"][SIGNATURE_HEADER], resolved["body"])
    payload = json.loads(resolved["body"])
    assert payload["type"] == "alert.resolved"
    assert payload["alert"]["id"] == alert["id"]
    assert payload["alert"]["resolved_at"] == clock.now().isoformat()


def test_a_failing_receiver_delays_the_announcement_but_never_loses_it(
    tidings: Tidings, clock: ManualClock, receiver: Receiver
) -> None:
    held_offer(tidings, clock)
    receiver.statuses = [500, 500, 500]  # every bounded retry of this round fails
    assert sweeper(tidings, receiver.url).run(clock.now()).delivered == 0
    assert len(receiver.requests) == 3
    # Backing off: the next round, seconds later, does not hammer the receiver.
    clock.advance(5)
    assert sweeper(tidings, receiver.url).run(clock.now()).delivered == 0
    assert len(receiver.requests) == 3
    clock.advance(60)
    assert sweeper(tidings, receiver.url).run(clock.now()).delivered == 1
    assert json.loads(receiver.requests[-1]["body"])["type"] == "alert.opened"


def test_an_escalation_to_page_is_announced(
    tidings: Tidings, clock: ManualClock, receiver: Receiver
) -> None:
    held_offer(tidings, clock)
    config = {"due": Objective(300, 900, 1)}
    assert sweeper(tidings, receiver.url, **config).run(clock.now()).delivered == 1
    clock.advance(minutes=10)
    assert sweeper(tidings, receiver.url, **config).run(clock.now()).delivered == 1
    kinds = [json.loads(r["body"])["type"] for r in receiver.requests]
    assert kinds == ["alert.opened", "alert.escalated"]
    assert json.loads(receiver.requests[-1]["body"])["alert"]["severity"] == "page"


def test_the_sweeper_evaluates_at_most_once_per_interval(
    tidings: Tidings, clock: ManualClock, receiver: Receiver
) -> None:
    held_offer(tidings, clock)
    s = sweeper(tidings, receiver.url, interval_seconds=30)
    assert s.tick(clock.now()) is not None
    clock.advance(10)
    assert s.tick(clock.now()) is None
    clock.advance(20)
    assert s.tick(clock.now()) is not None
    assert len(receiver.requests) == 1


def two_workers(t: Tidings, receiver: Receiver) -> tuple[AlertSweeper, AlertSweeper]:
    """Two workers' sweepers on a 30 s interval, sharing the rounds."""
    first, second = (sweeper(t, receiver.url, interval_seconds=30) for _ in range(2))
    return first, second


def evaluated(round_: AlertRound | None) -> bool:
    return round_ is not None and round_.changes is not None


def skipped(round_: AlertRound | None) -> bool:
    """Ticked, but another worker's round covered it: nothing evaluated."""
    return round_ is not None and round_.changes is None


def test_workers_share_one_evaluation_per_interval(
    tidings: Tidings, clock: ManualClock, receiver: Receiver
) -> None:
    held_offer(tidings, clock)
    first, second = two_workers(tidings, receiver)
    opened = first.tick(clock.now())
    assert opened is not None and opened.changes and len(opened.changes.opened) == 1
    # The second worker's first tick falls in the round the first one took.
    assert skipped(second.tick(clock.now()))
    clock.advance(15)
    assert first.tick(clock.now()) is None  # its own timer: too soon
    clock.advance(20)
    assert evaluated(second.tick(clock.now()))
    # A clock set back must not silence the alerts until it catches up.
    clock.advance(-3600)
    assert evaluated(first.tick(clock.now()))


def round_cost(t: Tidings) -> float:
    with t.db.transaction() as conn:
        cur = conn.execute("SELECT took_seconds FROM alert_rounds WHERE scope = 'alerts'")
        row = cur.fetchone()
        assert row is not None, "no shared round was recorded"
        return float(row["took_seconds"])


def test_a_costly_round_spaces_the_next_in_proportion(
    tidings: Tidings, clock: ManualClock, receiver: Receiver
) -> None:
    held_offer(tidings, clock)
    first, second = two_workers(tidings, receiver)
    assert evaluated(first.tick(clock.now()))
    assert 0 < round_cost(tidings) < 5  # measured: what this round took
    # As if the scans had taken 10 s (a million intents due): the next
    # round waits 20 times that, not the 30 s interval.
    with tidings.db.transaction() as conn:
        conn.execute("UPDATE alert_rounds SET took_seconds = 10 WHERE scope = 'alerts'")
    clock.advance(31)
    assert skipped(second.tick(clock.now()))
    clock.advance(170)  # 201 s after the costly round
    assert evaluated(first.tick(clock.now()))
    assert round_cost(tidings) < 5  # the cheap round's own cost replaces it


def test_a_round_past_its_statement_timeout_is_counted(
    tidings: Tidings, clock: ManualClock, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidings.observability import alerts

    held_offer(tidings, clock)
    real = alerts.evaluate

    def slow(conn: Any, now: Any, config: AlertConfig) -> Any:
        # A real timeout from the server, as a scan over a huge backlog gets.
        conn.execute("SET LOCAL statement_timeout = 50")
        conn.execute("SELECT pg_sleep(0.5)")
        return real(conn, now, config)

    others = alerts.EVALUATORS[1:]
    assert alerts.EVALUATORS[0] is real
    monkeypatch.setattr(alerts, "EVALUATORS", (slow, *others))
    first, second = two_workers(tidings, receiver)
    # The scan past its timeout costs the round its own alerts, not the round.
    failed = first.tick(clock.now())
    assert failed is not None and failed.changes is not None and not failed.changes.opened
    assert round_cost(tidings) >= 0.05
    monkeypatch.setattr(alerts, "EVALUATORS", (real, *others))
    # Counted: the other worker does not start the same round again at once.
    assert skipped(second.tick(clock.now()))
    clock.advance(31)
    again = second.tick(clock.now())
    assert again is not None and again.changes is not None and again.changes.opened
