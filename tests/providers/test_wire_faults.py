"""The faults #37 names, through each real adapter over its provider's wire:
a 5xx after the provider took the message, and its receipts arriving with
no answer ever read. The answer must never invite a resend (none of these
providers honours an idempotency key, `honours_idempotency` in the
simulator's profiles.py: a resend is a second message), and the
receipts must name our attempt, so reconciliation ties the message to it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tidings.domain.keys import attempt_key
from tidings.providers.messages import WebhookRequest
from tidings.providers.outcomes import Indeterminate, RejectCode
from tidings.providers.simulator.receipts import ReceiptDispatcher

from . import test_wire_postmark, test_wire_sendgrid, test_wire_twilio, test_wire_vonage

KEY = attempt_key(uuid.UUID(int=0x37), 1)
# Each wire's test helpers: the core, the real adapter over it and a clock;
# and a message for its channel. Twilio's helper leaves `wire` to its caller.
WIRES: dict[str, tuple[Callable[..., Any], Callable[[], Any], dict[str, Any]]] = {
    "twilio": (test_wire_twilio.wired, test_wire_twilio.sms, {"wire": True}),
    "postmark": (test_wire_postmark.wired, test_wire_postmark.mail, {}),
    "sendgrid": (test_wire_sendgrid.wired, test_wire_sendgrid.mail, {}),
    "vonage": (test_wire_vonage.wired, test_wire_vonage.sms, {}),
}


@pytest.mark.parametrize("name", WIRES)
def test_a_5xx_after_acceptance_is_never_resent_and_its_receipts_name_our_attempt(
    name: str,
) -> None:
    wired, message, extra = WIRES[name]
    core, adapter, clock = wired(rate_5xx_after_accept=1.0, **extra)
    result = adapter.send(message(), KEY)
    # Taken, though the answer says otherwise: indeterminate, so the
    # dispatcher reconciles it and never sends it again blind.
    assert isinstance(result, Indeterminate), result
    assert result.code is RejectCode.PROVIDER_ERROR
    [entry] = core.ledger()
    assert entry["outcome"] == "error_5xx_after_accept" and entry["provider_message_id"]

    posted: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        request.read()
        posted.append(request)
        return httpx.Response(200)

    clock.now += 5
    receiver = httpx.Client(transport=httpx.MockTransport(receive))
    ReceiptDispatcher(core, client=receiver, wall_clock=clock).run_once()
    assert posted, "the message taken reports its fate"
    seen = [
        obs
        for request in posted
        for obs in adapter.verify_webhook(
            WebhookRequest(
                "POST",
                str(request.url),
                dict(request.headers),
                request.content,
                dict(request.url.params),
            )
        )
    ]
    assert {obs.attempt_key for obs in seen} == {KEY}
    assert {obs.provider_message_id for obs in seen} <= {entry["provider_message_id"], None}
