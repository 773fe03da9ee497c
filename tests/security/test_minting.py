"""Invariant 11: a tenant's `send` key cannot get a reset link minted for
someone else's account.

The attack: with `TIDINGS_TOKEN_MINT_URL` set, minters were chosen by
event class alone, and the mint request named the recipient's ref but not
the tenant nor where the message goes. A hostile tenant's `send` key posted
`event_class: password_reset` with the victim's account ref and its own
phone: the application minted a fresh reset link for the victim's account
and tidings texted it to the attacker. Now minting is only for the tenants
(or tenant:event_class pairs) configured for it, and the signed request
carries the tenant, the channel and the destination's keyed reference, so
the application can check the destination belongs to the account.

A real HTTP minter on loopback, intents through the HTTP API, the real
worker dispatching to the in-process simulator.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from tidings import IntentState, ManualClock, Tidings
from tidings.dispatch.minting import minters_from_env
from tidings.platform.signing import SIGNATURE_HEADER, verify_signature

from ..integration.api_support import PHONE, auth, client, intent_body, new_key
from ..integration.dispatch_helpers import sends, simulator, worker

SECRET = "mint-secret-0123456789ab"
VICTIM_ACCOUNT = "account-42"


class Minter:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.verified: list[bool] = []


@pytest.fixture
def minter_url() -> Iterator[tuple[Minter, str]]:
    """The application's mint endpoint: a link for whatever it is asked."""
    state = Minter()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            state.verified.append(verify_signature(SECRET, self.headers[SIGNATURE_HEADER], body))
            request = json.loads(body)
            state.requests.append(request)
            link = f"https://app.example/reset?account={request['recipient_ref']}&t=fresh"
            answer = json.dumps({"variables": {"reset_link": link}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}/mint"
    server.shutdown()
    server.server_close()


def _reset_template(t: Tidings) -> None:
    t.publish_template(
        "reset",
        channel="sms",
        body="Reset your password: {{ reset_link }}",
        required_variables=["reset_link"],
        dispatch_variables=["reset_link"],
    )


def _reset_intent(t: Tidings, key: str, n: int) -> str:
    body = intent_body(
        t,
        n,
        idempotency_key=f"reset:{n}",
        recipient={"ref": VICTIM_ACCOUNT, "phone": PHONE},
        template={"name": "reset"},
        variables={},
        event_class="password_reset",
    )
    answer = client(t).post("/v1/intents", json=body, headers=auth(key))
    assert answer.status_code in (200, 201), answer.text
    return str(answer.json()["id"])


def _environment(url: str, tenants: str) -> dict[str, str]:
    return {
        "TIDINGS_TOKEN_MINT_URL": url,
        "TIDINGS_TOKEN_MINT_SECRET": SECRET,
        "TIDINGS_TOKEN_MINT_EVENT_CLASSES": "password_reset",
        "TIDINGS_TOKEN_MINT_TENANTS": tenants,
    }


def test_a_tenant_not_configured_for_minting_never_reaches_the_minter(
    tidings: Tidings, clock: ManualClock, minter_url: tuple[Minter, str]
) -> None:
    minter, url = minter_url
    app, hostile = tidings.for_tenant("app"), tidings.for_tenant("hostile")
    _reset_template(app)
    _reset_template(hostile)
    core = simulator(clock)
    w = worker(tidings, core)
    w.minters = dict(minters_from_env(_environment(url, "app:password_reset")))

    stolen = _reset_intent(hostile, new_key(tidings, "hostile", ["send"]), 1)
    w.dispatch_once()
    assert minter.requests == []
    refused = hostile.get(stolen)
    assert refused.state is IntentState.FAILED
    assert refused.decision_code == "MINT_NOT_ALLOWED"
    assert sends(core) == []

    # The configured tenant still gets its links, and the application is
    # told whose intent it is and where the link goes (keyed, not raw).
    legit = app.get(_reset_intent(app, new_key(tidings, "app", ["send"]), 2))
    w.dispatch_once()
    [request] = minter.requests
    assert minter.verified == [True]
    assert request["tenant_id"] == "app"
    assert request["channel"] == "sms"
    assert request["destination_hash"] == legit.destination_hash is not None
    assert PHONE not in json.dumps(request) and PHONE.lstrip("+") not in json.dumps(request)
    assert len(sends(core)) == 1


@pytest.mark.parametrize("tenants", ["", "app:other_class"])
def test_minting_is_off_for_everyone_not_listed(
    tidings: Tidings, clock: ManualClock, minter_url: tuple[Minter, str], tenants: str
) -> None:
    minter, url = minter_url
    app = tidings.for_tenant("app")
    _reset_template(app)
    core = simulator(clock)
    w = worker(tidings, core)
    w.minters = dict(minters_from_env(_environment(url, tenants)))
    intent = _reset_intent(app, new_key(tidings, "app", ["send"]), 1)
    w.dispatch_once()
    assert minter.requests == []
    assert app.get(intent).decision_code == "MINT_NOT_ALLOWED"
    assert sends(core) == []
