"""Only a fact about the recipient suppresses the recipient (DESIGN
invariant 12, issue 37). A provider's refusal of the request, the sender or
the account fails that intent with a code saying whose fault it is, and the
next intent to the same address is sent; a refusal about the address (it
does not exist, it opted out) still blocks the next one.

The refusals come from the real adapters' answer parsing, fed the
providers' documented error bodies (sources in docs/providers.md)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tidings import IntentState, ManualClock, Tidings
from tidings.domain.breaker import RESTRICTED_BASE_SECONDS
from tidings.providers.messages import OutboundMessage
from tidings.providers.outcomes import Rejected, SendResult
from tidings.providers.postmark import PostmarkAdapter
from tidings.providers.simulator.core import SimulatorCore
from tidings.providers.simulator.in_process import InProcessSimulatorAdapter
from tidings.providers.vonage import VonageAdapter

from .dispatch_helpers import offer, publish_offer_template, sends, simulator, worker


def _postmark(status: int, body: dict[str, Any]) -> SendResult:
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(status, json=body)),
        base_url="https://api.postmarkapp.com",
    )
    adapter = PostmarkAdapter("server-token", sender="notify@tidings.test", client=client)
    return adapter.send(OutboundMessage("email", "someone@example.test", "x"), "tdg:k:1")


def _vonage(status: str) -> SendResult:
    body = {"message-count": "1", "messages": [{"status": status, "error-text": "x"}]}
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=body)),
        base_url="https://rest.nexmo.com",
    )
    adapter = VonageAdapter("key", "secret", sender="Tidings", client=client)
    return adapter.send(OutboundMessage("sms", "+14155550123", "x"), "tdg:k:1")


class RefusesOnce(InProcessSimulatorAdapter):
    """The simulator, whose first answer is `refusal` (a real adapter's)."""

    def __init__(self, core: SimulatorCore, refusal: SendResult) -> None:
        super().__init__(core)
        self.refusal: SendResult | None = refusal

    def send(self, message: Any, idempotency_key: str) -> SendResult:
        refusal, self.refusal = self.refusal, None
        return refusal or super().send(message, idempotency_key)


REQUEST_LEVEL = {
    "postmark 300 (empty body, bad From)": (
        lambda: _postmark(422, {"ErrorCode": 300, "Message": "Invalid email request"}),
        "REQUEST_INVALID",
    ),
    "vonage 3 (invalid parameters)": (lambda: _vonage("3"), "REQUEST_INVALID"),
    "vonage 29 (demo account whitelist)": (lambda: _vonage("29"), "ACCOUNT_RESTRICTED"),
}

RECIPIENT_LEVEL = {
    "vonage 6 (unrecognised number prefix)": (lambda: _vonage("6"), "INVALID_DESTINATION"),
}


def _first_then_second(
    tidings: Tidings, clock: ManualClock, refusal: SendResult
) -> tuple[Any, Any, SimulatorCore]:
    publish_offer_template(tidings)
    core = simulator(clock)
    w = worker(tidings, core, adapter=RefusesOnce(core, refusal))
    first = offer(tidings, 1)
    w.dispatch_once()
    clock.advance(RESTRICTED_BASE_SECONDS)  # an account restriction's pause has ended
    second = offer(tidings, 2)  # another member, the same phone number
    w.dispatch_once()
    return tidings.get(first.id), tidings.get(second.id), core


@pytest.mark.parametrize("case", sorted(REQUEST_LEVEL))
def test_a_refusal_of_the_request_fails_it_and_suppresses_nobody(
    tidings: Tidings, clock: ManualClock, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, code = REQUEST_LEVEL[case]
    refusal = make()
    assert isinstance(refusal, Rejected) and refusal.code.value == code
    first, second, core = _first_then_second(tidings, clock, refusal)
    assert (first.state, first.decision_code) == (IntentState.FAILED, code)
    assert second.state is IntentState.ACCEPTED  # the address was never blocked
    assert len(sends(core)) == 1
    alerts = [getattr(r, "alert", None) for r in caplog.records]
    assert f"provider_refused:sms:simulator:{code}" in alerts  # the operator hears of it


@pytest.mark.parametrize("case", sorted(RECIPIENT_LEVEL))
def test_a_refusal_about_the_address_still_blocks_the_next_send(
    tidings: Tidings, clock: ManualClock, case: str
) -> None:
    make, code = RECIPIENT_LEVEL[case]
    refusal = make()
    assert isinstance(refusal, Rejected) and refusal.code.value == code
    first, second, core = _first_then_second(tidings, clock, refusal)
    assert (first.state, first.decision_code) == (IntentState.FAILED, code)
    assert second.state is IntentState.SUPPRESSED
    assert sends(core) == []
