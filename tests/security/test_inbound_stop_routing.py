"""An inbound STOP opts out the tenants that send from the number it was
sent to, and no other (issue #39, finding 6).

A STOP used to land on the one configured tenant (TIDINGS_INBOUND_TENANT):
a recipient who replied STOP to tenant b kept receiving b's texts, and a
tenant that never texted them was opted out. Carriers and providers
enforce STOP per sender number (Twilio blocks further messages "from that
Twilio number"; a Messaging Service's whole pool with Advanced Opt-Out), so
an inbound message is resolved by the provider account it came through and
the number it was sent to (`TIDINGS_SENDER_NUMBERS`): every tenant sending
from that number is opted out, a tenant with a number of its own only by
STOPs to that number. The webhooks are the simulator's, signed as it signs
them.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tests.conftest import publish_example_policy
from tests.integration.api_support import client
from tests.integration.dispatch_helpers import offer, publish_offer_template, simulator
from tidings import IntentState, ManualClock, Tidings
from tidings.api.settings import ApiSettings
from tidings.dispatch.runner import Worker
from tidings.dispatch.steps import WorkerConfig
from tidings.providers.outcomes import SendResult
from tidings.providers.simulator.adapter import SimulatorAdapter
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.providers.simulator.receipts import render

SECRET = "inbound-secret-0123456789"
RECIPIENT = "+14155550123"
A_NUMBER, B_NUMBER = "+14155550100", "+14155550200"


def api(t: Tidings, senders: dict[str, str], inbound_tenant: str | None = "a") -> TestClient:
    http = client(t, {"simulator": SimulatorAdapter("http://127.0.0.1:9", SECRET)})
    http.app.state.api_settings = ApiSettings(
        inbound_tenant=inbound_tenant, sender_numbers={"simulator": senders}
    )
    for tenant in ("a", "b", "c"):
        publish_example_policy(t, tenant)
    return http


def inbound(http: TestClient, text: str, to: str | None) -> int:
    body = {"from": RECIPIENT, "text": text, **({"to": to} if to else {})}
    headers, raw = render(body, SECRET, int(time.time()))
    return http.post("/v1/inbound/simulator", content=raw, headers=headers).status_code


def opted_out(db_url: str) -> list[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT tenant_id FROM opt_outs ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def test_a_stop_to_a_tenants_own_number_opts_out_that_tenant_alone(
    tidings: Tidings, db_url: str
) -> None:
    http = api(tidings, {"a": A_NUMBER, "b": B_NUMBER})
    assert inbound(http, "STOP", B_NUMBER) == 200  # the recipient replied to b's text
    assert opted_out(db_url) == ["b"]  # b stops; a, which never texted them, does not


def test_a_stop_to_a_shared_number_opts_out_every_tenant_sending_from_it(
    tidings: Tidings, db_url: str
) -> None:
    http = api(tidings, {"a": A_NUMBER, "b": B_NUMBER, "c": A_NUMBER})
    assert inbound(http, "STOP", A_NUMBER) == 200
    assert opted_out(db_url) == ["a", "c"]  # the provider blocks the number for both
    assert inbound(http, "START", A_NUMBER) == 200
    assert opted_out(db_url) == []


def test_a_start_to_one_number_does_not_opt_the_recipient_back_in_elsewhere(
    tidings: Tidings, db_url: str
) -> None:
    http = api(tidings, {"a": A_NUMBER, "b": B_NUMBER})
    assert inbound(http, "STOP", A_NUMBER) == 200
    assert inbound(http, "STOP", B_NUMBER) == 200
    assert inbound(http, "START", B_NUMBER) == 200
    assert opted_out(db_url) == ["a"]


def test_a_stop_to_a_number_nobody_sends_from_opts_out_nobody(
    tidings: Tidings, db_url: str
) -> None:
    """The fallback tenant has a number of its own: a STOP to another
    number is not about its texts."""
    http = api(tidings, {"a": A_NUMBER})
    assert inbound(http, "STOP", "+14155550999") == 404
    assert opted_out(db_url) == []


def test_without_a_mapping_the_configured_tenant_still_gets_the_stop(
    tidings: Tidings, db_url: str
) -> None:
    http = api(tidings, {}, inbound_tenant="b")
    assert inbound(http, "STOP", A_NUMBER) == 200
    assert inbound(http, "STOP", None) == 200  # a message that names no number
    assert opted_out(db_url) == ["b"]


class Recording(InProcessSimulatorAdapter):
    """The in-process simulator, remembering the sender of each SMS."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.senders: list[str | None] = []

    def send(self, message: Any, idempotency_key: str) -> SendResult:
        self.senders.append(message.sender)
        return super().send(message, idempotency_key)


def test_a_tenant_sends_from_its_own_number_and_its_stop_suppresses_its_next_text(
    tidings: Tidings, db_url: str, clock: ManualClock
) -> None:
    http = api(tidings, {"b": B_NUMBER})
    b = tidings.for_tenant("b")
    publish_offer_template(b)
    settings = tidings.runtime.settings.model_copy(
        update={"sender_numbers": {"simulator": {"b": B_NUMBER}}}
    )
    runtime = dataclasses.replace(tidings.runtime, settings=settings)
    adapter = Recording(simulator(clock))
    w = Worker(runtime, {"sms": adapter}, config=WorkerConfig(seed=7, reconcile_concurrency=1))
    first = offer(b, 1, recipient={"ref": "m1", "phone": RECIPIENT})
    assert w.dispatch_once("sms") == 1 and adapter.senders == [B_NUMBER]
    assert b.get(first.id).state is IntentState.ACCEPTED
    assert inbound(http, "STOP", B_NUMBER) == 200
    second = offer(b, 2, recipient={"ref": "m1", "phone": RECIPIENT})
    w.dispatch_once("sms")
    got = b.get(second.id)
    assert got.state is IntentState.SUPPRESSED and got.decision_code == "OPTED_OUT"
