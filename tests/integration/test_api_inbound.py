"""Inbound STOP/START over HTTP, authenticated by the provider's signature."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from tidings import IntentState, ManualClock, Tidings
from tidings.api.app import create_app
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.receipts import render

from .dispatch_helpers import offer, publish_offer_template, simulator, worker

SECRET = "inbound-secret-0123456789"


def post(client: TestClient, body: dict[str, str], secret: str = SECRET) -> int:
    headers, raw = render(body, secret, int(time.time()))
    return client.post("/v1/inbound/simulator", content=raw, headers=headers).status_code


def test_stop_over_http_opts_out_before_the_next_send(tidings: Tidings, clock: ManualClock) -> None:
    adapter = SimulatorAdapter("http://127.0.0.1:9", SECRET)
    client = TestClient(create_app(tidings, adapters={"simulator": adapter}))
    publish_offer_template(tidings)
    assert (
        post(client, {"from": "+14155550123", "text": "STOP"}, secret="wrong-secret-000000") == 401
    )
    assert post(client, {"from": "+14155550123", "text": "STOP"}) == 200
    intent = offer(tidings, 1)
    w = worker(tidings, simulator(clock))
    w.dispatch_once()
    got = tidings.get(intent.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "OPTED_OUT"
    assert post(client, {"from": "+14155550123", "text": "start"}) == 200
    again = offer(tidings, 2)
    w.dispatch_once()
    assert tidings.get(again.id).state is IntentState.ACCEPTED
    assert post(client, {"from": "not a number", "text": "STOP"}) == 400
